"""Where a published data set comes from: the record every loader of
`empirical_batch.datasets` attaches to what it returns."""

from __future__ import annotations

from dataclasses import dataclass

from .result import Result

__all__ = ["Provenance"]


@dataclass(frozen=True, repr=False)
class Provenance(Result):
    """The origin of a published data set.

    Attributes
    ----------
    name : str
        The loader in `empirical_batch.datasets` (e.g. ``"zhang2024"``).
    title : str
        What the data are, in one line.
    citation : str
        The paper to cite.
    source : str
        Repository, path and commit (or the table of the paper) the files come from.
    licence : str
        SPDX identifier of the data's licence.
    derivation : str
        What was copied verbatim and what was derived, and how.
    files : tuple of str
        The files, as laid out in the data folder; ``(shipped)`` marks those in the
        package, the others are fetched.
    """

    name: str
    title: str
    citation: str
    source: str
    licence: str
    derivation: str
    files: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Provenance({self.name!r}: {self.title}; {self.licence})"[:300]

    def __str__(self) -> str:
        lines = [f"{self.name}: {self.title}", f"  cite:     {self.citation}",
                 f"  source:   {self.source}", f"  licence:  {self.licence}",
                 f"  derived:  {self.derivation}"]
        lines += [f"  file:     {f}" for f in self.files]
        return "\n".join(lines)
