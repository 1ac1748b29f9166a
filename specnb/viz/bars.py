"""Grouped bars: one group per category, one bar per series, centred on the category's tick.

The one helper behind every grouped bar chart in specnb (the toy laws of notebook 03, the
per-variant laws of notebook 04, the per-prompt bars of notebooks 07 and 11). It draws into an
`Axes` it is given and decides nothing about titles or figure size.

Example: grouped_bars(ax, ["a", "b"], {"p": [0.5, 0.5], "q": [0.9, 0.1]}) draws two pairs of bars.
"""

import numpy as np


def grouped_bars(ax, categories, series: dict, *, fontsize="small") -> None:
    """Bars of `series` (name -> one value per category) grouped by category, with a legend."""
    if not series or any(len(values) != len(categories) for values in series.values()):
        raise ValueError("series must map each name to exactly one value per category")
    width = 0.8 / len(series)
    positions = np.arange(len(categories))
    for k, (name, values) in enumerate(series.items()):
        ax.bar(positions + (k - (len(series) - 1) / 2) * width, np.asarray(values, dtype=float),
               width, label=name)
    ax.set_xticks(positions, categories, fontsize=fontsize)
    ax.legend(fontsize=fontsize)
