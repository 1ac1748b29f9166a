"""The Jacobi convergence grid: one row per step (one target forward), one column per output
position; dark green emitted, light green right but not yet provable, red wrong.

`jacobi_grid` computes it from a `specnb.jacobi` result; `plot_jacobi_grid` draws it alone and
`plot_jacobi_convergence` with a bar of tokens emitted per step beside it (when every step emits
one token that bar says nothing, so notebook 08 prints the count and draws the grid alone).
It runs no model and returns a Figure without showing it.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

COLOURS = ["#f4b6b6", "#b7e4b0", "#2e8b57"]  # wrong, right not yet provable, emitted


def jacobi_grid(result) -> np.ndarray:
    """[iterations, new tokens]: 2 emitted by this step, 1 refreshed guess already equal to the
    final token (but not yet provably), 0 wrong guess, NaN outside the step's block."""
    if result.method != "jacobi":
        raise ValueError(f"result must come from specnb.jacobi, got {result.method!r}")
    final = result.tokens[0]
    grid = np.full((len(result.trace), len(final)), np.nan)
    offset = 0
    for t, it in enumerate(result.trace):
        converged = it.info["num_converged"]
        for i, guess in enumerate(it.info["refreshed"][:len(final) - offset]):
            grid[t, offset + i] = 2 if i < converged else float(guess == final[offset + i])
        offset += len(it.emitted)
    return grid


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


def plot_jacobi_convergence(result):
    """The grid of `jacobi_grid` as an image, and tokens emitted per iteration beside it."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), width_ratios=(3, 1), sharey=True)
    block = len(result.trace[0].info["refreshed"])
    draw_jacobi_grid(left, result, f"Jacobi guesses after each step (block of {block})",
                     "iteration (one target forward)")
    right.barh(np.arange(len(result.trace)), [len(it.emitted) for it in result.trace],
               color=COLOURS[2])
    right.set(title="Emitted per iteration", xlabel="tokens")
    fig.tight_layout()
    return fig
