"""Shared test fixtures: published data location, GPU skip, hypothesis profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
#: a local copy of the published data beside the checkout (CI has one, a fresh clone not)
SHARED_DATA = ROOT.parent / "shared" / "data"

# Tests never download. Published data that the package does not ship come from the data
# folder: the user's EMPIRICAL_BATCH_DATA, else the local copy beside the checkout; a test
# that needs a file found in neither skips, saying which file and how to get it.
if not os.environ.get("EMPIRICAL_BATCH_DATA") and SHARED_DATA.is_dir():
    os.environ["EMPIRICAL_BATCH_DATA"] = str(SHARED_DATA)
os.environ["EMPIRICAL_BATCH_OFFLINE"] = "1"

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def published():
    """``published(path)``: the local file of a fetched published data file
    (`empirical_batch.datasets.fetch`, never downloading); the test skips when it is not
    in the data folder, with the message that says where to get it."""
    from empirical_batch.datasets import fetch
    from empirical_batch.errors import DatasetError

    def get(path: str) -> Path:
        try:
            return fetch(path, download=False)
        except DatasetError as exc:
            pytest.skip(str(exc))

    return get


@pytest.fixture
def shared_data() -> Path:
    """The local copy of the published data beside the checkout, for tests that compare
    with the provider's own derived tables (not part of what the library fetches)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the provider's tables are not at {SHARED_DATA}")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.get_closest_marker("gpu"):  # not "gpu" in keywords: that matches path names
            item.add_marker(skip)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models: torch's intra-op thread pool costs more than it saves on 2 shared cores.

    Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def text_corpus(monkeypatch) -> Path:
    """A text file for the ``text_lm`` task, pointed to by ``EMPIRICAL_BATCH_TEXT`` so that
    presets which use the whole default corpus find it without a download: Tiny
    Shakespeare when it is in the data folder, else the excerpt the package ships (the
    tiny preset uses only its first characters; plumbing tests of the larger presets)."""
    from empirical_batch.datasets import bundled, locate

    path = locate("tinyshakespeare/input.txt") or bundled("tinyshakespeare/excerpt.txt")
    monkeypatch.setenv("EMPIRICAL_BATCH_TEXT", str(path))
    return path
