"""The Jacobi convergence grid alone: one row per step (one target forward), one column per
output position; dark green emitted, light green right but not yet provable, red wrong.

`specnb.viz.trace.plot_jacobi_convergence` draws the same grid with a bar of tokens emitted per
step beside it; when every step emits one token that bar says nothing, so notebook 07 prints the
count and draws this. It runs no model and returns a Figure without showing it.
"""

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .trace import jacobi_grid

COLOURS = ["#f4b6b6", "#b7e4b0", "#2e8b57"]  # wrong, right not yet provable, emitted


def draw_jacobi_grid(axes, result, title: str, ylabel: str) -> None:
    """The grid of `jacobi_grid(result)` as an image on `axes`, with its legend."""
    grid = jacobi_grid(result)  # [steps, new tokens], NaN outside the step's block
    cmap = ListedColormap(COLOURS).with_extremes(bad="white")
    axes.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=2, aspect="auto",
                interpolation="nearest")
    axes.set(title=title, xlabel="position in the output (tokens)", ylabel=ylabel)
    axes.legend(handles=[Patch(color=c, label=name) for c, name in zip(
        COLOURS, ("wrong", "right, not yet provable", "emitted"))], loc="upper right", fontsize=8)


def plot_jacobi_grid(result) -> Figure:
    fig = Figure(figsize=(8.5, 4.5))
    block = len(result.trace[0].info["refreshed"])
    draw_jacobi_grid(fig.subplots(), result,
                     f"Jacobi guesses after each step (block of {block}, {len(result.trace)} steps)",
                     "step (one target forward)")
    fig.tight_layout()
    return fig
