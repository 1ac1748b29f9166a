"""Checks for exercise 5: α̂ and ĉ from runs, the predicted speedup, γ*, and the timing table.

    alpha_from_trace(result) -> float          the mean overlap Σ min(p, q) of verified drafts
    cost_ratio(spec_result, ar_result) -> float  mean draft forward / mean one-token target forward
    speedup(alpha, gamma, cost_ratio) -> float   Leviathan et al. 2023, Theorem 3.8
    best_gamma(alpha, cost_ratio, max_gamma) -> int
    checking_cost(spec_result, ar_result) -> float  the loop's target time per step over a
                                                   one-token forward's (from the traces)
    speedup_checked(alpha, gamma, c, b) -> float   eq. (2): E[tokens] / (γc + b)

The estimators are checked on synthetic results (random traces and stats built here), so no
model runs; the formulas on a grid. `check_measurements` and `check_timing_table` check the
numbers a student computed on the embedded pair for consistency only: timing is noisy, so
nothing here asks speculative decoding to be faster. What the timing table is asked is that
eq. (2), charged with the checking cost the learner's own runs paid, predicts the learner's own
clock (within `CHECKED_FACTOR`, or as closely as the check's own runs do on a busy machine):
the theorem's 1 in its place does not, on a CPU.
"""

import contextvars
import math

import torch

from ...theory import estimate_alpha, estimate_cost_ratio, expected_tokens_per_iteration, \
    in_loop_checking_cost, optimal_gamma, predicted_speedup, predicted_with_block_cost
from .report import CheckFailed, ClockDisagreed, call, failure, passed, show, to_float


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rel * max(1.0, abs(b))


def _fake_types():
    """(DraftedToken, GenerationResult, Iteration, Stats), imported on first use: the decoding
    loops beside them import transformers (seconds), which the other exercises' kernels, that
    import these checks too, do without."""
    from ...methods import results

    return results.DraftedToken, results.GenerationResult, results.Iteration, results.Stats


def _fake_run(generator, num_iterations: int):
    """A speculative result with random drafts: accepted prefix, a rejection, unverified rest."""
    DraftedToken, GenerationResult, Iteration, Stats = _fake_types()
    trace, stats = [], Stats()
    for _ in range(num_iterations):
        gamma = int(torch.randint(1, 6, (), generator=generator))
        num_accepted = int(torch.randint(0, gamma + 1, (), generator=generator))
        iteration = Iteration()
        for j in range(gamma):
            status = "accepted" if j < num_accepted else "rejected" if j == num_accepted \
                else "unverified"
            q, p, overlap = torch.rand(3, generator=generator).tolist()
            iteration.drafted.append(DraftedToken(j, q, p, min(1.0, p / max(q, 1e-9)), overlap,
                                                  status))
        trace.append(iteration)
        stats.drafted += gamma
        stats.accepted += num_accepted
    return GenerationResult("speculative", [[]], stats, trace)


def check_estimate_alpha(alpha_from_trace, seed: int = 0) -> None:
    name = "alpha_from_trace"
    generator = torch.Generator().manual_seed(seed)
    for case in range(10):
        result = _fake_run(generator, 2 + case)
        given = (f"a synthetic run of {len(result.trace)} iterations, {result.stats.drafted} "
                 f"drafts ({result.stats.accepted} accepted)")
        expected = estimate_alpha(result)
        got = to_float(call(alpha_from_trace, result, given=given, name=name), name, given)
        if _close(got, expected):
            continue
        drafted = [d for it in result.trace for d in it.drafted]
        verified = [d for d in drafted if d.status != "unverified"]
        mistakes = [
            (sum(d.overlap for d in drafted) / len(drafted), "skip the unverified drafts (after "
             "the first rejection nobody looked at them): average over status != 'unverified'"),
            (result.stats.accepted / result.stats.drafted, "α is not accepted / drafted: "
             "average the overlap Σ min(p, q) stored in each DraftedToken (.overlap)"),
            (sum(d.status == "accepted" for d in verified) / len(verified), "α̂ is the mean "
             "overlap Σ_v min(p, q) (.overlap), not the fraction of verified drafts accepted"),
            (sum(d.accept_prob for d in verified) / len(verified), "use .overlap, the chance "
             "that *a* draft passes, not .accept_prob of the drafted token"),
        ]
        hint = next((h for value, h in mistakes if _close(got, value)),
                    "mean of d.overlap over every drafted token d with d.status != 'unverified'")
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    _, GenerationResult, Iteration, Stats = _fake_types()
    empty = GenerationResult("speculative", [[]], Stats(), [Iteration()])  # nothing drafted
    given = "a run whose only iteration drafted nothing (no verified draft)"
    hint = "with no verified draft there is nothing to average: return float('nan')"
    got = to_float(call(alpha_from_trace, empty, given=given, name=name, error_hint=hint),
                   name, given)
    if not math.isnan(got):
        raise failure(name, given=given, expected="nan", got=show(got), hint=hint)
    passed(name, 11)


def check_cost_ratio(cost_ratio, seed: int = 0) -> None:
    name = "cost_ratio"
    generator = torch.Generator().manual_seed(seed)
    _, GenerationResult, _, Stats = _fake_types()
    for case in range(10):
        spec = GenerationResult("speculative", [[]], Stats(), [])
        ar = GenerationResult("autoregressive", [[]], Stats(), [])
        forwards = torch.randint(3, 40, (3,), generator=generator).tolist()
        seconds = (torch.rand(3, generator=generator) + 0.05).tolist()
        spec.stats.draft_forwards, spec.stats.target_forwards, ar.stats.target_forwards = forwards
        spec.stats.draft_s, spec.stats.target_s, ar.stats.target_s = seconds
        given = (f"spec.stats: draft_forwards={forwards[0]}, draft_s={seconds[0]:.4f}, "
                 f"target_forwards={forwards[1]}, target_s={seconds[1]:.4f}; ar.stats: "
                 f"target_forwards={forwards[2]}, target_s={seconds[2]:.4f}")
        expected = estimate_cost_ratio(spec, ar)
        got = to_float(call(cost_ratio, spec, ar, given=given, name=name), name, given)
        if _close(got, expected):
            continue
        mistakes = [
            (estimate_cost_ratio(spec), "divide by the autoregressive run's mean target forward: "
             "the speculative run's target forwards score γ+1 tokens each, the theorem's c "
             "compares one-token forwards"),
            (seconds[0] / seconds[2], "compare mean times per forward (seconds / forwards), not "
             "total seconds"),
            (1 / expected, "upside down: c = draft forward time / target forward time (< 1)"),
        ]
        hint = next((h for value, h in mistakes if _close(got, value)),
                    "(spec.stats.draft_s / spec.stats.draft_forwards) / "
                    "(ar.stats.target_s / ar.stats.target_forwards)")
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, 10)


def _fake_steps(generator, steps: int, prompt_s: float, step_s: float):
    """A run as the loop writes it: one iteration per decoding step (1, 2, ...), each about
    `step_s` seconds; its stats count the prompt's forward (`prompt_s`, which fills the cache
    before step 1 and is not in the trace) in `target_s` but not in `target_forwards`."""
    _, GenerationResult, Iteration, Stats = _fake_types()
    seconds = (step_s * (0.7 + 0.6 * torch.rand(steps, generator=generator))).tolist()
    trace = [Iteration(step=i + 1, target_s=t) for i, t in enumerate(seconds)]
    stats = Stats(iterations=steps, target_forwards=steps, target_s=prompt_s + sum(seconds))
    return GenerationResult("speculative", [[]], stats, trace)


def check_checking_cost(checking_cost, seed: int = 0) -> None:
    name = "checking_cost"
    generator = torch.Generator().manual_seed(seed)
    for case in range(10):
        steps = torch.randint(3, 30, (2,), generator=generator).tolist()
        one = 0.02 + 0.03 * float(torch.rand((), generator=generator))
        cost = 1.0 + 1.5 * float(torch.rand((), generator=generator))
        spec = _fake_steps(generator, steps[0], 8 * one, cost * one)
        ar = _fake_steps(generator, steps[1], 8 * one, one)
        given = (f"a speculative run of {steps[0]} steps and an autoregressive run of "
                 f"{steps[1]}; the first (step, target_s) of the speculative trace: "
                 f"{[(it.step, round(it.target_s, 4)) for it in spec.trace[:3]]}")
        expected = in_loop_checking_cost([spec], [ar])["median"]
        got = to_float(call(checking_cost, spec, ar, given=given, name=name), name, given)
        if _close(got, expected):
            continue
        mine = [it.target_s for it in spec.trace]
        theirs = [it.target_s for it in ar.trace]
        mistakes = [
            ((spec.stats.target_s / spec.stats.target_forwards) /
             (ar.stats.target_s / ar.stats.target_forwards), "stats.target_s also holds the "
             "prompt's forward (it fills the cache before step 1), which is no checking: "
             "average target_s over the trace's iterations instead"),
            (sum(mine) / sum(theirs), "compare the mean time per step, not the totals: the two "
             "runs take different numbers of steps"),
            (1 / expected, "upside down: the speculative run's step over the autoregressive "
             "run's one-token forward (> 1 when checking costs more than one token)"),
        ]
        hint = next((h for value, h in mistakes if _close(got, value)),
                    "mean target_s over spec_result.trace, over the same mean for ar_result")
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, 10)


def check_speedup_checked(speedup_checked) -> None:
    name = "speedup_checked"
    cases = [(a, g, c, b) for a in (0.0, 0.3, 0.6, 1.0) for g in (0, 1, 3, 8)
             for c in (0.0, 0.05, 0.3) for b in (1.0, 1.4, 2.5)]
    for alpha, gamma, c, b in cases:
        given = f"alpha = {alpha}, gamma = {gamma}, c = {c}, checking = {b}"
        expected = predicted_with_block_cost(alpha, gamma, c, b)
        got = to_float(call(speedup_checked, alpha, gamma, c, b, given=given, name=name),
                       name, given)
        if _close(got, expected):
            continue
        tokens = expected_tokens_per_iteration(alpha, gamma)
        if b != 1 and _close(got, tokens / (gamma * c + 1)):
            hint = "the target's forward costs b one-token forwards, not 1: γc + b"
        elif b != 1 and _close(got, tokens / ((gamma * c + 1) * b)):
            hint = "b replaces the 1 of γc + 1 (the target forward's cost); it does not scale " \
                   "the draft's γc"
        else:
            hint = "speedup_checked = E[tokens per iteration] / (γc + b), with your " \
                   "expected_tokens"
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, len(cases))


def check_predicted_speedup(speedup) -> None:
    name = "speedup"
    cases = [(a, g, c) for a in (0.0, 0.3, 0.6, 0.9, 1.0) for g in (0, 1, 3, 8)
             for c in (0.0, 0.05, 0.3, 1.0)]
    for alpha, gamma, c in cases:
        given = f"alpha = {alpha}, gamma = {gamma}, cost_ratio = {c}"
        expected = predicted_speedup(alpha, gamma, c)
        limit_hint = "α = 1 makes (1 − α^{γ+1}) / (1 − α) a 0/0; its limit is γ + 1 (every " \
            "draft passes)"
        got = to_float(call(speedup, alpha, gamma, c, given=given, name=name,
                            error_hint=limit_hint if alpha == 1.0 else None), name, given)
        if _close(got, expected):
            continue
        tokens = expected_tokens_per_iteration(alpha, gamma)
        if alpha == 1.0 and not math.isfinite(got):
            hint = limit_hint
        elif alpha < 1 and _close(got, (1 - alpha ** gamma) / (1 - alpha) / (gamma * c + 1)):
            hint = "the exponent is γ+1: an iteration emits up to γ+1 tokens (the bonus)"
        elif gamma * c and _close(got, tokens / (gamma * c)):
            hint = "the denominator is γc + 1: γ draft forwards plus one target forward"
        elif _close(got, tokens):
            hint = "divide the expected tokens per iteration by the iteration's cost, γc + 1"
        else:
            hint = "speedup = (1 − α^{γ+1}) / ((1 − α)(γc + 1))"
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, len(cases))


def check_best_gamma(best_gamma, max_gamma: int = 16) -> None:
    name = "best_gamma"
    cases = [(a, c) for a in (0.1, 0.5, 0.7, 0.8, 0.9, 0.97, 1.0) for c in (0.01, 0.05, 0.2, 1.0)]
    cases += [(1.0, 0.0), (0.99, 0.0)]
    for alpha, c in cases:
        given = f"alpha = {alpha}, cost_ratio = {c}, max_gamma = {max_gamma}"
        expected = optimal_gamma(alpha, c, max_gamma)
        got = call(best_gamma, alpha, c, max_gamma, given=given, name=name)
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if got == expected:
            continue
        if expected == 0:
            hint = "γ = 0 (no drafting at all) is allowed and wins when the draft is too weak"
        elif expected == max_gamma:
            hint = "include max_gamma itself: range(max_gamma + 1)"
        else:
            hint = "return the γ in 0..max_gamma with the highest predicted speedup (an int)"
        raise failure(name, given=given, expected=expected, got=repr(got), hint=hint)
    passed(name, len(cases))


def check_measurements(alpha_hat, c_hat, best, spec_result, ar_result, max_gamma: int = 16):
    """The student's α̂, ĉ and γ* against the library's estimates from the same runs."""
    name = "your measurements"
    for label, value in (("alpha_hat", alpha_hat), ("c_hat", c_hat), ("predicted_best", best)):
        if value is None:
            raise failure(name, given=label, got="None",
                          hint=f"{label} is still None: fill in the cell above and run it")
    for label, value, expected, hint in (
            ("alpha_hat", alpha_hat, estimate_alpha(spec_result),
             "compute it with alpha_from_trace(spec_result)"),
            ("c_hat", c_hat, estimate_cost_ratio(spec_result, ar_result),
             "compute it with cost_ratio(spec_result, ar_result)")):
        value = to_float(value, name, label)
        if not _close(value, expected, 1e-4):
            raise failure(name, given=f"{label} from the runs above", expected=show(expected),
                          got=show(value), hint=hint)
    expected = optimal_gamma(float(alpha_hat), float(c_hat), max_gamma)
    if best != expected:
        raise failure(name, given=f"best_gamma from alpha_hat = {float(alpha_hat):.4f}, c_hat = "
                      f"{float(c_hat):.4f}", expected=expected, got=repr(best),
                      hint="predict with your own numbers: best_gamma(alpha_hat, c_hat, MAX_GAMMA)")
    passed(name, 3, f"alpha_hat {float(alpha_hat):.3f}, c_hat {float(c_hat):.3f}, "
           f"gamma* {expected}")


class Clock:
    """The check's own stopwatch for the timing table: the same decodes as the table's rows,
    timed once each in the run being graded."""

    def __init__(self, target, draft, input_ids, max_new_tokens: int):
        self.target, self.draft, self.input_ids = target, draft, input_ids
        self.max_new_tokens = max_new_tokens

    def seconds(self, gamma: int | None = None) -> float:
        """One autoregressive decode (gamma None) or one speculative decode at `gamma`."""
        return self.run(gamma)[1]

    def run(self, gamma: int | None = None) -> tuple:
        """(result, seconds) of one autoregressive (gamma None) or speculative decode."""
        import specnb
        from ...core.timed import timed

        if gamma is None:
            def decode():
                return specnb.autoregressive(self.target, self.input_ids,
                                             max_new_tokens=self.max_new_tokens, trace=True)
        else:
            def decode():
                return specnb.speculative(self.target, self.draft, self.input_ids, gamma=gamma,
                                          max_new_tokens=self.max_new_tokens, trace=True)
        result, seconds, _ = timed(decode, 1, self.target.device)
        return result, seconds


CLOCK_FACTOR = 2.5  # a median of 3 against one run, on a machine grading other work: noisy
# A checking cost is a ratio of two runs' step times, so the machine's speed cancels: tighter.
CHECKING_FACTOR = 1.5
# Eq. (2) leaves out the loop's own work and the draft's prompt forward, a few per cent of the
# clock on a CPU: well within the factor. A row priced with the theorem's checking cost of 1
# misses the clock by (γĉ + t(γ+1)/t(1)) / (γĉ + 1): outside the factor where checking γ + 1
# tokens costs well over 1.3 one-token forwards (each CPU's curve: data/results/latency-cpu-*).
CHECKED_FACTOR = 1.3
# The check's own clock, re-run when a row disagrees with it (see check_timing_table).
CLOCK_ATTEMPTS = 3
# Set by the grader (specnb.course.judge) while it runs the timing test: how long the learner's
# timing cell ran, timed from outside their kernel. Its rows cannot report more decoding than
# that (JUDGED_SHARE leaves room for a clock's rounding).
JUDGED_CELL_SECONDS: contextvars.ContextVar = contextvars.ContextVar("judged_cell_seconds",
                                                                     default=None)
JUDGED_SHARE = 0.9


def check_timing_table(rows, alpha_hat, c_hat, gammas=None, clock: Clock | None = None) -> None:
    """Each row: gamma, ar_seconds, spec_seconds, measured (= ar / spec), predicted (Thm 3.8),
    checking_cost (the speculative run's step over the autoregressive run's) and
    predicted_checked (eq. (2) with that checking cost).

    With `gammas` (the γ asked for, repeats allowed), the rows hold exactly those γ, each once.
    With `clock`, the table must have been measured in this run: graded, the timing cell ran at
    least as long as the decoding its rows report (`JUDGED_CELL_SECONDS`, timed by the grader);
    in the learner's own kernel, every time in it is one that `timed` (specnb.core.timed)
    returned there. Every time is within a factor CLOCK_FACTOR of the check's own decode of that
    row, every checking cost within CHECKING_FACTOR of the check's own, and eq. (2) predicts the
    row's clock within CHECKED_FACTOR, or strays from it no further than the check's own clock
    does (a machine busy with other work). A row that disagrees is compared again with fresh runs of the
    check's clock, up to CLOCK_ATTEMPTS sets: a grader's burst of other work costs it a re-run,
    not the student's points. A row that disagrees with all of them raises `ClockDisagreed`, on
    which the judge runs the timing cell again (the burst may have hit the student's own
    runs) before it grades the table a last time."""
    from ...core.timed import MEASURED

    measured_here = list(MEASURED)  # before the check's own clock adds to it
    judged_seconds = JUDGED_CELL_SECONDS.get()
    name = "timing table"
    keys = {"gamma", "ar_seconds", "spec_seconds", "measured", "predicted", "checking_cost",
            "predicted_checked"}
    if not rows:
        raise failure(name, given="rows", got=repr(rows),
                      hint="rows is empty: fill in the timing cell above and run it")
    if not isinstance(rows, list) or len({row.get("gamma") for row in rows
                                          if isinstance(row, dict)}) < 2:
        raise failure(name, given="rows", got=repr(rows)[:200],
                      hint="a list of dicts, one per γ, with at least two different γ")
    for row in rows:
        missing = keys - set(row)
        if missing:
            raise failure(name, given=f"row {row}", expected=f"keys {sorted(keys)}",
                          got=f"missing {sorted(missing)}", hint="add the missing keys")
        gamma = row["gamma"]
        times = [float(row["ar_seconds"]), float(row["spec_seconds"])]
        if int(gamma) != gamma or gamma < 0 or not all(math.isfinite(t) and t > 0 for t in times):
            raise failure(name, given=f"row {row}", hint="gamma is an int >= 0 and both times "
                          "are positive seconds (e.g. medians from specnb.bench.compare.timed)")
        if not _close(float(row["measured"]), times[0] / times[1], 1e-4):
            hint = ("upside down: speedup = autoregressive time / speculative time (> 1 means "
                    "faster)") if _close(float(row["measured"]), times[1] / times[0], 1e-4) \
                else "measured = ar_seconds / spec_seconds"
            raise failure(name, given=f"row {row}", expected=show(times[0] / times[1]),
                          got=show(float(row["measured"])), hint=hint)
        expected = predicted_speedup(float(alpha_hat), int(gamma), float(c_hat))
        if not _close(float(row["predicted"]), expected, 1e-4):
            raise failure(name, given=f"row {row}", expected=show(expected),
                          got=show(float(row["predicted"])),
                          hint="predicted = speedup(alpha_hat, gamma, c_hat) with your α̂ and ĉ")
        checking = float(row["checking_cost"])
        if not (math.isfinite(checking) and checking > 0):
            raise failure(name, given=f"row {row}", got=f"checking_cost = {checking}",
                          hint="checking_cost(spec_run, ar_run) of the two runs timed for "
                               "this row: a positive ratio")
        expected = predicted_with_block_cost(float(alpha_hat), int(gamma), float(c_hat),
                                             checking)
        if not _close(float(row["predicted_checked"]), expected, 1e-4):
            raise failure(name, given=f"row {row}", expected=show(expected),
                          got=show(float(row["predicted_checked"])),
                          hint="predicted_checked = speedup_checked(alpha_hat, gamma, c_hat, "
                               "checking_cost) with this row's checking cost")
    got_gammas = [int(row["gamma"]) for row in rows]
    if gammas is not None:
        if any(g is None for g in gammas):
            raise failure(name, given=f"the γ asked for: {list(gammas)}",
                          hint="predicted_best is still None: fill in 5.7 first")
        wanted = sorted({int(g) for g in gammas})
        if sorted(got_gammas) != wanted:
            raise failure(name, given="the γ column", expected=wanted, got=sorted(got_gammas),
                          hint="one row per γ asked for, each γ once")
    if clock is None:
        passed(name, len(rows), "consistency only: timings are noisy")
        return
    if judged_seconds is not None:  # graded: the grader timed the timing cell from outside
        claimed = sum({float(row["ar_seconds"]) for row in rows}) + \
            sum(float(row["spec_seconds"]) for row in rows)
        if judged_seconds < JUDGED_SHARE * claimed:
            raise failure(name, given="the timing cell, timed by the grader",
                          expected=f"at least the {claimed:.2f} s of decoding its rows report",
                          got=f"the cell ran {judged_seconds:.2f} s",
                          hint="time the decodes in that cell with `timed(...)`; do not type "
                               "the seconds")
    else:  # the learner's own kernel: were the seconds returned by `timed` here?
        for row in rows:
            for key in ("ar_seconds", "spec_seconds"):
                if not any(float(row[key]) == value for value in measured_here):
                    raise failure(name, given=f"row {row}", got=f"{key} = {row[key]}",
                                  hint=f"{key} was not measured in this run: time it with "
                                       f"`timed(...)` in the cell above, do not type it")
    attempts = []  # the check's own runs: {None: (result, seconds), γ: (result, seconds)}

    def measure() -> None:
        runs = {None: clock.run(None)}
        for gamma in sorted({int(row["gamma"]) for row in rows}):
            runs[gamma] = clock.run(gamma)
        attempts.append(runs)

    busy = []  # the rows that strayed from eq. (2) as far as the check's own clock did
    for row in rows:
        # A burst of other work on the grading machine slows one run, not three: a row that
        # disagrees with the check's clock is compared again with a fresh one, up to
        # CLOCK_ATTEMPTS, and passes when it agrees with any.
        problem = None
        for attempt in range(CLOCK_ATTEMPTS):
            if attempt == len(attempts):
                measure()
            problem = _against_clock(row, attempts[attempt], float(alpha_hat), float(c_hat))
            if not isinstance(problem, CheckFailed):
                break
        if isinstance(problem, CheckFailed):
            raise problem
        if problem == "busy":
            busy.append(int(row["gamma"]))
    machine = (f"; γ = {', '.join(map(str, busy))}: the machine was busy, the row strays from "
               f"eq. (2) as far as the check's own clock" if busy else "")
    passed(name, len(rows), f"consistent, measured in this run (within {CLOCK_FACTOR:g}× of the "
                            f"check's own clock), and eq. (2) with your checking cost predicts "
                            f"your clock within {CHECKED_FACTOR:g}×{machine}")


def _against_clock(row, runs, alpha_hat: float, c_hat: float):
    """How a row of the timing table agrees with one set of the check's own runs: "quiet" (eq.
    (2) predicts the row's clock), "busy" (the row strays from eq. (2) no further than the
    check's own clock), or the ClockDisagreed that says how it does not agree."""
    name, gamma = "timing table", int(row["gamma"])
    (own_ar, own_ar_seconds), (own_spec, own_spec_seconds) = runs[None], runs[gamma]
    for key, seconds in (("ar_seconds", own_ar_seconds), ("spec_seconds", own_spec_seconds)):
        ratio = float(row[key]) / seconds
        if not 1 / CLOCK_FACTOR <= ratio <= CLOCK_FACTOR:
            return failure(name, kind=ClockDisagreed, given=f"row γ = {gamma}",
                           expected=f"{key} near {seconds:.3f} s (the check's own run)",
                           got=f"{float(row[key]):.3f} s",
                           hint="time the decodes the row is about: autoregressive for "
                                "ar_seconds, speculative at that γ for spec_seconds")
    own_checking = in_loop_checking_cost([own_spec], [own_ar])["median"]
    ratio = float(row["checking_cost"]) / own_checking
    if not 1 / CHECKING_FACTOR <= ratio <= CHECKING_FACTOR:
        return failure(name, kind=ClockDisagreed, given=f"row γ = {gamma}",
                       expected=f"checking_cost near {own_checking:.3f} (the check's own runs)",
                       got=f"{float(row['checking_cost']):.3f}",
                       hint="the speculative run at this row's γ over the autoregressive "
                            "run, each the run `timed` returned for this row")
    # How far the row's clock strays from eq. (2), against how far the check's own clock,
    # measured just now, strays: on a quiet machine both are near 1; on a busy one the clock
    # itself strays, and the row may stray as far as the check's own runs do.
    strays = float(row["measured"]) / float(row["predicted_checked"])
    own_strays = (own_ar_seconds / own_spec_seconds) / predicted_with_block_cost(
        alpha_hat, gamma, c_hat, own_checking)
    for verdict, base in (("quiet", 1.0), ("busy", own_strays)):
        if 1 / CHECKED_FACTOR <= strays / base <= CHECKED_FACTOR:
            return verdict
    return failure(name, kind=ClockDisagreed, given=f"row γ = {gamma}",
                   expected=f"eq. (2)'s {float(row['predicted_checked']):.3f}x within "
                            f"{CHECKED_FACTOR:g}x of the clock",
                   got=f"measured {float(row['measured']):.3f}x (the check's own runs: "
                       f"{own_strays:.2f} of eq. (2))",
                   hint="the times and the checking cost of a row come from the same runs "
                        "(a machine busy with other work can also do this: run the timing "
                        "cell again)")
