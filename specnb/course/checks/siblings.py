"""Checks for assignment 8, part 2: trying a node's siblings in a token tree (notebook 13).

    try_siblings(p, candidates, generator) -> the emitted token id
    siblings_are_exact(sampler, p, candidates, generator) -> bool

At a node whose children are deterministic candidates (a head's top-k guesses, point masses),
exact tree verification tries them in order with a law r that starts as the target's p: keep
candidate x with probability r(x); if it is rejected, take x out of r and renormalise, then try
the next; when none is kept, draw from what is left of r. The emitted token's law is then p
exactly. Forgetting to take a rejected candidate out (or to renormalise) skews it, towards the
candidates and towards the tokens tried first.

`check_try_siblings` tests the student's walk on forced cases (a candidate that must or cannot
pass) and in law, with a χ² test against p; a wrong law is named by the mistake it matches.
`check_siblings_are_exact` hands the student's detector samplers that run in the grader, the
library's exact tree verification of a star of candidates and its variant that forgets to take
rejected candidates out, shuffled by the seed; the detector must tell them apart, every time.
"""

import torch

from ...core.tree_verify import tree_verify
from ...stats import chi2_pvalue
from .report import call, call_each, closest_mistake, failure, passed, show, to_int

NAME = "try_siblings"
LEVEL = 1e-4  # a correct walk fails a χ² test this rarely


def sibling_law(p, candidates, *, remove: bool = True, renormalize: bool = True):
    """The exact law of the emitted token: the right walk by default; `remove=False`: a
    rejected candidate stays in r; `renormalize=False`: it is zeroed but r is not rescaled."""
    r, law, still = p.double().clone(), torch.zeros_like(p, dtype=torch.float64), 1.0
    for x in candidates:
        kept = float(r[x])
        law[x] += still * kept
        still *= 1 - kept
        if remove:
            r[x] = 0.0
            if renormalize and r.sum() > 0:
                r = r / r.sum()
    if still > 0:
        law += still * r / r.sum()
    return law


MISTAKES = {
    "kept": (dict(remove=False), "a rejected candidate stays in r: take it out (r(x) = 0) "
                                 "before the next sibling is tried, and before the last draw"),
    "unnormalised": (dict(renormalize=False), "after zeroing a rejected candidate, renormalise "
                                              "r (divide by what is left) before the next "
                                              "sibling's coin"),
}

# (p, candidates) of the law tests: the mistakes move >= 0.08 of mass in each.
LAW_CASES = [
    ([0.40, 0.25, 0.15, 0.10, 0.06, 0.04], [0, 1, 2]),
    ([0.05, 0.30, 0.35, 0.20, 0.10], [2, 3]),
]
FORCED = [  # (p, candidates, the only possible output, what it shows)
    ([0.0, 1.0, 0.0, 0.0], [0, 1], 1, "p puts all its mass on the second candidate"),
    ([0.0, 0.0, 0.0, 1.0], [0, 1, 2], 3, "no candidate has any mass: the last draw decides"),
]


def check_try_siblings(try_siblings, seed: int = 0, num_draws: int = 12_000) -> None:
    generator = torch.Generator().manual_seed(seed)
    for p, candidates, expected, what in FORCED:
        p = torch.tensor(p, dtype=torch.float64)
        given = f"p = {show(p)}, candidates = {candidates} ({what})"
        answers = call_each(try_siblings, [(p, list(candidates), generator)] * 200,
                            given=lambda _: given, name=NAME)
        got = [to_int(a, NAME, given) for a in answers]
        wrong = [t for t in got if t != expected]
        if wrong:
            raise failure(NAME, given=given, expected=expected, got=wrong[0],
                          hint="keep candidate x with probability r(x), exactly: 1 when r "
                               "is all on x, 0 when r(x) = 0")
    for p, candidates in LAW_CASES:
        p = torch.tensor(p, dtype=torch.float64)
        given = f"p = {show(p)}, candidates = {candidates}, {num_draws} calls"
        answers = call_each(try_siblings, [(p, list(candidates), generator)] * num_draws,
                            given=lambda _: given, name=NAME)
        tokens = torch.tensor([to_int(a, NAME, given) for a in answers])
        pvalue = chi2_pvalue(tokens, p)
        if pvalue < LEVEL:
            seen = torch.bincount(tokens.clamp(0, len(p) - 1), minlength=len(p)).double()
            mistakes = {key: (sibling_law(p, candidates, **switches), hint)
                        for key, (switches, hint) in MISTAKES.items()}
            raise failure(NAME, given=given, expected=f"tokens with the law p = {show(p, 3)}",
                          got=f"frequencies {show(seen / len(tokens), 3)} (χ² p-value "
                              f"{pvalue:.2g})",
                          hint=closest_mistake(seen / len(tokens), p, mistakes) or
                          "the output must have p's law: try each candidate with the current "
                          "r, and on a rejection take it out of r and renormalise")
    passed(NAME, len(FORCED) + len(LAW_CASES), "each in law (χ²)")


# The detector's samplers: the library's tree verification of a star of candidates under the
# pending token, exact or with the rejected candidates left in r (renormalize=False).
DETECT_CASES = [
    ([0.45, 0.30, 0.10, 0.08, 0.07], [0, 1]),
    ([0.20, 0.35, 0.25, 0.15, 0.05], [1, 2, 3]),
]


def _star_sampler(p, candidates, exact: bool):
    def sampler(num_draws: int, generator: torch.Generator) -> torch.Tensor:
        vocab, k = p.numel(), len(candidates)
        target = torch.full((num_draws, k + 1, vocab), 1.0 / vocab, dtype=torch.float64)
        target[:, 0] = p
        verdict = tree_verify(target, None, torch.tensor([candidates] * num_draws),
                              torch.full((num_draws, k), -1), generator=generator,
                              renormalize=exact)
        return verdict.tokens[:, 0]  # the token emitted right after the pending one
    return sampler


def _suspects(seed: int) -> list:
    """[(p, candidates, exact?)], each case exact once and broken once, shuffled by seed."""
    generator = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor(p, dtype=torch.float64), c, exact)
             for p, c in DETECT_CASES for exact in (True, False)]
    return [cases[i] for i in torch.randperm(len(cases), generator=generator).tolist()]


def check_siblings_are_exact(siblings_are_exact, seeds=(0, 1)) -> None:
    name = "siblings_are_exact"
    num_cases = 0
    for seed in seeds:
        for index, (p, candidates, exact) in enumerate(_suspects(seed)):
            given = (f"sampler {index + 1} of shuffle {seed}: p = {show(p)}, candidates = "
                     f"{candidates}")
            got = call(siblings_are_exact, _star_sampler(p, candidates, exact), p.clone(),
                       list(candidates), torch.Generator().manual_seed(1000 * seed + index),
                       given=given, name=name)
            if hasattr(got, "item") and getattr(got, "ndim", 1) == 0:
                got = got.item()  # a numpy or 0-d torch bool
            if not isinstance(got, bool):
                raise failure(name, given=given, got=repr(got)[:200],
                              hint="return True (the law is p) or False (it is not)")
            if bool(got) != exact:
                hint = ("this sampler is exact: is your level too strict (use 1e-3), or are "
                        "the counts not per token?") if exact else \
                    ("this sampler forgets to take rejected candidates out of r, and your test "
                     "passed it: draw more samples (20 000 detect it) and compare the counts "
                     "with p, token by token")
                raise failure(name, given=given, expected=exact, got=bool(got), hint=hint)
            num_cases += 1
    passed(name, num_cases, "samplers, half of them broken")


__all__ = ["check_siblings_are_exact", "check_try_siblings", "sibling_law"]
