"""The one place plots get an Axes when the caller passes none."""

from __future__ import annotations


def axes(ax=None, figsize=(5.0, 4.0)):
    """``ax`` itself, or the Axes of a new figure of ``figsize`` (pyplot imported lazily)."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
    return ax
