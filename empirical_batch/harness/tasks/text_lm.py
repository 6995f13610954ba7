"""Character-level language modelling on a real plain-text file (default: Tiny Shakespeare).

The analogue, at laptop-to-one-GPU scale, of the paper's Billion Word row (McCandlish
et al. 2018, Table 1) and of Kaplan et al. (2020, "Scaling Laws for Neural Language
Models", §5.1), whose critical batch follows $B_{crit}(L) = B_*/L^{1/\\alpha_B}$.

The corpus is any UTF-8 text file. Which one, in order:

1. the option ``path``;
2. the environment variable ``EMPIRICAL_BATCH_TEXT``;
3. Tiny Shakespeare from `empirical_batch.datasets.tiny_shakespeare`: the excerpt shipped
   with the package when ``max_chars`` fits in it (the ``tiny`` preset: no download),
   else the whole file, fetched into the data folder on first use.

A file that is not there, or a corpus that cannot be had (offline, nothing in the data
folder), is a `TaskConfigError` at construction (before any training): one line naming
the file and how to get it or point elsewhere. The vocabulary is the sorted set of the
characters of the text used; the split is by position and fixed: the first
``1 - eval_fraction`` of the characters train, the rest evaluate. Training batches are
windows of ``context + 1`` characters at uniformly random offsets of the training part
(with replacement); the model (a decoder-only causal transformer,
`~empirical_batch.harness.tasks.sequence.CharTransformer`) predicts each next
character and the loss is the mean cross-entropy per character (nats). One batch
element is one window: a batch of B holds B × ``context`` predicted characters. The
evaluation set is ``eval_windows`` evenly spaced windows of the evaluation part; the
objective data (for the noise scales) ``objective_windows`` windows of the training
part at offsets fixed by ``seed``.

`TextLM.describe` (written into the harness manifest and report) names the file and its
sha256; the option ``sha256`` makes a run refuse any other file.
"""

from __future__ import annotations

import math
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..._io import file_sha256
from ...datasets import tiny_shakespeare
from ...errors import DatasetError
from ...params import INTEGER, Domain, Kind, instance_of
from .base import FRACTION, POSITIVE_INT, TaskConfigError
from .sequence import CharLM

#: environment variable naming the text file (when the option ``path`` is empty)
TEXT_ENV = "EMPIRICAL_BATCH_TEXT"


def default_text_path(max_chars: int = 0) -> Path:
    """``EMPIRICAL_BATCH_TEXT``, else Tiny Shakespeare (`datasets.tiny_shakespeare`: the
    shipped excerpt when the first ``max_chars`` > 0 characters fit in it, else the whole
    file, fetched if needed); a corpus that cannot be had is a `TaskConfigError`."""
    env = os.environ.get(TEXT_ENV)
    if env:
        return Path(env).expanduser()
    try:
        return tiny_shakespeare(chars=max_chars or None)
    except DatasetError as exc:
        raise TaskConfigError(f"task 'text_lm' has no text: {exc} (or set {TEXT_ENV} or "
                              "the option 'path' to a text file)") from None


def display_path(path: str | Path) -> str:
    """``path`` relative to the working directory if that climbs at most two folders,
    else as given."""
    try:
        rel = Path(os.path.relpath(Path(path).resolve(), Path.cwd().resolve()))
    except ValueError:  # another drive
        return str(path)
    return str(rel) if rel.parts[:3] != ("..", "..", "..") else str(path)


@dataclass(frozen=True)
class TextLMOptions:
    #: the text file; "" = ``EMPIRICAL_BATCH_TEXT`` or the default corpus (module docstring)
    path: str = ""
    context: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    eval_fraction: float = 0.1
    eval_windows: int = 256
    objective_windows: int = 512
    #: use only the first ``max_chars`` characters (0 = the whole file)
    max_chars: int = 0
    #: when non-empty, the file's sha256 must equal it
    sha256: str = ""
    #: offsets of the objective windows
    seed: int = 0


class TextLM(CharLM):
    """Character-level causal language model on a text file; options: `TextLMOptions`."""

    name = "text_lm"
    Options = TextLMOptions

    option_constraints: ClassVar[Mapping[str, Any]] = {
        **dict.fromkeys(("context", "d_model", "n_heads", "n_layers", "eval_windows",
                         "objective_windows"), POSITIVE_INT),
        "max_chars": INTEGER.within(Domain(0.0, math.inf, low_open=False),
                                    ">= 0 (an integer; 0 = the whole file)"),
        "seed": INTEGER, "eval_fraction": FRACTION,
        "path": instance_of(str, what="a string"),
        "sha256": Kind("'' or 64 hex digits", lambda v: isinstance(v, str) and (
            not v or (len(v) == 64 and not set(v.lower()) - set(string.hexdigits)))),
    }

    @classmethod
    def validate(cls, o) -> None:
        if o.d_model % o.n_heads:
            raise TaskConfigError(
                f"task {cls.name!r}: option 'd_model' ({o.d_model}) must be divisible by "
                f"'n_heads' ({o.n_heads})"
            )
        path = cls.resolve_path(o)
        if not path.is_file():
            how = ("option 'path'" if o.path else
                   f"environment variable {TEXT_ENV}" if os.environ.get(TEXT_ENV) else
                   f"the default corpus; set {TEXT_ENV} or the option 'path' to a text file")
            raise TaskConfigError(f"task {cls.name!r}: text file {path} not found ({how})")

    @staticmethod
    def resolve_path(o) -> Path:
        """The text file the options name (see the module docstring)."""
        return Path(o.path).expanduser() if o.path else default_text_path(o.max_chars)

    # -- the corpus ---------------------------------------------------------------
    @cached_property
    def path(self) -> Path:
        return self.resolve_path(self.options)

    @cached_property
    def sha256(self) -> str:
        """sha256 of the whole file (checked against the option ``sha256`` when given)."""
        digest = file_sha256(self.path)
        want = self.options.sha256.lower()
        if want and digest != want:
            raise TaskConfigError(f"task {self.name!r}: {self.path} has sha256 {digest}, "
                                  f"not the {want} that option 'sha256' asks for")
        return digest

    @cached_property
    def text(self) -> str:
        """The characters used (the first ``max_chars`` when it is set)."""
        self.sha256  # noqa: B018 - verify the file before using it
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise TaskConfigError(f"task {self.name!r}: {self.path} is not UTF-8 text "
                                  f"({exc.reason} at byte {exc.start})") from None
        if self.options.max_chars:
            text = text[: self.options.max_chars]
        o = self.options
        need = 2 * (o.context + 1)
        if len(text) * o.eval_fraction < need or len(text) * (1 - o.eval_fraction) < need:
            raise TaskConfigError(
                f"task {self.name!r}: {self.path} gives {len(text)} characters: too few for "
                f"two windows of context+1 = {o.context + 1} in each of the training and "
                f"evaluation parts (eval_fraction {o.eval_fraction})")
        return text

    def describe(self) -> dict:
        """The options, plus the file (name, path, sha256, characters used, vocabulary).
        The path is relative to the working directory when it lies at most two folders
        above it, so that a manifest does not record the machine's own folder layout;
        the sha256 identifies the text."""
        return {**super().describe(), "text_file": self.path.name,
                "text_path": display_path(self.path), "text_sha256": self.sha256,
                "text_chars": len(self.text), "vocab_size": len(set(self.text))}

    # -- Task ---------------------------------------------------------------------
    def _build(self) -> None:
        o = self.options
        text = self.text
        self._encode(text, sorted(set(text)))
        t = o.context
        starts = torch.linspace(0, len(self._eval_ids) - t - 1, o.eval_windows,
                                device=self.device).round().long()
        self._eval = self._cut(self._eval_ids, starts)
        fixed = torch.Generator(device=self.device).manual_seed(o.seed)
        self._objective = self._windows(self._train_ids, fixed, o.objective_windows)
