"""`empirical_batch.datasets`: shipped tables with provenance, fetched files by checksum,
and one clear error when a file cannot be had."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from empirical_batch import datasets
from empirical_batch.datasets import registry
from empirical_batch.errors import DatasetError, InputError, NotFoundError
from empirical_batch.fit import TradeoffFit
from empirical_batch.provenance import Provenance
from empirical_batch.sweeps import Sweep

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "empirical_batch"


# ------------------------------------------------------------------ shipped data
def test_zhang2024_fit_prints_the_b_crit_of_the_published_page():
    """`datasets.zhang2024().fit()` gives, model by model, the B_crit and interval that
    docs/published.md shows (written by analysis/published_sweeps.py with 2000 draws)."""
    z = datasets.zhang2024()
    assert z.models == ("85M", "151M", "302M", "604M", "1.2B") and len(z.frame) == 45
    fits = z.fit(n_boot=2000, seed=0)
    page = (ROOT / "docs" / "published.md").read_text()
    printed = str(fits)
    for _, row in fits.frame.iterrows():
        model = re.escape(row["model"])
        m = re.search(rf"^\| {model} \| [\d.]+ \| ([\d,]+) \| ([\d,]+)–([\d,]+) \|", page,
                      re.M)
        assert m, row["model"]
        b, lo, hi = (float(g.replace(",", "")) for g in m.groups())
        assert float(f"{row['b_crit']:.3g}") == b
        assert float(f"{row['b_crit_low']:.3g}") == lo
        assert float(f"{row['b_crit_high']:.3g}") == hi
        assert m.group(1) in printed  # the printed table shows the same figure
    assert all(isinstance(f, TradeoffFit) and f.unit == "sequences" for f in fits.fits.values())
    np.testing.assert_allclose(fits.frame["b_crit_tokens"], fits.frame["b_crit"] * 512)
    assert len(repr(fits)) <= 300


def test_zhang2024_steps_per_model_and_revised():
    z = datasets.zhang2024()
    s = z.steps("151M")
    assert list(s.columns) == ["batch_size", "steps"] and len(s) == 9
    r = z.steps("151M", revised=True)
    assert (r["steps"] != s["steps"]).sum() == 3  # B = 512, 2048, 4096 (the notebook's list)
    with pytest.raises(NotFoundError, match=r"no model '7B'.*85M"):
        z.steps("7B")


def test_every_loader_carries_its_provenance():
    objects = {"zhang2024": datasets.zhang2024(), "mlperf_rcp": datasets.mlperf_rcp(),
               "mccandlish2018_table1": datasets.mccandlish2018_table1(),
               "kaplan2020": datasets.kaplan2020(), "vaessen2024": datasets.vaessen2024()}
    for name, obj in objects.items():
        p = obj.provenance
        assert isinstance(p, Provenance) and p.name == name
        assert p is datasets.provenance(name)
        assert p.citation and p.licence and p.source and p.derivation and p.files
    assert set(datasets.PROVENANCE) == set(objects) | {"mlperf_curves", "tiny_shakespeare"}
    assert "provenance" in objects["vaessen2024"].to_dict()  # plain values in to_dict
    with pytest.raises(NotFoundError, match="no published data set 'nope'"):
        datasets.provenance("nope")


def test_mlperf_rcp_is_the_shipped_json():
    t = datasets.mlperf_rcp(benchmark="bert")
    assert t.benchmarks == ("bert",) and t.n_rows == len(t.frame) > 100
    assert len(list(datasets.bundled("mlperf_rcp/raw").rglob("rcps_*.json"))) == 99


def test_vaessen2024_validation_curves_are_shipped():
    s = datasets.vaessen2024()
    assert isinstance(s, Sweep) and s.higher_is_better and s.metric_name == "val_acc"
    assert sorted(s.batch_sizes) == sorted(datasets.W2V2_SECONDS.values())
    loss = datasets.vaessen2024("val_loss_contrastive")
    assert not loss.higher_is_better
    with pytest.raises(InputError, match="metric must be one of"):
        datasets.vaessen2024("wer")


def test_vaessen2024_training_curves_are_fetched(published):
    published("vaessen2024_w2v2_batch_size/ssl_curves/train_loss.csv")
    s = datasets.vaessen2024("train_loss", download=False)
    assert len(s) == 7 * 4000 and not s.higher_is_better


def test_shipped_folders_hold_their_licence():
    files = PACKAGE / "datasets" / "files"
    for folder, words in {"zhang2024_critical_batch_size": "MIT License",
                          "vaessen2024_w2v2_batch_size": "MIT License",
                          "mlperf_rcp": "Apache License"}.items():
        assert words in (files / folder / "LICENSE").read_text()
    for p in datasets.PROVENANCE.values():
        if "MIT" in p.licence or "Apache" in p.licence:
            shipped = [f for f in p.files if f.endswith("(shipped)")]
            for f in shipped:
                assert (files / f.split("/")[0] / "LICENSE").is_file(), f


def test_the_package_names_no_folder_beside_a_checkout():
    found = [f"{p.relative_to(ROOT)}:{i}" for p in PACKAGE.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if "../shared" in line or "shared/data" in line or "SHARED_DATA" in line]
    assert not found


# ------------------------------------------------------------------ fetched files
@pytest.fixture
def served(tmp_path, monkeypatch):
    """A small file registered as fetchable and served over HTTP on the loopback
    address; returns (entry, the served folder, a fresh data folder)."""
    www, home = tmp_path / "www", tmp_path / "home"
    (www / "demo").mkdir(parents=True)
    body = b"batch sizes and steps\n" * 100
    (www / "demo" / "file.txt").write_bytes(body)
    handler = partial(_QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/demo/file.txt"
    entry = registry.DataFile("demo/file.txt", len(body), hashlib.sha256(body).hexdigest(),
                              url, "demo")
    monkeypatch.setitem(registry.FILES, entry.path, entry)
    monkeypatch.delenv(datasets.URL_ENV, raising=False)
    yield entry, www, home
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_fetch_downloads_checks_and_keeps(served):
    entry, _, home = served
    path = datasets.fetch(entry.path, data_home=home, download=True)
    assert path == home / "demo" / "file.txt" and path.stat().st_size == entry.size
    assert datasets.locate(entry.path, data_home=home) == path
    # served no more: the kept copy is used (and checked) without the network
    entry_off = registry.DataFile(entry.path, entry.size, entry.sha256, "http://127.0.0.1:9/x",
                                  "demo")
    registry.FILES[entry.path] = entry_off
    assert datasets.fetch(entry.path, data_home=home, download=True) == path


def test_a_damaged_cached_file_is_refused_and_refetched(served):
    entry, _, home = served
    path = datasets.fetch(entry.path, data_home=home, download=True)
    path.write_bytes(path.read_bytes()[:-1] + b"?")  # same size, one byte changed
    with pytest.raises(DatasetError, match=r"fails its SHA-256 check \(sha256 [0-9a-f]{64}; "
                                           r"expected .*Delete it .*refetch=True"):
        datasets.fetch(entry.path, data_home=home, download=True)
    with pytest.raises(DatasetError, match="fails its SHA-256 check"):
        datasets.locate(entry.path, data_home=home)
    path.write_bytes(b"short")
    with pytest.raises(DatasetError, match=r"\(5 bytes; expected 2,200 bytes"):
        datasets.fetch(entry.path, data_home=home)
    fixed = datasets.fetch(entry.path, data_home=home, download=True, refetch=True)
    assert hashlib.sha256(fixed.read_bytes()).hexdigest() == entry.sha256


def test_a_download_with_other_bytes_is_refused(served):
    entry, www, home = served
    (www / "demo" / "file.txt").write_bytes(b"another version\n")
    with pytest.raises(DatasetError, match=r"download failed .*demo/file.txt"):
        datasets.fetch(entry.path, data_home=home, download=True)
    assert not (home / "demo" / "file.txt").exists()  # nothing unchecked is kept


def test_offline_a_missing_file_is_one_error_naming_file_url_and_place(served, monkeypatch):
    entry, _, home = served
    with pytest.raises(DatasetError) as info:
        datasets.fetch(entry.path, data_home=home, download=False)
    text = str(info.value)
    assert "\n" not in text and entry.url in text and entry.sha256 in text
    assert f"put it at {home / entry.path}" in text and "EMPIRICAL_BATCH_DATA" in text
    monkeypatch.setenv(datasets.OFFLINE_ENV, "1")
    with pytest.raises(DatasetError, match="downloads are off"):
        datasets.fetch(entry.path, data_home=home)
    assert datasets.locate(entry.path, data_home=home) is None


def test_a_mirror_is_tried_first_and_derived_tables_need_one(served, monkeypatch):
    entry, _, home = served
    base = entry.url.removesuffix("/demo/file.txt")
    no_url = registry.DataFile(entry.path, entry.size, entry.sha256, None, "demo")
    monkeypatch.setitem(registry.FILES, entry.path, no_url)
    with pytest.raises(DatasetError, match=r"no single-file download .*EMPIRICAL_BATCH_DATA_URL"):
        datasets.fetch(entry.path, data_home=home, download=True)
    monkeypatch.setenv(datasets.URL_ENV, base + "/")
    assert datasets.fetch(entry.path, data_home=home, download=True).is_file()


def test_data_home_order(monkeypatch, tmp_path):
    monkeypatch.setenv(datasets.DATA_ENV, str(tmp_path / "env"))
    assert datasets.get_data_home() == tmp_path / "env"
    assert datasets.get_data_home(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(datasets.DATA_ENV)
    assert "empirical_batch" in str(datasets.get_data_home())
    table = datasets.available(tmp_path)
    assert set(table["path"]) == set(registry.FILES) and not table["present"].any()


def test_unknown_files_are_named():
    with pytest.raises(NotFoundError, match=r"'x.csv' is not a published data file .*known: "):
        datasets.fetch("x.csv")
    with pytest.raises(NotFoundError, match=r"'x.csv' is not a file shipped"):
        datasets.bundled("x.csv")


def test_tiny_shakespeare_excerpt_and_whole(monkeypatch, tmp_path):
    excerpt = datasets.tiny_shakespeare(chars=100)
    assert excerpt.name == "excerpt.txt"
    assert len(excerpt.read_text(encoding="utf-8")) == datasets.EXCERPT_CHARS
    assert datasets.tiny_shakespeare(chars=np.int64(100)) == excerpt
    with pytest.raises(InputError, match="chars must be a non-negative integer"):
        datasets.tiny_shakespeare(chars=-1)
    with pytest.raises(DatasetError, match=r"tinyshakespeare/input\.txt"):
        datasets.tiny_shakespeare(data_home=tmp_path, download=False)


def test_registry_matches_the_local_copy(published):
    """Where the published files are at hand, each has the registered size and SHA-256."""
    for path in registry.FILES:
        local = published(path)
        assert local.stat().st_size == registry.FILES[path].size


# ------------------------------------------------------------------ the command line
def test_data_command(served, capsys):
    from empirical_batch.cli import main

    entry, _, home = served
    assert main(["data", "list", "--data-home", str(home)]) == 0
    out = capsys.readouterr().out
    assert f"data folder: {home}" in out
    assert "tinyshakespeare/input.txt (1.1 MB, not yet fetched)" in out
    for name in datasets.PROVENANCE:
        assert f"\n{name}  (" in out
    assert main(["data", "fetch", "demo", "--data-home", str(home)]) == 0
    assert capsys.readouterr().out.strip() == str(home / entry.path)
    (home / "tinyshakespeare").mkdir()
    (home / "tinyshakespeare" / "input.txt").write_text("a stand-in")  # listed, not checked
    assert main(["data", "list", "--data-home", str(home)]) == 0
    assert "input.txt (1.1 MB, in the data folder)" in capsys.readouterr().out
    assert main(["data", "path", "zhang2024_critical_batch_size/steps_to_target.csv"]) == 0
    assert Path(capsys.readouterr().out.strip()).is_file()
    assert main(["data", "info", "zhang2024"]) == 0
    assert "arXiv 2410.21676" in capsys.readouterr().out
    assert main(["data", "fetch", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to fetch for 'nope'" in err
    assert main(["data", "path", "demo/file.txt", "--data-home", str(home / "x")]) == 2
    assert "downloads are off" in capsys.readouterr().err  # the tests never download


def test_data_fetch_fetches_what_it_can(served, capsys):
    """Without names every file is fetched that can be; each failure is one line and the
    status is 2 (the registry is cut to loopback and undownloadable entries: tests send
    nothing beyond this machine)."""
    from empirical_batch.cli import main

    entry, _, home = served
    derived = registry.DataFile("demo/derived.csv", 10, "0" * 64, None, "demo")
    saved = dict(registry.FILES)
    registry.FILES.clear()
    registry.FILES.update({entry.path: entry, derived.path: derived})
    try:
        assert main(["data", "fetch", "--data-home", str(home)]) == 2
    finally:
        registry.FILES.clear()
        registry.FILES.update(saved)
    captured = capsys.readouterr()
    assert captured.out.strip() == str(home / entry.path)
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "demo/derived.csv" in errors[0]
