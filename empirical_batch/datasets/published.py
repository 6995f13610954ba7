"""One loader per published data set, each with its `Provenance`."""

from __future__ import annotations

import dataclasses
import numbers
import os
from pathlib import Path

from .._io import read_csv
from ..errors import InputError, NotFoundError
from ..loaders import RCPTable, load_mlperf_curves, load_mlperf_rcp
from ..provenance import Provenance
from ..sweeps import Sweep, load_sweep
from .cache import bundled, fetch
from .tables import PublishedTable, Zhang2024

__all__ = ["EXCERPT_CHARS", "PROVENANCE", "kaplan2020", "mccandlish2018_table1", "mlperf_curves",
           "mlperf_rcp", "provenance", "tiny_shakespeare", "vaessen2024", "zhang2024"]

PathLike = str | os.PathLike[str]

PROVENANCE: dict[str, Provenance] = {p.name: p for p in (
    Provenance(
        "zhang2024", "steps to a target loss at 9 batch sizes x 5 model sizes (C4, OLMo)",
        "H. Zhang, D. Morwani, N. Vyas, J. Wu, D. Zou, U. Ghai, D. Foster, S. Kakade, "
        "How Does Critical Batch Size Scale in Pre-training? (arXiv 2410.21676, ICLR 2025)",
        "hlzhang109/critical-batch-size, plots/chinchilla.ipynb, commit "
        "c5b509d8cf276bb40388172a08f9d6f644cf44dc", "MIT",
        "transcribed from the notebook's saved cell outputs: per (model, batch size) the "
        "fewest steps of any run of the sweep (constant rate with weight averaging) to "
        "reach the Chinchilla-optimal C4 validation loss (steps_to_target); cell 5's revised "
        "list feeds the paper's fits (steps_to_target_revised); batch sizes in sequences "
        "of 512 tokens; the best run's rate, beta2 field and EWA decay parsed from its name",
        ("zhang2024_critical_batch_size/steps_to_target.csv (shipped)",)),
    Provenance(
        "mlperf_rcp", "MLPerf reference convergence points: training to the target per "
        "seed, per batch size, with tuned hyperparameters",
        "MLCommons, MLPerf Training rules and reference convergence points "
        "(mlperf_logging/rcp_checker)",
        "mlcommons/logging, mlperf_logging/rcp_checker/<ruleset>/rcps_<benchmark>.json, "
        "commit 7bbf792686936919201796120b970dd820331099", "Apache-2.0",
        "the 99 rcps_*.json files copied verbatim (rulesets training_1.0.0 … and hpc_*), "
        "read by empirical_batch.loaders.load_mlperf_rcp",
        ("mlperf_rcp/raw/<ruleset>/rcps_<benchmark>.json (shipped)",)),
    Provenance(
        "mlperf_curves", "evaluation curves of MLPerf Training submissions v1.0–v5.1, batch "
        "size and hyperparameters per run (13,150 runs, 241,433 evaluations)",
        "MLCommons, MLPerf Training results v1.0–v5.1",
        "mlcommons/training_results_v1.0 … _v5.1 (commits recorded per round in runs.csv's "
        "repo_commit), */results/*/*/result_N.txt", "Apache-2.0",
        "the :::MLLOG records of every result file under 4 MiB extracted into runs.csv (one "
        "row per run) and evals.csv (one row per evaluation); unet3d and minigo dropped",
        ("mlperf_training_results_curves/runs.csv", "mlperf_training_results_curves/evals.csv")),
    Provenance(
        "vaessen2024", "wav2vec 2.0 BASE pre-training on LibriSpeech 960 h at 7 batch sizes "
        "(87.5 s … 80 min of audio per step), 400k steps each",
        "N. Vaessen, D. A. van Leeuwen, The Effect of Batch Size on Contrastive "
        "Self-Supervised Speech Representation Learning (arXiv 2402.13723, 2024)",
        "nikvaessen/w2v2-batch-size, plot/ssl_cyclic_train_plots/csv/ and plot/ft_asr*/, "
        "commit 0189e5ea3523f9aa0bdfdecb886df81761b42fa9", "MIT",
        "copied verbatim: one curve per batch size (the retained run of a 3-value "
        "learning-rate sweep); validation metrics every 5,000 steps (shipped), training "
        "metrics every 100 steps (fetched); batch-size labels mapped to seconds of audio",
        ("vaessen2024_w2v2_batch_size/ssl_curves/val_*.csv (shipped)",
         "vaessen2024_w2v2_batch_size/asr_downstream/*.csv (shipped)",
         "vaessen2024_w2v2_batch_size/ssl_curves/train_*.csv")),
    Provenance(
        "mccandlish2018_table1", "critical batch and simple noise scale per task, at the "
        "start of training and averaged over it: all ten rows",
        "S. McCandlish, J. Kaplan, D. Amodei, An Empirical Model of Large-Batch Training "
        "(arXiv 1812.06162, 2018), Table 1", "the paper's Table 1", "facts (no licence)",
        "typed in from two independent transcriptions that agree (page and row not "
        "re-checked against the PDF); every value has _low/_high columns, equal for a single "
        "value, the range over games for Atari; Dota 5v5's start B_crit is not given and its "
        "average is a lower bound (b_crit_average_is_lower_bound); units: examples, except "
        "Billion Word (tokens) and the RL rows (frames)",
        ("mccandlish2018/table1.csv (shipped)",)),
    Provenance(
        "kaplan2020", "the critical batch against the loss: B_crit(L) = B_star / "
        "L^(1/alpha_B), B_star ~ 2e8 tokens, alpha_B ~ 0.21",
        "J. Kaplan et al., Scaling Laws for Neural Language Models (arXiv 2001.08361, "
        "2020), section 5.1", "the paper's text", "facts (no licence)",
        "typed in; L in nats per token; the section number not re-checked against the PDF",
        ("kaplan2020/constants.csv (shipped)",)),
    Provenance(
        "tiny_shakespeare", "1,115,394 characters of Shakespeare's plays as plain text, "
        "the standard small corpus of character-level language models",
        "A. Karpathy, char-rnn (2015)",
        "karpathy/char-rnn, data/tinyshakespeare/input.txt, commit "
        "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e (the repository's code is MIT-licensed)",
        "public domain",
        "the whole file, fetched; its first 65,536 characters shipped as excerpt.txt",
        ("tinyshakespeare/input.txt", "tinyshakespeare/excerpt.txt (shipped)")),
)}

#: characters of Tiny Shakespeare shipped with the package (its first ones)
EXCERPT_CHARS = 65_536


def zhang2024() -> Zhang2024:
    """Zhang et al. (2024): steps to the Chinchilla-optimal C4 loss per batch size for
    5 OLMo models (85M … 1.2B), shipped (MIT).

    >>> z = zhang2024()
    >>> z.models
    ('85M', '151M', '302M', '604M', '1.2B')
    """
    frame = read_csv(bundled("zhang2024_critical_batch_size/steps_to_target.csv"))
    return Zhang2024(frame=frame, provenance=PROVENANCE["zhang2024"])


def mlperf_rcp(*, benchmark: str | None = None) -> RCPTable:
    """MLPerf reference convergence points, per seed (`load_mlperf_rcp` on the shipped
    ``rcps_*.json`` files, Apache-2.0); ``benchmark`` keeps one benchmark."""
    table = load_mlperf_rcp(bundled("mlperf_rcp/raw"), benchmark=benchmark)
    return dataclasses.replace(table, provenance=PROVENANCE["mlperf_rcp"])


def mlperf_curves(benchmark: str, *, rounds: list[str] | None = None,
                  division: str | None = "closed", metric: str | None = None,
                  examples_per_epoch: float | None = None, data_home: PathLike | None = None,
                  download: bool | None = None) -> Sweep:
    """Evaluation curves of MLPerf Training submissions as a sweep (`load_mlperf_curves`
    on ``runs.csv``/``evals.csv``, 20 MB, fetched into the data folder; see
    `empirical_batch.datasets.cache`)."""
    runs = fetch("mlperf_training_results_curves/runs.csv", data_home=data_home,
                 download=download)
    fetch("mlperf_training_results_curves/evals.csv", data_home=data_home, download=download)
    sweep = load_mlperf_curves(runs.parent, benchmark, rounds=rounds, division=division,
                               metric=metric, examples_per_epoch=examples_per_epoch)
    return sweep.with_metadata(provenance=PROVENANCE["mlperf_curves"])


#: Vaessen & van Leeuwen's batch-size labels in seconds of audio per optimizer step
W2V2_SECONDS = {"87.5 sec": 87.5, "150 sec": 150.0, "5 min": 300.0, "10 min": 600.0,
                "20 min": 1200.0, "40 min": 2400.0, "80 min": 4800.0}
_W2V2_METRICS = {"val_acc": True, "val_loss_contrastive": False, "val_loss_diversity": False,
                 "train_acc": True, "train_loss": False, "train_loss_contrastive": False}


def vaessen2024(metric: str = "val_acc", *, data_home: PathLike | None = None,
                download: bool | None = None) -> Sweep:
    """Vaessen & van Leeuwen (2024): wav2vec 2.0 pre-training curves at 7 batch sizes, as
    a sweep with the batch size in seconds of audio per step (one run per batch size).

    ``metric``: ``val_acc`` (contrastive accuracy, higher is better; the default),
    ``val_loss_contrastive``, ``val_loss_diversity`` (every 5,000 steps, shipped) or
    ``train_acc``, ``train_loss``, ``train_loss_contrastive`` (every 100 steps, 0.8–0.9 MB
    each, fetched)."""
    if metric not in _W2V2_METRICS:
        raise InputError(f"metric must be one of {sorted(_W2V2_METRICS)}, got {metric!r}")
    rel = f"vaessen2024_w2v2_batch_size/ssl_curves/{metric}.csv"
    path = (fetch(rel, data_home=data_home, download=download) if metric.startswith("train")
            else bundled(rel))
    d = read_csv(path)
    unknown = set(d["batch size"]) - set(W2V2_SECONDS)
    if unknown:
        raise InputError(f"{path}: unknown batch-size labels {sorted(unknown)}")
    d = d.assign(run=d["batch size"], batch_size=d["batch size"].map(W2V2_SECONDS))
    sweep = load_sweep(d[["run", "batch_size", "step", "value"]], metric="value",
                       metric_name=metric, higher_is_better=_W2V2_METRICS[metric])
    return sweep.with_source(str(path)).with_metadata(provenance=PROVENANCE["vaessen2024"])


def mccandlish2018_table1() -> PublishedTable:
    """Table 1 of McCandlish et al. (2018): B_crit and B_simple per task at the start of
    training and averaged over it (``*_low``/``*_high`` columns; see its provenance)."""
    return PublishedTable(frame=read_csv(bundled("mccandlish2018/table1.csv")),
                          provenance=PROVENANCE["mccandlish2018_table1"])


def kaplan2020() -> PublishedTable:
    """Kaplan et al. (2020)'s constants of $B_{crit}(L) = B_*/L^{1/\\alpha_B}$: one row
    each (``name``, ``value``, ``unit``, ``meaning``, ``source``)."""
    return PublishedTable(frame=read_csv(bundled("kaplan2020/constants.csv")),
                          provenance=PROVENANCE["kaplan2020"])


def tiny_shakespeare(*, chars: int | None = None, data_home: PathLike | None = None,
                     download: bool | None = None) -> Path:
    """The Tiny Shakespeare text file (UTF-8).

    With ``chars`` at most `EXCERPT_CHARS`, the shipped excerpt (the file's first 65,536
    characters: its first ``chars`` characters are the file's), so that small uses need
    no download; otherwise the whole file (1.1 MB), fetched into the data folder."""
    if chars is not None:
        if isinstance(chars, bool) or not isinstance(chars, numbers.Integral) or chars < 0:
            raise InputError(f"chars must be a non-negative integer, got {chars!r}")
        if 0 < chars <= EXCERPT_CHARS:
            return bundled("tinyshakespeare/excerpt.txt")
    return fetch("tinyshakespeare/input.txt", data_home=data_home, download=download)


def provenance(name: str) -> Provenance:
    """The `Provenance` of the data set ``name`` (a loader's name)."""
    try:
        return PROVENANCE[name]
    except KeyError:
        raise NotFoundError(f"no published data set {name!r} (known: "
                            f"{', '.join(PROVENANCE)})") from None
