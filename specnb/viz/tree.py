"""Token trees as pictures (notebook 13): the tree a drafter proposed, and the mask that scores it.

`plot_tree(labels, parents, statuses)` draws the pending token at the left and each node one
column further right than its parent, coloured by what verification did with it (kept,
rejected, never tried); `plot_tree_mask(labels, parents)` draws who attends to whom in the
forward that scores the tree (`specnb.core.tree.tree_mask`: the prefix, the ancestors, itself);
`iteration_tree(iteration, decode)` reads the arguments off one `Iteration` of a trace.

Pure: figures and plain data, no model. Example: plot_tree(["a", "b", "c"], [-1, 0, -1],
["accepted", "rejected", "unverified"]) -> x ─ a ─ b on one branch, x ─ c on another.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core.tree import check_parents, tree_depths, tree_mask
from .diagram import COLOURS, MARKS, _arrow, _box

NODE_STATUSES = ("accepted", "rejected", "unverified")


def _check(labels, parents, statuses=None) -> tuple:
    labels, parents = [str(label) for label in labels], [int(p) for p in parents]
    if not labels or len(parents) != len(labels):
        raise ValueError(f"labels and parents must be non-empty and of one length, got "
                         f"{len(labels)} labels and {len(parents)} parents")
    check_parents(torch.tensor([parents]))
    if statuses is not None:
        statuses = list(statuses)
        if len(statuses) != len(labels) or any(s not in NODE_STATUSES for s in statuses):
            raise ValueError(f"statuses must give one of {NODE_STATUSES} per node, got {statuses}")
    return labels, parents, statuses


def tree_layout(parents) -> tuple:
    """(x, y, root y): per node x its depth and y spreading the leaves one row apart in node
    order, a parent centred on its children. Example: [-1, 0, 0] -> [1, 2, 2], [0.5, 0, 1], 0.5."""
    parents = [int(p) for p in parents]
    children = {j: [] for j in range(-1, len(parents))}
    for j, p in enumerate(parents):
        children[p].append(j)
    x, y, next_row = {-1: 0}, {}, [0]

    def place(node):
        for child in children[node]:
            x[child] = x[node] + 1
            place(child)
        if node >= 0 and not children[node]:
            y[node], next_row[0] = next_row[0], next_row[0] + 1
        elif children[node]:
            y[node] = float(np.mean([y[c] for c in children[node]]))
    place(-1)
    return [x[j] for j in range(len(parents))], [y[j] for j in range(len(parents))], y[-1]


def plot_tree(labels, parents, statuses=None, *, pending="x", emitted=None, title=None):
    """The tree, root (the pending token) left; `emitted` = (token, kind), the iteration's last
    token (the target's own), is drawn in a last column, level with the last kept node."""
    labels, parents, statuses = _check(labels, parents, statuses)
    xs, ys, root_y = tree_layout(parents)
    height = max(ys) + 1
    fig, ax = plt.subplots(figsize=(2.2 * (max(xs) + 1.6), 0.75 * height + 1.2))
    _box(ax, 0, root_y, pending, "#ffffff", width=1.4)
    for j, (x, y) in enumerate(zip(xs, ys)):
        start = (0.7, root_y) if parents[j] < 0 else (xs[parents[j]] * 2.0 + 0.7, ys[parents[j]])
        _arrow(ax, start, (x * 2.0 - 0.7, y))
        colour = COLOURS[statuses[j]] if statuses else COLOURS["draft"]
        _box(ax, x * 2.0, y, labels[j], colour, width=1.4)
    if emitted is not None:
        token, kind = emitted
        kept = [j for j, s in enumerate(statuses or []) if s == "accepted"]
        last = kept[-1] if kept else -1
        # In a column of its own, right of the deepest node, level with the last kept node.
        x0, y0 = (0, root_y) if last < 0 else (xs[last] * 2.0, ys[last])
        column = 2.0 * (max(xs) + 1)
        ax.annotate("", (column - 0.7, y0), (x0 + 0.7, y0), arrowprops=dict(
            arrowstyle="-|>", linestyle="--", color="#555555", linewidth=1))
        _box(ax, column, y0, str(token), COLOURS[kind], width=1.4)
    if statuses:
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=COLOURS[s], edgecolor="#555555")
                   for s in NODE_STATUSES]
        names = [MARKS[s] for s in NODE_STATUSES]
        if emitted is not None:
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor=COLOURS[emitted[1]],
                                         edgecolor="#555555"))
            names.append(f"the target's token ({emitted[1]})")
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.set_xlim(-1, 2.0 * max(xs) + 1 + (2 if emitted is not None else 0))
    ax.set_ylim(height - 0.3, -0.7)
    ax.axis("off")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_tree_mask(labels, parents, *, pending="x", title=None):
    """The attention mask of the forward that scores the tree: row i, column j is filled when
    fed token i sees fed token j (a prefix column first: everyone sees the cache)."""
    labels, parents, _ = _check(labels, parents)
    mask = tree_mask(torch.tensor([parents]), torch.ones(1, len(parents) + 1, dtype=torch.bool))
    shown = torch.cat([torch.ones(len(parents) + 1, 1, dtype=torch.bool), mask[0]], 1).numpy()
    fed = [pending] + labels
    fig, ax = plt.subplots(figsize=(0.55 * len(fed) + 2.2, 0.5 * len(fed) + 1.2))
    ax.imshow(shown, cmap="Greens", vmin=0, vmax=1.4)
    ax.set_xticks(range(len(fed) + 1), ["prefix\n(cache)"] + fed, fontsize="small")
    depths = [0] + tree_depths(torch.tensor([parents]))[0].tolist()
    ax.set_yticks(range(len(fed)), [f"{t} (depth {d})" for t, d in zip(fed, depths)],
                  fontsize="small")
    ax.set_xticks(np.arange(-0.5, len(fed) + 1), minor=True)
    ax.set_yticks(np.arange(-0.5, len(fed)), minor=True)
    ax.grid(which="minor", color="#ffffff", linewidth=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("attends to")
    ax.set_ylabel("fed token (position = length + depth)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def iteration_tree(iteration, decode) -> dict:
    """plot_tree's arguments for one traced iteration of a tree run: labels (`decode(token)`),
    parents, statuses, emitted (the target's own token and its kind)."""
    drafted = iteration.drafted
    if not drafted or any(d.parent is None for d in drafted):
        raise ValueError("iteration_tree needs an iteration that drafted a token tree")
    last = iteration.emitted[-1]
    return {"labels": [decode(d.token) for d in drafted],
            "parents": [d.parent for d in drafted],
            "statuses": [d.status for d in drafted],
            "emitted": (decode(last.token), last.kind)}


def plot_predicted_speedups(predictions: dict, *, title=None):
    """Horizontal bars, one group per tree shape: the speedup each curve predicts for it.

    `predictions`: {curve label: {shape label: predicted speedup}}, e.g. {"this machine's
    curve": {"(1,)": 0.87, "(4, 2)": 1.02}, "free checking": {...}}; every curve names the same
    shapes, drawn top to bottom in the first curve's order. A line at 1 marks the speed of
    autoregressive decoding; each curve's best shape is outlined. Example: two curves and five
    shapes -> five groups of two bars."""
    from matplotlib.figure import Figure

    if not predictions or not all(predictions.values()):
        raise ValueError("predictions: {curve: {shape: speedup}}, with at least one of each")
    curves = list(predictions)
    shapes = list(predictions[curves[0]])
    for curve in curves[1:]:
        if set(predictions[curve]) != set(shapes):
            raise ValueError(f"curve {curve!r} names shapes {sorted(predictions[curve])}, "
                             f"the first names {sorted(shapes)}")
    values = np.array([[float(predictions[c][s]) for c in curves] for s in shapes])
    if not np.isfinite(values).all():
        raise ValueError("predictions must be finite numbers")
    fig = Figure(figsize=(7, 0.45 * len(shapes) * len(curves) + 1.4))
    ax = fig.subplots()
    height = 0.8 / len(curves)
    for k, curve in enumerate(curves):
        best = int(values[:, k].argmax())
        y = np.arange(len(shapes)) + (k - (len(curves) - 1) / 2) * height
        bars = ax.barh(y, values[:, k], height=height, label=curve, color=f"C{k}", alpha=0.8)
        bars[best].set_edgecolor("black")
        bars[best].set_linewidth(2)
        for yy, value in zip(y, values[:, k]):
            ax.text(value, yy, f" {value:.2f}×", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(shapes)), shapes)
    ax.invert_yaxis()
    ax.set_xlim(0, values.max() * 1.15)
    ax.set_xlabel("predicted speedup over autoregressive decoding (×); outlined: each curve's best")
    ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_tree_shape(widths, acceptance, cost_ratio: float, latency: dict) -> tuple:
    """(text, Figure): a static tree shape and what the quotient predicts for it.

    Left, the shape: `widths[d]` guesses at depth d + 1, all below the best guess of the depth
    before (`specnb.theory.expected_accepted_in_tree`), each labelled with its chance of being
    the accepted one once its depth is reached (`acceptance` is top-r acceptance by depth, so a
    rank's chance is acceptance[d][r] − acceptance[d][r − 1]). Right, the quotient's three
    numbers: tokens per iteration 1 + E[accepted], the iteration's cost D c + t(N + 1)/t(1) in
    one-token forwards (`latency`: this machine's curve), and their ratio, the predicted speedup.
    A width of 0 ends the tree: (4, 0) is (4,). Example: (1,) is the chain of one draft."""
    from ..theory import check_tree_shape, expected_accepted_in_tree, relative_cost

    widths = list(widths)
    if 0 in widths:
        widths = widths[:widths.index(0)]
    widths = check_tree_shape(widths)
    accepted = expected_accepted_in_tree(acceptance, widths)
    nodes, depth = sum(widths), len(widths)
    checking = relative_cost(latency, nodes + 1)
    cost = depth * cost_ratio + checking
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), gridspec_kw={"width_ratios": [1.3, 1]})
    left.scatter([0], [0], s=500, color="lightgrey", edgecolor="black", zorder=3)
    left.text(0, 0, "x", ha="center", va="center", fontsize=9)
    parent_y = 0.0
    for d, width in enumerate(widths):
        ys = parent_y - np.arange(width)
        for r, y in enumerate(ys):
            chance = acceptance[d][r] - (acceptance[d][r - 1] if r else 0.0)
            left.plot([d, d + 1], [parent_y, y], color="grey", linewidth=1, zorder=1)
            left.scatter([d + 1], [y], s=500, color=COLOURS["accepted"] if r == 0 else "white",
                         edgecolor="black", zorder=3)
            left.text(d + 1, y - 0.32, f"rank {r + 1}: {chance:.2f}", ha="center", va="top",
                      fontsize=8)
        parent_y = ys[0]  # the next depth hangs below the best guess
    left.set(title=f"shape {widths}: {nodes} nodes, depth {depth}", xlim=(-0.4, depth + 0.6),
             ylim=(-max(widths) + 0.3, 0.5))
    left.axis("off")
    values = [1 + accepted, cost, (1 + accepted) / cost]
    names = ["tokens per iteration\n1 + E[accepted]", "iteration cost\nD·c + t(N+1)/t(1)",
             "predicted speedup"]
    bars = right.barh(names, values, color=["tab:green", "tab:red", "tab:blue"])
    for bar, value in zip(bars, values):
        right.text(value, bar.get_y() + bar.get_height() / 2, f" {value:.2f}", va="center",
                   fontsize=9)
    right.axvline(1.0, color="black", linewidth=0.8)
    right.invert_yaxis()
    right.set(xlim=(0, max(values) * 1.25), xlabel="one-token forwards, or ×")
    fig.tight_layout()
    text = (f"shape {widths}: E[accepted] = {accepted:.3f}, so {1 + accepted:.2f} tokens per "
            f"iteration; cost {depth} × {cost_ratio:.3f} + t({nodes + 1})/t(1) {checking:.2f} = "
            f"{cost:.2f} one-token forwards; predicted speedup {values[2]:.2f}×")
    return text, fig
