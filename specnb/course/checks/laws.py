"""Checks for assignment 6 (and a prediction in 1): the law of a sampler, by reasoning and by test.

    law_resample_from_p(p, q) -> [V]   the output law of "on a rejection, draw from p"
    law_greedy_draft(p, q) -> [V]      the output law of "draft argmax q, but tell verify q"
    chi2_pvalue(counts, probs) -> float  Pearson's χ² test, written by the student
    find_broken(samplers, target_probs, generator) -> set of names of the broken samplers

The laws are compared with an exact enumeration over the draft token and the coin (`exact_law`),
never with a formula, so any correct closed form passes. The find-the-bug task hands out
`suspects(seed)`: samplers named "A", "B", ... for one fixed pair, some exact, some with one of
notebook 04's mistakes ((a) no residual, (b) q from other logits in the ratio, (c) a greedy draft
told q), shuffled by the seed so the answer cannot be copied from one run to another.
"""

import math

import torch

from ...core.verify import accept_probability, residual_distribution
from .report import call, failure, passed, show, to_float

# The pair of the find-the-bug task: every mistake of notebook 04 moves >= 0.05 of mass here.
SUSPECT_TARGET = torch.tensor([0.35, 0.25, 0.15, 0.12, 0.08, 0.05], dtype=torch.float64)
SUSPECT_DRAFT = torch.tensor([0.10, 0.30, 0.30, 0.05, 0.15, 0.10], dtype=torch.float64)


def exact_law(p, q, *, drafted_from=None, told=None, on_reject="residual") -> torch.Tensor:
    """The law of the emitted token, by enumeration: Σ_x P(draft x) [a(x) δ_x + (1 − a(x)) r].

    `drafted_from`: the law drafts are drawn from (default q); `told`: the q that `verify` sees
    (default q); `on_reject`: "residual" (of p and `told`), "p" or "q"."""
    p, q = p.double(), q.double()
    drafted_from = q if drafted_from is None else drafted_from.double()
    told = q if told is None else told.double()
    accept = accept_probability(p, told)  # [V]
    rejected = {"residual": residual_distribution(p, told), "p": p, "q": q}[on_reject]
    law = torch.zeros_like(p)
    for x in range(p.numel()):
        if drafted_from[x] > 0:
            law[x] += drafted_from[x] * accept[x]
            law += drafted_from[x] * (1 - accept[x]) * rejected
    return law


def greedy_law(p, q):
    return exact_law(p, q, drafted_from=torch.nn.functional.one_hot(q.argmax(), q.numel()))


def _random_pairs(generator, count):
    yield SUSPECT_TARGET, SUSPECT_DRAFT
    yield torch.tensor([0.3, 0.7, 0.0]), torch.tensor([0.0, 0.2, 0.8])
    for _ in range(count):
        vocab = int(torch.randint(2, 8, (), generator=generator))
        p, q = (torch.empty(vocab, dtype=torch.float64).exponential_(generator=generator)
                for _ in range(2))
        yield p / p.sum(), q / q.sum()


def _as_law(got, vocab, name, given):
    try:
        got = torch.as_tensor(got, dtype=torch.float64).flatten()
    except (TypeError, ValueError):
        raise failure(name, given=given, got=repr(got)[:80],
                      hint="return one probability per token, a [V] tensor") from None
    if got.numel() != vocab:
        raise failure(name, given=given, expected=f"{vocab} probabilities", got=got.numel(),
                      hint="return one probability per token, a [V] tensor")
    return got


def check_broken_law(law_fn, variant: str, seed: int = 0) -> None:
    """`variant`: "resample_from_p" or "greedy_draft"."""
    truth = {"resample_from_p": lambda p, q: exact_law(p, q, on_reject="p"),
             "greedy_draft": greedy_law}[variant]
    name = getattr(law_fn, "__name__", variant)
    generator = torch.Generator().manual_seed(seed)
    num_cases = 0
    for p, q in _random_pairs(generator, 20):
        given = f"p = {show(p)}, q = {show(q)}"
        got = _as_law(call(law_fn, p.clone(), q.clone(), given=given, name=name), p.numel(),
                      name, given)
        expected = truth(p, q)
        if not torch.allclose(got, expected, atol=1e-6):
            if torch.allclose(got, p, atol=1e-6):
                hint = "that is p, the law of the correct sampler: this variant is biased"
            elif abs(float(got.sum()) - 1) > 1e-6:
                hint = "the law must sum to 1: add up every way a token can be emitted"
            elif variant == "resample_from_p":
                hint = ("x is emitted when it is drafted and kept (q(x) min(1, p(x)/q(x)) = "
                        "min(p, q)(x)), or after any rejection (total 1 − Σ min(p, q)) by a "
                        "draw from p")
            else:
                hint = ("the draft is always x* = argmax q: it is kept with probability "
                        "min(1, p(x*)/q(x*)), else the residual (p − q)+ normalized is drawn")
            raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
        num_cases += 1
    passed(name, num_cases, "each equal to the enumerated law")


def check_prediction(name: str, got, expected, hint: str, tolerance: float = 1e-3) -> None:
    """A number the student predicted (by hand, before running anything)."""
    if got is None:
        raise failure(name, given=name, got="None", hint=f"{name} is still None: set it above")
    if isinstance(expected, str):
        if str(got).strip().lower() != expected:
            raise failure(name, given=name, got=repr(got), hint=hint)
    else:
        value = to_float(got, name, name)
        if not abs(value - expected) <= tolerance:
            raise failure(name, given=name, got=show(value), hint=hint)
    passed(name, 1)


def check_answer_form(name: str, got, choices) -> None:
    """The visible half of a prediction's test: the answer has the right form (one of
    `choices`, an int when `choices` is int, a probability when it is float), not whether it is
    right, so the visible test does not show the answer; the hidden test (`check_prediction`)
    grades it."""
    if got is None:
        raise failure(name, given=name, got="None", hint=f"{name} is still None: set it above")
    if choices is int:
        if isinstance(got, bool) or not to_float(got, name, name).is_integer():
            raise failure(name, given=name, got=repr(got), hint="a whole number, e.g. 3")
    elif choices is float:
        if isinstance(got, bool) or not 0 <= to_float(got, name, name) <= 1:
            raise failure(name, given=name, got=repr(got), hint="a probability, e.g. 0.25")
    elif str(got).strip().lower() not in choices:
        raise failure(name, given=name, got=repr(got),
                      hint=f"one of {', '.join(map(repr, choices))}")
    print(f"✓ {name} has the form of an answer; whether it is right is graded after you hand in")


def check_overlap_prediction(predicted_overlap) -> None:
    from .acceptance import DRAFT, TARGET
    check_prediction("predicted_overlap", predicted_overlap,
                     float(torch.minimum(TARGET, DRAFT).sum()),
                     "add min(p(x), q(x)) token by token: 0.05 + 0 + ... ; it is the "
                     "probability that the draft passes, Σ_x q(x) min(1, p(x)/q(x))", 1e-3)


def _chi2_cases(generator):
    """(counts, probs) whose expected counts are all >= 5 (no pooling needed)."""
    yield [50, 50], [0.5, 0.5]
    yield [90, 10], [0.5, 0.5]
    yield [30, 20, 50], [0.2, 0.3, 0.5]
    yield [0, 40, 60], [0.0, 0.5, 0.5]  # a zero-probability cell without counts: drop it
    for _ in range(10):
        vocab = int(torch.randint(2, 7, (), generator=generator))
        probs = torch.rand(vocab, generator=generator, dtype=torch.float64) + 0.2
        probs = probs / probs.sum()
        samples = torch.multinomial(probs, 400, replacement=True, generator=generator)
        yield torch.bincount(samples, minlength=vocab).tolist(), probs.tolist()


def reference_chi2_pvalue(counts, probs) -> float:
    counts = torch.as_tensor(counts, dtype=torch.float64)
    probs = torch.as_tensor(probs, dtype=torch.float64)
    expected = probs / probs.sum() * counts.sum()
    if (counts[expected == 0] > 0).any():
        return 0.0
    keep = expected > 0
    statistic = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    from scipy.stats import chi2  # here: scipy.stats takes a second to import

    return float(chi2.sf(statistic, int(keep.sum()) - 1))


def check_chi2_pvalue(chi2_pvalue, seed: int = 0) -> None:
    name = "chi2_pvalue"
    generator = torch.Generator().manual_seed(seed)
    cases = list(_chi2_cases(generator)) + [([3, 0, 7], [0.5, 0.0, 0.5])]
    for counts, probs in cases:
        given = f"counts = {counts}, probs = {show(torch.tensor(probs))}"
        expected = reference_chi2_pvalue(counts, probs)
        got = to_float(call(chi2_pvalue, list(counts), list(probs), given=given, name=name),
                       name, given)
        if abs(got - expected) <= 1e-6 + 1e-4 * expected:
            continue
        kept = [p for p in probs if p > 0]
        if 0 in probs and expected == 0.0:
            hint = ("a count in a cell of probability 0 is impossible under probs: the p-value "
                    "is 0")
        elif len(kept) < len(probs) and not math.isnan(got):
            hint = "drop the cells of probability 0; the degrees of freedom are (cells kept) − 1"
        else:
            hint = ("χ² = Σ (O − E)² / E with E = N p, p-value = "
                    "scipy.stats.chi2.sf(χ², df = cells − 1)")
        raise failure(name, given=given, expected=f"{expected:.6g}", got=f"{got:.6g}", hint=hint)
    passed(name, len(cases))


VARIANTS = {
    "exact": lambda p, q: exact_law(p, q),
    "no residual": lambda p, q: exact_law(p, q, on_reject="p"),
    "q at T = 0.7 in the ratio": lambda p, q: _other_temperature_law(p, q),
    "greedy draft told q": greedy_law,
}


def _told_q(q):
    sharper = q ** (1 / 0.7)
    return sharper / sharper.sum()


def _other_temperature_law(p, q):
    return exact_law(p, q, told=_told_q(q))


def _sampler(variant: str):
    """A function (num_draws, generator) -> [num_draws] emitted tokens for the suspect pair."""
    p, q = SUSPECT_TARGET, SUSPECT_DRAFT
    # Only laws are kept, never the variant's name: the answer is found by testing the samples.
    told = _told_q(q) if variant == "q at T = 0.7 in the ratio" else q
    proposal = torch.zeros_like(q).scatter_(0, q.argmax().view(1), 1.0) \
        if variant == "greedy draft told q" else q  # what the drafts are drawn from
    accept = accept_probability(p, told)
    rejected_law = p if variant == "no residual" else residual_distribution(p, told)

    def sampler(num_draws: int, generator: torch.Generator) -> torch.Tensor:
        drafts = torch.multinomial(proposal, num_draws, replacement=True, generator=generator)
        coins = torch.rand(num_draws, generator=generator, dtype=torch.float64) < accept[drafts]
        redraws = torch.multinomial(rejected_law, num_draws, replacement=True,
                                    generator=generator)
        return torch.where(coins, drafts, redraws)
    return sampler


def _truth(seed: int) -> dict:
    """{"A": variant name, ...}: 2 or 3 broken variants and exact ones, shuffled by `seed`."""
    generator = torch.Generator().manual_seed(seed)
    broken = [v for v in VARIANTS if v != "exact"]
    order = torch.randperm(len(broken), generator=generator).tolist()
    num_broken = 2 + int(torch.randint(0, 2, (), generator=generator))
    variants = [broken[i] for i in order[:num_broken]] + ["exact"] * (5 - num_broken)
    shuffled = [variants[i] for i in torch.randperm(5, generator=generator).tolist()]
    return dict(zip("ABCDE", shuffled))


def suspects(seed: int = 0) -> dict:
    """{"A": sampler, ...}: 5 samplers for SUSPECT_TARGET, 2 or 3 of them broken (which, is
    fixed by the seed). Call `sampler(num_draws, generator)` -> `[num_draws]` token ids."""
    return {label: _sampler(variant) for label, variant in _truth(seed).items()}


def check_find_broken(find_broken, seeds=(0, 1, 2)) -> None:
    """The student's procedure must name exactly the broken samplers, for several shuffles."""
    name = "find_broken"
    for seed in seeds:
        truth = _truth(seed)
        broken = {label for label, v in truth.items() if v != "exact"}
        given = f"checks.suspects({seed}), target_probs = {show(SUSPECT_TARGET)}"
        got = call(find_broken, suspects(seed), SUSPECT_TARGET.clone(),
                   torch.Generator().manual_seed(seed), given=given, name=name)
        try:
            got = {str(label) for label in got}
        except TypeError:
            raise failure(name, given=given, got=repr(got),
                          hint="return the names of the broken samplers, e.g. {'B', 'D'}") from None
        if got != broken:
            missed, accused = sorted(broken - got), sorted(got - broken)
            hint = []
            if missed:
                hint.append(f"{missed} {'is' if len(missed) == 1 else 'are'} broken but passed "
                            f"your test: draw more samples (20 000 detects these biases)")
            if accused:
                hint.append(f"{accused} {'is' if len(accused) == 1 else 'are'} exact: is your "
                            f"level too lax (use 1e-3), or the counts not per token?")
            raise failure(name, given=given, expected=sorted(broken), got=sorted(got),
                          hint="; ".join(hint))
    passed(name, len(seeds), "shuffles")


__all__ = ["SUSPECT_DRAFT", "SUSPECT_TARGET", "VARIANTS", "check_broken_law",
           "check_chi2_pvalue", "check_find_broken", "check_overlap_prediction",
           "check_prediction", "exact_law", "reference_chi2_pvalue", "suspects"]
