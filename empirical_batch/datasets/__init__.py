"""Published data sets, as the library's own objects, each with its provenance.

=========================  =====================================  ===========  ================
loader                     data                                   licence      where
=========================  =====================================  ===========  ================
`zhang2024`                steps to target, 5 models x 9 batch    MIT          shipped
                           sizes (Zhang et al. 2024)
`mlperf_rcp`               MLPerf reference convergence points,   Apache-2.0   shipped
                           per seed
`mccandlish2018_table1`    the paper's Table 1 (B_crit, B_simple  facts        shipped
                           at start and averaged)
`kaplan2020`               B_crit(L) = B*/L^(1/alpha_B) constants facts        shipped
`vaessen2024`              wav2vec 2.0 pre-training curves at 7   MIT          validation:
                           batch sizes                                         shipped; train:
                                                                               fetched
`mlperf_curves`            MLPerf Training submissions'           Apache-2.0   fetched (20 MB)
                           evaluation curves
`tiny_shakespeare`         1.1 MB of plain text (the harness's    public       excerpt shipped,
                           ``text_lm`` corpus)                    domain       whole fetched
=========================  =====================================  ===========  ================

Each loader returns what the rest of the library takes: a `Zhang2024` table (``.fit()``
gives B_crit per model), an `~empirical_batch.loaders.RCPTable`, a
`~empirical_batch.sweeps.Sweep`, a `PublishedTable` or a text file's path; its
``provenance`` (source, commit, licence, citation, what was derived how) is on the object
(``sweep.provenance`` for sweeps) and in `provenance`.

Fetched files (`empirical_batch.datasets.cache`) are downloaded on first use with
`pooch`, checked against their SHA-256 and kept in the data folder: ``data_home=``, else
``EMPIRICAL_BATCH_DATA``, else the user's cache folder (`get_data_home`). A local copy of
the published data in its usual layout is used as it is by pointing
``EMPIRICAL_BATCH_DATA`` at it. Offline (``download=False`` or
``EMPIRICAL_BATCH_OFFLINE=1``), a missing file is one
`~empirical_batch.errors.DatasetError` naming the file, its URL and where to put it; a
damaged file is refused, saying how to fetch it again.

>>> from empirical_batch import datasets
>>> fits = datasets.zhang2024().fit(n_boot=200)
>>> round(fits.fits["1.2B"].b_crit, -2)
11100.0
"""

from __future__ import annotations

import os

import pandas as pd

from ..provenance import Provenance
from .cache import DATA_ENV, OFFLINE_ENV, URL_ENV, bundled, fetch, get_data_home, locate
from .published import (
    EXCERPT_CHARS,
    PROVENANCE,
    W2V2_SECONDS,
    kaplan2020,
    mccandlish2018_table1,
    mlperf_curves,
    mlperf_rcp,
    provenance,
    tiny_shakespeare,
    vaessen2024,
    zhang2024,
)
from .registry import FILES, DataFile
from .tables import ModelFits, PublishedTable, Zhang2024

__all__ = [
    "DATA_ENV", "EXCERPT_CHARS", "FILES", "OFFLINE_ENV", "PROVENANCE", "URL_ENV",
    "W2V2_SECONDS", "DataFile", "ModelFits", "Provenance", "PublishedTable", "Zhang2024",
    "available", "bundled", "fetch", "get_data_home", "kaplan2020", "locate",
    "mccandlish2018_table1", "mlperf_curves", "mlperf_rcp", "provenance",
    "tiny_shakespeare", "vaessen2024", "zhang2024",
]


def available(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The files the library fetches: ``path``, ``dataset``, ``size`` (bytes), ``url``
    (``None``: from a mirror or a local copy only) and ``present`` (already in the data
    folder; not checksummed here, `locate` does that)."""
    home = get_data_home(data_home)
    return pd.DataFrame([{"path": f.path, "dataset": f.dataset, "size": f.size,
                          "url": f.url, "present": (home / f.path).is_file()}
                         for f in FILES.values()])
