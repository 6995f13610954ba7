"""Shared test fixtures: published data location, GPU skip, hypothesis profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EMPIRICAL_BATCH_SHARED_DATA", ROOT.parent / "shared" / "data"))

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; the test skips when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"published data not found at {SHARED_DATA}")
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
def text_corpus(tmp_path, monkeypatch) -> Path:
    """A text file for the ``text_lm`` task: Tiny Shakespeare from the published data when
    it is there, else a stand-in of grammar text (plumbing tests only), pointed to by
    ``EMPIRICAL_BATCH_TEXT`` so that presets which use the default corpus find it."""
    real = SHARED_DATA / "tinyshakespeare" / "input.txt"
    if real.is_file():
        path = real
    else:
        from empirical_batch.harness.tasks.sequence import grammar_text

        path = tmp_path / "stand_in.txt"
        path.write_text(grammar_text(60_000, 0))
    monkeypatch.setenv("EMPIRICAL_BATCH_TEXT", str(path))
    return path
