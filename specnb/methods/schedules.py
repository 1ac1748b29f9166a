"""How many tokens each row drafts next: fixed γ, transformers' heuristic, or a cost-aware γ*.

The loop asks a schedule for one γ per running row before each iteration (`gammas`) and tells
it afterwards what each row drafted and kept (`update`). Schedules keep per-row state, so rows
of a batch adapt separately.

- `FixedGamma(3)`: always 3 (what `gamma=3` means).
- `HeuristicGamma()`: transformers' "heuristic" assistant schedule
  (transformers/generation/candidate_generator.py): γ += 2 after a block whose every draft was
  accepted, γ −= 1 (never below 1) otherwise.
- `CostAwareGamma(cost_ratio, checking)`: each iteration, the row's running acceptance estimate
  α̂ and the *measured* costs pick γ* = argmax_γ E[tokens](α̂, γ) / (γ ĉ + t(γ+1)/t(1)), the
  speedup formula of notebook 06, eq. (2) (Thm 3.8 with the checking cost). `CostAwareGamma.measure`
  measures ĉ and t(k)/t(1) once on the machine at hand.

Nothing here runs the loop; the loop still caps γ by each row's budget and drafter.
"""

import math

from ..theory import expected_tokens_per_iteration
from ..core.args import check_int


class GammaSchedule:
    """Base class. `start(num_rows)`, `gammas(rows)`, `update(rows, num_drafts, num_accepted)`."""

    name = "schedule"

    def start(self, num_rows: int) -> None:
        self.state = [self.initial_state() for _ in range(num_rows)]

    def initial_state(self):
        return None

    def gammas(self, rows: list) -> list:
        """γ for each running row (original indices)."""
        raise NotImplementedError

    def update(self, rows: list, num_drafts: list, num_accepted: list) -> None:
        """What each row drafted and kept this iteration (rows that drafted nothing included)."""


class FixedGamma(GammaSchedule):
    def __init__(self, gamma: int):
        self.gamma = check_int("gamma", gamma, 0)
        self.name = f"γ={self.gamma}"

    def gammas(self, rows):
        return [self.gamma] * len(rows)


class HeuristicGamma(GammaSchedule):
    """transformers' rule; it starts from its `num_assistant_tokens` (20 in transformers 5),
    which on a CPU costs 20 draft forwards in the first iteration, so the start here is 5.
    Each generation starts afresh (transformers' "heuristic_transient"; its "heuristic" keeps
    the last γ across calls)."""

    name = "heuristic"

    def __init__(self, initial: int = 5, maximum: int = 64):
        self.initial = check_int("initial", initial, 1)
        self.maximum = check_int("maximum", maximum, self.initial)

    def initial_state(self):
        return self.initial

    def gammas(self, rows):
        return [self.state[r] for r in rows]

    def update(self, rows, num_drafts, num_accepted):
        for row, drafted, accepted in zip(rows, num_drafts, num_accepted):
            if drafted == 0:  # nothing was tried (budget, context, disabled): no evidence
                continue
            gamma = self.state[row] + 2 if accepted == drafted else self.state[row] - 1
            self.state[row] = min(self.maximum, max(1, gamma))


class CostAwareGamma(GammaSchedule):
    """γ* from the speedup formula with this row's running α̂ and measured costs.

    α̂ = (accepted + prior_alpha·prior_weight) / (verified + prior_weight), counting drafts up to
    and including each block's first rejection (the i.i.d. acceptance of Thm 3.8). `checking`
    maps a number of scored tokens k to t(k)/t(1), the cost of checking k tokens in one target
    forward: as the loop pays it (`from_runs`, `calibrate.cost_aware_in_loop`) or by a microbenchmark
    (`measure`, `from_latency`); between and beyond the measured k it is interpolated linearly. When the formula says γ* = 0 (drafting does not
    pay: autoregressive is faster), the row stops drafting but probes with γ = 1 every
    `probe_every` iterations, so α̂ keeps learning and drafting resumes if it starts to pay.
    """

    name = "cost-aware"

    def __init__(self, cost_ratio: float, checking: dict, *, minimum: int = 0, maximum: int = 8,
                 probe_every: int = 8, prior_alpha: float = 0.5, prior_weight: float = 4.0):
        if isinstance(cost_ratio, bool) or not isinstance(cost_ratio, (int, float)) or \
                not 0 <= cost_ratio < math.inf:
            raise ValueError(f"cost_ratio (draft forward / target forward) must be a number "
                             f">= 0, got {cost_ratio!r}")
        if not isinstance(checking, dict) or 1 not in checking or not all(
                isinstance(k, int) and k >= 1 and v > 0 for k, v in checking.items()):
            raise ValueError("checking must map token counts k >= 1 (1 included) to t(k)/t(1) > 0,"
                             f" e.g. {{1: 1.0, 2: 1.3, 4: 1.6}}; got {checking!r}")
        self.cost_ratio, self.checking = float(cost_ratio), dict(sorted(checking.items()))
        self.minimum = check_int("minimum", minimum, 0)
        self.maximum = check_int("maximum", maximum, max(self.minimum, 1))
        self.probe_every = check_int("probe_every", probe_every, 1)
        if not 0 < prior_alpha < 1 or not prior_weight > 0:
            raise ValueError("prior_alpha must be in (0, 1) and prior_weight > 0")
        self.prior_alpha, self.prior_weight = prior_alpha, prior_weight

    @classmethod
    def measure(cls, target, drafter_run, *, prefix_len: int = 150, max_tokens: int = 9,
                repeats: int = 5, **kwargs) -> "CostAwareGamma":
        """Measure t(k)/t(1) on `target` and ĉ from a finished run (`drafter_run`, a result of
        `speculative` on this machine, whose stats hold draft and target seconds)."""
        from ..core.latency import measure_forward_latency

        latency = measure_forward_latency(target, prefix_len=prefix_len,
                                          token_counts=list(range(1, max_tokens + 1)),
                                          repeats=repeats)
        return cls.from_latency(latency, drafter_run, **kwargs)

    @classmethod
    def from_latency(cls, latency: dict, drafter_run, **kwargs) -> "CostAwareGamma":
        """From a latency record (`measure_forward_latency`: token_counts with 1, median_ms)
        and a finished speculative run: ĉ = draft seconds per draft forward / t(1)."""
        counts, median_ms = latency["token_counts"], latency["median_ms"]
        if 1 not in counts:
            raise ValueError("the latency record must include k = 1 (a one-token forward)")
        one = median_ms[counts.index(1)]
        stats = drafter_run.stats
        if not stats.draft_forwards:
            raise ValueError("drafter_run made no draft forwards: run speculative with gamma >= 1")
        cost_ratio = (stats.draft_s / stats.draft_forwards) / (one / 1000)
        # A forward over more tokens never costs less: a dip in a noisy curve (t(5) below
        # t(4), say) is noise, and would make long blocks look cheaper than short ones.
        checking, highest = {}, 0.0
        for k, ms in sorted(zip(counts, median_ms)):
            highest = max(highest, ms / one)
            checking[k] = highest
        return cls(cost_ratio, checking, **kwargs)

    @classmethod
    def from_runs(cls, plain, runs: dict, **kwargs) -> "CostAwareGamma":
        """Costs as the loop paid them, not from a microbenchmark: `plain` a finished
        autoregressive run and `runs` {γ: a finished greedy run at that fixed γ} on the same
        prompt (`specnb.methods.calibrate.cost_aware_in_loop` makes both). t(γ+1)/t(1) is the γ
        run's mean target time per step over the autoregressive run's
        (`theory.in_loop_checking_cost`, made non-decreasing in k as in `from_latency`), and ĉ
        the smallest γ's mean draft forward over the autoregressive run's mean step."""
        from ..theory import in_loop_checking_cost, mean_step_seconds

        if not runs:
            raise ValueError("runs must hold at least one {gamma: run} with gamma >= 1")
        gammas = sorted(check_int("each gamma of runs", g, 1) for g in runs)
        checking, highest = {1: 1.0}, 1.0
        for g in gammas:
            highest = max(highest, in_loop_checking_cost([runs[g]], [plain])["median"])
            checking[g + 1] = highest
        first = runs[gammas[0]].stats
        if not first.draft_forwards:
            raise ValueError("the drafter made no draft forward at gamma "
                             f"{gammas[0]}: nothing to measure its cost by")
        cost_ratio = (first.draft_s / first.draft_forwards) / mean_step_seconds(plain)
        return cls(cost_ratio, checking, **kwargs)

    def block_cost(self, k: int) -> float:
        """t(k)/t(1), linear between measured k and extended from the last two beyond them
        (with a slope of at least 0: a wider forward never costs less)."""
        points = list(self.checking.items())
        if k in self.checking:
            return self.checking[k]
        if len(points) == 1:
            return points[0][1]
        (k0, v0), (k1, v1) = next(((a, b) for a, b in zip(points, points[1:]) if b[0] > k),
                                  points[-2:])
        slope = (v1 - v0) / (k1 - k0)
        if k > k1:  # beyond the measured range: never cheaper than the widest measured forward
            slope = max(slope, 0.0)
        return max(v0 + slope * (k - k0), 1e-9)

    def initial_state(self):
        return [0, 0, 0]  # accepted, verified, iterations since the row last drafted

    def alpha(self, row: int) -> float:
        accepted, verified, _ = self.state[row]
        return (accepted + self.prior_alpha * self.prior_weight) / (verified + self.prior_weight)

    def best_gamma(self, alpha: float) -> int:
        return max(range(self.minimum, self.maximum + 1),
                   key=lambda g: expected_tokens_per_iteration(alpha, g) /
                   (g * self.cost_ratio + self.block_cost(g + 1)))

    def gammas(self, rows):
        chosen = []
        for row in rows:
            gamma = self.best_gamma(self.alpha(row))
            if gamma == 0 and self.state[row][2] + 1 >= self.probe_every:
                gamma = 1  # a probe: one draft, to see whether α̂ has changed
            chosen.append(gamma)
        return chosen

    def update(self, rows, num_drafts, num_accepted):
        for row, drafted, accepted in zip(rows, num_drafts, num_accepted):
            self.state[row][0] += accepted
            self.state[row][1] += min(drafted, accepted + 1)  # up to the first rejection
            self.state[row][2] = 0 if drafted else self.state[row][2] + 1


def as_schedule(gamma) -> GammaSchedule:
    """`gamma` as the loop takes it: an int, "heuristic", or a `GammaSchedule`."""
    if isinstance(gamma, GammaSchedule):
        return gamma
    if isinstance(gamma, str):
        if gamma == "heuristic":
            return HeuristicGamma()
        raise ValueError(f"gamma must be an integer >= 0, 'heuristic' or a GammaSchedule "
                         f"(e.g. CostAwareGamma.measure(...)), got {gamma!r}")
    return FixedGamma(gamma)
