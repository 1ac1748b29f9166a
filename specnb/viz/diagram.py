"""One iteration of speculative decoding as a picture: draft → check → accepted prefix + one token.

`draft_check_figure(draft_tokens, statuses, target_token, target_kind)` draws three rows of
boxes: what the draft proposed, what the target's one forward decided for each guess (✓ kept,
✗ rejected, · never looked at), and what the iteration emits: the kept prefix plus one token of
the target's own (its choice at the first rejection, or a bonus token after the last guess).
`iteration_parts(iteration, decode)` reads those arguments off one `Iteration` of a
`GenerationResult.trace`.

Pure: it returns a matplotlib Figure and prints nothing; it runs no model.
Example: draft_check_figure(["The", " answer", " to"], ["accepted", "rejected", "unverified"],
" sky", "resampled") -> emitted row "The", " sky".
"""

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

STATUSES = ("accepted", "rejected", "unverified")
TARGET_KINDS = ("resampled", "bonus")
COLOURS = {"draft": "#d9d9d9", "accepted": "#8fd18f", "rejected": "#f19c9c",
           "unverified": "#eeeeee", "resampled": "#f7b267", "bonus": "#8db7e8"}
MARKS = {"accepted": "✓ kept", "rejected": "✗ rejected", "unverified": "· not checked"}


def check_parts(draft_tokens, statuses, target_kind) -> int:
    """Validate the arguments; return the number of kept drafts (the length of the ✓ prefix)."""
    draft_tokens, statuses = list(draft_tokens), list(statuses)
    if not draft_tokens or len(statuses) != len(draft_tokens):
        raise ValueError(f"draft_tokens and statuses must be non-empty and of one length, got "
                         f"{len(draft_tokens)} tokens and {len(statuses)} statuses")
    if any(status not in STATUSES for status in statuses):
        raise ValueError(f"statuses must each be one of {STATUSES}, got {statuses}")
    num_kept = next((i for i, s in enumerate(statuses) if s != "accepted"), len(statuses))
    expected = ["accepted"] * num_kept + (["rejected"] + ["unverified"] * (
        len(statuses) - num_kept - 1) if num_kept < len(statuses) else [])
    if statuses != expected:
        raise ValueError(f"statuses must be kept drafts, then at most one rejection, then "
                         f"unchecked ones (e.g. {expected}), got {statuses}")
    wanted = "bonus" if num_kept == len(statuses) else "resampled"
    if target_kind != wanted:
        raise ValueError(f"target_kind must be {wanted!r} here ({num_kept} of {len(statuses)} "
                         f"drafts kept), got {target_kind!r}")
    return num_kept


def _box(ax, x, y, text, colour, width=1.0, height=0.55):
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.02,rounding_size=0.08", facecolor=colour,
                                edgecolor="#555555", linewidth=1))
    ax.text(x, y, text, ha="center", va="center", fontsize=10, family="monospace")


def _arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color="#555555", linewidth=1))


def draft_check_figure(draft_tokens, statuses, target_token, target_kind, title=None):
    """The three-row picture of one iteration (see the module docstring); returns the Figure."""
    num_kept = check_parts(draft_tokens, statuses, target_kind)
    labels = [repr(str(token)) for token in draft_tokens]
    gamma = len(labels)
    fig, ax = plt.subplots(figsize=(1.6 * (gamma + 2) + 1.5, 3.6))
    rows = {"draft": 2.2, "check": 1.1, "emit": 0.0}
    ax.text(-0.9, rows["draft"], f"1. draft guesses\n({gamma} cheap forwards)", ha="right",
            va="center", fontsize=9)
    ax.text(-0.9, rows["check"], "2. target checks\n(one forward)", ha="right", va="center",
            fontsize=9)
    ax.text(-0.9, rows["emit"], "3. emitted", ha="right", va="center", fontsize=9)
    for j, (label, status) in enumerate(zip(labels, statuses)):
        x = 1.3 * j
        _box(ax, x, rows["draft"], label, COLOURS["draft"])
        _arrow(ax, (x, rows["draft"] - 0.3), (x, rows["check"] + 0.3))
        _box(ax, x, rows["check"], MARKS[status], COLOURS[status])
        if j < num_kept:
            _arrow(ax, (x, rows["check"] - 0.3), (x, rows["emit"] + 0.3))
            _box(ax, x, rows["emit"], label, COLOURS["accepted"])
    x_target = 1.3 * num_kept
    source = (1.3 * (gamma - 1), rows["check"] - 0.3) if target_kind == "bonus" else \
        (x_target, rows["check"] - 0.3)
    _arrow(ax, source, (x_target, rows["emit"] + 0.3))
    _box(ax, x_target, rows["emit"], repr(str(target_token)), COLOURS[target_kind])
    ax.text(x_target + 0.62, rows["emit"] - 0.02,
            "← target's token\n   (bonus)" if target_kind == "bonus"
            else "← target's token\n   (at the rejection)", ha="left", va="center", fontsize=8)
    ax.set_xlim(-3.2, 1.3 * gamma + 1.6)
    ax.set_ylim(-0.5, 2.7)
    ax.axis("off")
    ax.set_title(title or f"One iteration: {num_kept} of {gamma} guesses kept, "
                          f"{num_kept + 1} token(s) emitted for one target forward")
    fig.tight_layout()
    return fig


def iteration_parts(iteration, decode) -> dict:
    """Keyword arguments of `draft_check_figure` for one `Iteration` of a result's trace;
    `decode` maps a token id to its text (e.g. `lambda t: tokenizer.decode([t])`)."""
    if not iteration.drafted:
        raise ValueError("this iteration drafted nothing: there is nothing to check")
    last = iteration.emitted[-1]
    return {"draft_tokens": [decode(d.token) for d in iteration.drafted],
            "statuses": [d.status for d in iteration.drafted],
            "target_token": decode(last.token), "target_kind": last.kind}
