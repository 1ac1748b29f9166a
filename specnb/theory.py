"""The formulas of speculative decoding (Leviathan et al. 2023, section 3) and their estimates.

α is the probability that a draft token is accepted, E[Σ_v min(p, q)]; c is the cost of a
draft forward relative to a target forward. With γ drafts per iteration and i.i.d. acceptance:

    E[tokens per iteration] = (1 − α^{γ+1}) / (1 − α)                       (eq. 1)
    speedup over autoregressive = (1 − α^{γ+1}) / ((1 − α)(γc + 1))         (Thm 3.8)

Thm 3.8 prices the forward that checks γ + 1 tokens like a one-token forward; where it costs
t(γ+1)/t(1) of one (`relative_cost` of a measured latency curve), the speedup is
E[tokens per iteration] / (γc + t(γ+1)/t(1))  (`predicted_with_block_cost`).

Pure functions of numbers, plus estimators that read α̂ and ĉ off a `GenerationResult`.
"""

import math
from dataclasses import dataclass


def _check_alpha_gamma(alpha: float, gamma: int) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha (acceptance probability) must be in [0, 1], got {alpha}")
    if int(gamma) != gamma or gamma < 0:
        raise ValueError(f"gamma (drafts per iteration) must be an integer >= 0, got {gamma}")


def expected_tokens_per_iteration(alpha: float, gamma: int) -> float:
    """(1 − α^{γ+1}) / (1 − α); γ + 1 when α = 1. Example: α = 0.5, γ = 2 -> 1.75."""
    _check_alpha_gamma(alpha, gamma)
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Expected wall-time speedup over autoregressive decoding (Leviathan et al., Thm 3.8).

    Example: α = 0.8, γ = 4, c = 0.05 -> 3.3616 / 1.2 = 2.8013.
    """
    _check_alpha_gamma(alpha, gamma)
    if not cost_ratio >= 0:
        raise ValueError(f"cost_ratio (draft cost / target cost) must be >= 0, got {cost_ratio}")
    return expected_tokens_per_iteration(alpha, gamma) / (gamma * cost_ratio + 1.0)


def _interpolate(x: float, xs, ys) -> float:
    """Linear interpolation of y at x between sorted points (x within their range)."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x0 <= x <= x1:
            return float(y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    return float(ys[0])  # a single measured point


def relative_cost(latency: dict, k: float) -> float:
    """t(k) / t(1) from a latency curve, linear between measured counts (k within their range).

    Example: counts [1, 2, 4], ms [10, 12, 20] -> relative_cost(..., 3) = 16 / 10 = 1.6.
    """
    counts, median_ms = latency["token_counts"], latency["median_ms"]
    if 1 not in counts:
        raise ValueError("latency must include k = 1 in 'token_counts'")
    if not min(counts) <= k <= max(counts):
        raise ValueError(f"k = {k} is outside the measured token counts {counts}")
    measured_k, measured_ms = zip(*sorted(zip(counts, median_ms)))
    return _interpolate(k, measured_k, measured_ms) / median_ms[counts.index(1)]


def predicted_with_block_cost(alpha: float, gamma: int, cost_ratio: float,
                              block_cost: float) -> float:
    """Thm 3.8 with a verification forward costing `block_cost` one-token forwards, not 1:
    E[tokens per iteration] / (γ c + block_cost). block_cost = 1 gives `predicted_speedup`.

    Example: α = 0.5, γ = 2, c = 0.1, block_cost = 1.25 -> 1.75 / 1.45 = 1.2069.
    """
    if not block_cost > 0:
        raise ValueError(f"block_cost (t(γ+1) / t(1)) must be > 0, got {block_cost}")
    # Same tokens per iteration, an iteration costing γc + block_cost instead of γc + 1.
    return predicted_speedup(alpha, gamma, cost_ratio) * (gamma * cost_ratio + 1) / (
        gamma * cost_ratio + block_cost)


def predicted_from_counts(tokens_per_forward: float, fed_per_forward: float,
                          latency: dict) -> float:
    """Speed over autoregressive decoding from counts alone, for methods with no draft model
    (prompt lookup, Jacobi, lookahead): tokens per target forward over the cost, in one-token
    forwards, of a forward that feeds `fed_per_forward` tokens (`relative_cost`). The loop's own
    work is not counted.

    Example: 1.2 tokens per forward, 10 fed, t(10) / t(1) = 2 -> 0.6.
    """
    if not tokens_per_forward > 0:
        raise ValueError(f"tokens_per_forward must be > 0, got {tokens_per_forward}")
    return tokens_per_forward / relative_cost(latency, fed_per_forward)


def optimal_gamma(alpha: float, cost_ratio: float, max_gamma: int = 64) -> int:
    """The γ in [0, max_gamma] with the highest predicted speedup (γ* of the notebooks)."""
    if int(max_gamma) != max_gamma or max_gamma < 0:
        raise ValueError(f"max_gamma must be an integer >= 0, got {max_gamma}")
    return max(range(int(max_gamma) + 1), key=lambda g: predicted_speedup(alpha, g, cost_ratio))


def estimate_alpha(result) -> float:
    """α̂: mean of Σ min(p, q) over the verified (accepted or rejected) draft positions."""
    overlaps = [d.overlap for it in result.trace for d in it.drafted if d.status != "unverified"]
    return sum(overlaps) / len(overlaps) if overlaps else math.nan


@dataclass(frozen=True)
class PositionCounts:
    """Per draft position i of a traced run, counted over the steps that drafted anything:
    `reached[i]` (the i drafts before it were accepted, so it was verified), `accepted[i]`,
    `beyond[i]` (steps that accepted more than i drafts) and `drafting_steps`."""
    reached: list
    accepted: list
    beyond: list
    drafting_steps: int

    @property
    def conditional(self) -> list:
        """accepted / reached per position, P(accepted | reached); NaN where never reached."""
        return [a / r if r else math.nan for a, r in zip(self.accepted, self.reached)]

    @property
    def per_draft(self) -> list:
        """vLLM's per-position acceptance rate: beyond / drafting steps (NaN without a step)."""
        steps = self.drafting_steps
        return [b / steps if steps else math.nan for b in self.beyond]


def position_counts(result, gamma: int) -> PositionCounts:
    """Count acceptance by draft position from `result.trace` (the first `gamma` drafts of each
    step; steps that drafted nothing do not count, as a serving engine counts no draft there)."""
    reached, accepted, beyond, steps = [0] * gamma, [0] * gamma, [0] * gamma, 0
    for iteration in result.trace:
        drafted = iteration.drafted[:gamma]
        if not drafted:
            continue
        steps += 1
        for i, d in enumerate(drafted):
            if d.status != "unverified":
                reached[i] += 1
                accepted[i] += d.status == "accepted"
        for i in range(sum(d.status == "accepted" for d in drafted)):
            beyond[i] += 1
    return PositionCounts(reached, accepted, beyond, steps)


def decoding_step_seconds(result) -> list:
    """The target's seconds in each decoding step, in order (one value per step: the rows of a
    batch share it). The loop's trace starts at step 1: the forward that fills the cache with
    the prompt comes before it and is not in it. A trace with a step 0 (Jacobi's, whose first
    forward feeds the whole prompt) leaves that step out, so every method is compared on its
    decoding steps alone."""
    steps = {}
    for iteration in result.trace:
        steps[iteration.step] = iteration.target_s
    return [seconds for step, seconds in sorted(steps.items()) if step > 0]


def mean_step_seconds(result) -> float | None:
    """Mean target seconds per decoding step (the prompt's forward left out), from the run's
    counters (`stats.decoding_target_s / stats.decoding_steps`), else its trace
    (`decoding_step_seconds`); None without a decoding step."""
    stats = getattr(result, "stats", None)
    if getattr(stats, "decoding_steps", 0):
        return stats.decoding_target_s / stats.decoding_steps
    if not getattr(result, "trace", None):
        return None
    steps = decoding_step_seconds(result)
    return sum(steps) / len(steps) if steps else None


def in_loop_checking_cost(results, references) -> dict:
    """The checking cost as the loop paid it: for each pair (a run of a method, a run of
    autoregressive decoding on the same prompt), the method's mean target time per loop step
    over autoregressive decoding's (its one-token forwards), the prompt's forward left out of
    both. {"median", "low", "high", "n", "ratios"} over the pairs: the spread of the same
    repeats that timed the methods, not a separate microbenchmark.

    Example: steps of 12 and 14 ms against steps of 10 ms -> median 1.3."""
    results, references = list(results), list(references)
    if not results or len(results) != len(references):
        raise ValueError(f"in_loop_checking_cost needs as many runs as reference runs, at least "
                         f"one each; got {len(results)} and {len(references)}")
    ratios = []
    for run, reference in zip(results, references):
        mine, theirs = mean_step_seconds(run), mean_step_seconds(reference)
        if mine is None or theirs is None or not theirs > 0:
            raise ValueError("in_loop_checking_cost needs runs of at least one decoding step "
                             "each (the prompt's forward is left out): ask for more new tokens")
        ratios.append(mine / theirs)
    ordered = sorted(ratios)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return {"median": median, "low": ordered[0], "high": ordered[-1], "n": len(ratios),
            "ratios": ratios}


def estimate_cost_ratio(result, autoregressive_result=None) -> float:
    """ĉ: mean draft forward time over mean target forward time.

    The theorem's c compares one-token forwards. The target forwards of a speculative run score
    γ+1 tokens each, so pass an autoregressive run of the same prompt to divide by its
    one-token forwards instead (what the benchmark does).
    """
    stats = result.stats
    reference = (autoregressive_result or result).stats
    if not stats.draft_forwards or not reference.target_forwards:
        return math.nan
    return (stats.draft_s / stats.draft_forwards) / (reference.target_s / reference.target_forwards)


# Token trees (notebook 13). A shape (w1, w2, ...) is `FeatureDrafter(tree=...)`'s: the head's
# top-w1 guesses at depth 1, then the top-w2 after the best of them, and so on, so a depth is
# reached only through its parent's best guess. acceptance[d][r - 1] is P(the target's token is
# among the head's top r at depth d + 1 | depth d + 1 reached), a chain of γ being (1,) * γ.

def check_tree_shape(widths) -> tuple:
    widths = tuple(widths)
    if not widths or any(isinstance(w, bool) or int(w) != w or w < 1 for w in widths):
        raise ValueError(f"a tree shape is widths per depth, ints >= 1 such as (4, 2), got "
                         f"{widths!r}")
    return tuple(int(w) for w in widths)


def _check_acceptance(acceptance, widths) -> None:
    if len(acceptance) < len(widths) or any(len(acceptance[d]) < w for d, w in enumerate(widths)):
        raise ValueError(f"acceptance by rank covers depths x ranks "
                         f"{[len(row) for row in acceptance]}, the shape {widths} needs more")
    for row in acceptance:
        if any(not 0.0 <= a <= 1.0 for a in row) or any(b < a for a, b in zip(row, row[1:])):
            raise ValueError(f"acceptance by rank must be non-decreasing probabilities, got {row}")


def expected_accepted_in_tree(acceptance, widths) -> float:
    """E[accepted drafts per iteration] = Σ_d (Π_{e<d} acceptance[e][0]) · acceptance[d][w_d-1]:
    depth d is reached when every depth before it took its best guess.

    Example: acceptance [[0.34, 0.46, 0.53, 0.58], [0.34, 0.43]], (4, 2) -> 0.58 + 0.34 · 0.43
    = 0.7262; the chain (1, 1) -> 0.34 + 0.34 · 0.34 = 0.4556."""
    widths = check_tree_shape(widths)
    _check_acceptance(acceptance, widths)
    expected, reach = 0.0, 1.0
    for d, width in enumerate(widths):
        expected += reach * acceptance[d][width - 1]
        reach *= acceptance[d][0]
    return expected


def predicted_tree_speedup(acceptance, widths, cost_ratio: float, latency: dict) -> float:
    """(1 + E[accepted]) / (D c + t(N + 1) / t(1)): a tree of N = Σ w nodes and depth D costs D
    head forwards and one target forward over N + 1 tokens (the pending token and the nodes).

    Example: the acceptance above, (1,), c = 0.1, t(2)/t(1) = 1.0 -> 1.34 / 1.1 = 1.2182."""
    widths = check_tree_shape(widths)
    return predicted_from_accepted(expected_accepted_in_tree(acceptance, widths), len(widths),
                                   sum(widths), cost_ratio, latency)


def predicted_from_accepted(accepted: float, depth: int, nodes: int, cost_ratio: float,
                            latency: dict) -> float:
    """(1 + accepted) / (depth c + t(nodes + 1) / t(1)): the speedup of a drafter that accepts
    `accepted` drafts per iteration on average, spends `depth` head steps and has the target
    score `nodes` drafts with the pending token. For shapes whose acceptance is measured rather
    than derived from ranks (EAGLE-2's dynamic tree grows where the head is confident).

    Example: accepted 0.66, depth 2, 2 nodes, c = 0.06, t(3)/t(1) = 1.17 -> 1.66 / 1.29 = 1.2868."""
    if not cost_ratio >= 0:
        raise ValueError(f"cost_ratio (draft cost / target cost) must be >= 0, got {cost_ratio}")
    if not accepted >= 0 or int(depth) != depth or depth < 1 or int(nodes) != nodes or nodes < 1:
        raise ValueError(f"accepted must be >= 0 and depth, nodes ints >= 1, got {accepted}, "
                         f"{depth}, {nodes}")
    return (1.0 + accepted) / (depth * cost_ratio + relative_cost(latency, nodes + 1))


def best_tree_shape(acceptance, cost_ratio: float, latency: dict, shapes) -> tuple:
    """The shape among `shapes` with the highest `predicted_tree_speedup` (ties: the first)."""
    shapes = [check_tree_shape(s) for s in shapes]
    if not shapes:
        raise ValueError("shapes must hold at least one tree shape")
    return max(shapes, key=lambda s: predicted_tree_speedup(acceptance, s, cost_ratio, latency))


def rank_counts(results, max_depth: int) -> tuple:
    """Read, off traces of greedy runs with a top-k tree (`FeatureDrafter(tree=...)`), where the
    target's token ranked among the head's guesses: `(hits, reached)`, hits[d][r - 1] the
    positions of depth d + 1 whose rank-r guess was accepted, reached[d] the positions whose
    guesses at depth d + 1 were all tried (each depth's siblings in rank order).

    A depth counts as reached only below an accepted best guess (rank 1) whose own children
    were drafted, so the counts condition as `expected_accepted_in_tree` needs."""
    if int(max_depth) != max_depth or max_depth < 1:
        raise ValueError(f"max_depth must be an integer >= 1, got {max_depth}")
    hits, reached = [dict() for _ in range(max_depth)], [0] * max_depth
    for result in results:
        for iteration in result.trace:
            nodes, current = iteration.drafted, -1
            if nodes and nodes[0].parent is None:
                raise ValueError("rank_counts reads token trees; this trace holds chains")
            for depth in range(max_depth):
                children = [j for j, node in enumerate(nodes) if node.parent == current]
                if not children or nodes[children[0]].status == "unverified":
                    break
                accepted = [j for j in children if nodes[j].status == "accepted"]
                if not accepted and any(nodes[j].status == "unverified" for j in children):
                    break  # the walk stopped early (not a greedy top-k tree): no observation
                reached[depth] += 1
                if not accepted:
                    break
                rank = children.index(accepted[0]) + 1
                hits[depth][rank] = hits[depth].get(rank, 0) + 1
                if rank != 1:
                    break
                current = accepted[0]
    return hits, reached


def acceptance_by_rank(results, widths) -> list:
    """Measured `acceptance[d][r - 1]` for r up to widths[d] (see `rank_counts`): the fraction
    of reached positions whose target token was among the head's top r."""
    widths = check_tree_shape(widths)
    hits, reached = rank_counts(results, len(widths))
    if not all(reached):
        raise ValueError(f"no position reached depth {reached.index(0) + 1}: run more tokens or "
                         f"a shallower shape")
    return [[sum(hits[d].get(r, 0) for r in range(1, k + 1)) / reached[d]
             for k in range(1, widths[d] + 1)] for d in range(len(widths))]
