"""Checks for assignment 7, part 2: acceptance by draft position, as a course and an engine count.

    acceptance_by_position(result, gamma) -> (conditional, per_draft), two lists of γ floats

From a speculative run's trace (`result.trace`, one `Iteration` per step, its `drafted` tokens
with status "accepted", "rejected" or "unverified"):

- `conditional[i]`: P(draft position i is accepted | it was reached), accepted / reached, where
  position i is reached when the i drafts before it were accepted (status not "unverified");
  NaN where no step reached it. This is what decides how far a block gets (notebook 11).
- `per_draft[i]`: vLLM's "per-position acceptance rate": among the steps that drafted anything
  (a "draft" in vLLM's words), the share that accepted more than i tokens. What a serving
  engine logs, so a course figure can be set beside a production one.

The checks compare both with the rule on synthetic runs whose acceptance falls with the
position (as a head's does), with short blocks (a budget's last step) and steps that drafted
nothing, and on the learner's own run of the head; `check_mean_acceptance_length` grades
vLLM's mean acceptance length computed from `per_draft` alone, against the loop's own counters
on the learner's run.
"""

import math

import torch

from ...theory import position_counts
from .gamma import _fake_types
from .report import call, failure, passed, show, to_float

NAME = "acceptance_by_position"


def reference_by_position(result, gamma: int) -> tuple:
    """(conditional, per_draft) by the rules above, as the library counts them."""
    counts = position_counts(result, gamma)
    return counts.conditional, counts.per_draft


def _synthetic_run(generator, gamma: int, num_steps: int):
    """A chain run whose position i passes with a chance falling with i (0.8, 0.65, ...)."""
    DraftedToken, GenerationResult, Iteration, Stats = _fake_types()
    trace, stats = [], Stats()
    for step in range(num_steps):
        iteration = Iteration(step=step + 1, gamma=gamma)
        length = gamma if step < num_steps - 1 else int(torch.randint(0, gamma + 1, (),
                                                                      generator=generator))
        if step % 7 == 3:
            length = 0  # a step that drafted nothing (the n-gram drafter found no match)
        rejected = False
        for j in range(length):
            if rejected:
                status = "unverified"
            else:
                rejected = float(torch.rand((), generator=generator)) >= 0.8 - 0.15 * j
                status = "rejected" if rejected else "accepted"
            iteration.drafted.append(DraftedToken(j, 0.5, 0.5, 1.0, 0.5, status))
        trace.append(iteration)
        # The trace only: no engine counters (drafting_steps, accepted_per_position), so the
        # answer has to come from the statuses.
        stats.drafted += length
        stats.accepted += sum(d.status == "accepted" for d in iteration.drafted)
    return GenerationResult("speculative", [[]], stats, trace)


def _same(got: list, expected: list) -> bool:
    return len(got) == len(expected) and all(
        (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 for a, b in zip(got, expected))


def _unpack(answer, gamma, given) -> tuple:
    try:
        conditional, per_draft = answer
        return ([to_float(v, NAME, given) for v in conditional],
                [to_float(v, NAME, given) for v in per_draft])
    except (TypeError, ValueError):
        raise failure(NAME, given=given, got=repr(answer)[:200],
                      hint=f"return (conditional, per_draft): two lists of {gamma} floats") \
            from None


def _hint(result, gamma, got, expected) -> str:
    conditional, per_draft = got
    if _same(conditional, expected[1]) and _same(per_draft, expected[0]):
        return ("the two lists are swapped: conditional divides by the steps that *reached* "
                "position i, per_draft by the steps that drafted anything")
    if _same(conditional, expected[1]):
        return ("a draft after the first rejection was never looked at: it is not reached "
                "(status 'unverified'), so it counts in neither accepted nor reached")
    if not _same(conditional, expected[0]):
        if any(math.isnan(v) for v in expected[0]) and not any(math.isnan(v) for v in
                                                               conditional):
            return "a position no step reached has no rate: float('nan'), not 0"
        return ("conditional[i] = accepted / reached at position i; a draft is reached unless "
                "its status is 'unverified' (it came after the first rejection)")
    steps = len(result.trace)
    drafting = sum(1 for it in result.trace if it.drafted)
    if steps != drafting and _same(per_draft, [v * drafting / steps for v in expected[1]]):
        return ("a step that drafted nothing is not a draft: divide by the steps that drafted "
                "at least one token")
    return "per_draft[i] = (drafting steps that accepted more than i tokens) / (drafting steps)"


def check_acceptance_by_position(acceptance_by_position, seed: int = 0, runs=(),
                                 gamma: int = 5) -> None:
    """On synthetic runs (`seed` picks them) and on `runs`, the learner's own, at `gamma`."""
    generator = torch.Generator().manual_seed(seed)
    cases = [(_synthetic_run(generator, g, steps), g, f"a synthetic run at γ = {g}, {steps} steps")
             for g, steps in ((gamma, 30), (3, 12), (1, 5), (gamma, 9))]
    cases += [(run, gamma, f"your run {index} at γ = {gamma}, {len(run.trace)} steps")
              for index, run in enumerate(runs)]
    for result, g, given in cases:
        expected = reference_by_position(result, g)
        got = _unpack(call(acceptance_by_position, result, g, given=given, name=NAME), g, given)
        if not (_same(got[0], expected[0]) and _same(got[1], expected[1])):
            raise failure(NAME, given=given,
                          expected=f"conditional {show([round(v, 4) for v in expected[0]])}, "
                                   f"per_draft {show([round(v, 4) for v in expected[1]])}",
                          got=f"conditional {show([round(v, 4) for v in got[0]])}, "
                              f"per_draft {show([round(v, 4) for v in got[1]])}",
                          hint=_hint(result, g, got, expected))
    passed(NAME, len(cases), "runs")


def check_mean_acceptance_length(mean_acceptance_length, seed: int = 0, runs=()) -> None:
    """vLLM's mean acceptance length, 1 + accepted / drafts, from per_draft alone: on synthetic
    runs and on `runs`, whose own counters (the loop's, as vLLM's) it must match."""
    name = "mean_acceptance_length"
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for g, steps in ((5, 20), (3, 8), (2, 3)):
        result = _synthetic_run(generator, g, steps)
        drafts = sum(1 for it in result.trace if it.drafted)
        cases.append((reference_by_position(result, g)[1], 1 + result.stats.accepted / drafts,
                      f"per_draft of a synthetic run at γ = {g}"))
    for index, run in enumerate(runs):
        gamma = max(len(it.drafted) for it in run.trace)
        cases.append((reference_by_position(run, gamma)[1], run.stats.mean_acceptance_length,
                      f"per_draft of your run {index}, whose loop counted "
                      f"{run.stats.accepted} accepted in {run.stats.drafting_steps} drafts"))
    for per_draft, expected, given in cases:
        given = f"{given}: {show([round(v, 4) for v in per_draft])}"
        got = to_float(call(mean_acceptance_length, list(per_draft), given=given, name=name),
                       name, given)
        if not abs(got - expected) <= 1e-6:
            raise failure(name, given=given, expected=f"{expected:.6g}", got=f"{got:.6g}",
                          hint="a draft that accepted n tokens counts in per_draft[0..n−1], so "
                               "Σ_i per_draft[i] = accepted / drafts; vLLM adds the one token "
                               "the target always emits")
    passed(name, len(cases))


__all__ = ["check_acceptance_by_position", "check_mean_acceptance_length",
           "reference_by_position"]
