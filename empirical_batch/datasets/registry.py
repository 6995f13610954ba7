"""The published data files the library fetches rather than ships: where each comes
from, its size and its SHA-256.

A file's ``path`` is where it lies under the data folder (`empirical_batch.datasets.data_home`),
in the same layout as a local mirror of the published data, so that a folder holding
copies can be pointed at with ``EMPIRICAL_BATCH_DATA`` as it is.

``url`` is the file's upstream address pinned to a commit; ``None`` for tables derived
from many upstream files, which have no single-file download and come from a mirror
(``EMPIRICAL_BATCH_DATA_URL``) or a local copy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FILES", "DataFile"]

_CHAR_RNN = ("https://raw.githubusercontent.com/karpathy/char-rnn/"
             "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare/")
_W2V2 = ("https://raw.githubusercontent.com/nikvaessen/w2v2-batch-size/"
         "0189e5ea3523f9aa0bdfdecb886df81761b42fa9/plot/ssl_cyclic_train_plots/csv/")


@dataclass(frozen=True)
class DataFile:
    """One fetchable file: its place under the data folder, size, checksum and origin."""

    path: str
    size: int
    sha256: str
    url: str | None
    dataset: str

    @property
    def size_text(self) -> str:
        """The size in MB (or kB), for messages."""
        return (f"{self.size / 1e6:.1f} MB" if self.size >= 1e6
                else f"{self.size / 1e3:.0f} kB")


FILES: dict[str, DataFile] = {f.path: f for f in (
    DataFile("tinyshakespeare/input.txt", 1_115_394,
             "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
             _CHAR_RNN + "input.txt", "tiny_shakespeare"),
    DataFile("mlperf_training_results_curves/runs.csv", 6_525_812,
             "28377ec34290ea2635be0f3c460a672de9f197c36c8962e6ae5b142dbb01615d",
             None, "mlperf_curves"),
    DataFile("mlperf_training_results_curves/evals.csv", 13_157_434,
             "1bec5defc93e907b2b8911d20d0c30518ec07865d8942d3e42e5cd1fe431bb4d",
             None, "mlperf_curves"),
    DataFile("vaessen2024_w2v2_batch_size/ssl_curves/train_acc.csv", 933_663,
             "a3dff4cd73df5a6b6eefea1b71afe5caae5a19161ea7c71efe3e577eafccf74f",
             _W2V2 + "train_acc.csv", "vaessen2024"),
    DataFile("vaessen2024_w2v2_batch_size/ssl_curves/train_loss.csv", 837_559,
             "476848adc6a92d0918e5a5e0cf3c385f9d005c956fbaf75f269f60d8bf45fcca",
             _W2V2 + "train_loss.csv", "vaessen2024"),
    DataFile("vaessen2024_w2v2_batch_size/ssl_curves/train_loss_contrastive.csv", 837_792,
             "5053e656315ad286cbd2e8fd0c0b9749bb159792e18e04f77f164dcbad8c4611",
             _W2V2 + "train_loss_contrastive.csv", "vaessen2024"),
)}
