"""Checks for exercise 1: the acceptance test and the residual at one position.

The student writes three functions over one position of a vocabulary of V tokens:

    accept_probability(p_x, q_x) -> float              min(1, p(x) / q(x)); q(x) = 0 -> 1 if p(x) > 0
    residual_distribution(target_probs, draft_probs)    (p − q)+ / Σ (p − q)+, `[V]`; p when p = q
    verify_one(target_probs, draft_probs, draft_token, generator) -> int   the emitted token

The first two are compared with the library case by case; `verify_one` is checked in law: over
many draws the emitted token must follow p (χ²) and the draft must be kept with probability
Σ min(p, q). Laws of classic mistakes (resampling from p, from q, never rejecting) are computed
too, so a failure names the mistake the samples look like.
"""

import torch

from ...core import accept_probability as library_accept_probability, acceptance_overlap, \
    residual_distribution as library_residual
from ...stats import SIGNIFICANCE, binomial_tolerance, chi2_pvalue, empirical_law
from .report import call, call_each, closest_mistake, failure, to_int, \
    passed, show, to_float

# A pair over 6 tokens with every kind of token: p > q (kept, and in the residual), p < q
# (sometimes rejected), p = q, p = 0 < q (always rejected) and q = 0 < p (never drafted).
TARGET = torch.tensor([0.30, 0.25, 0.20, 0.15, 0.10, 0.00])
DRAFT = torch.tensor([0.05, 0.00, 0.40, 0.15, 0.20, 0.20])


def check_accept_probability(accept_probability, seed: int = 0) -> None:
    name = "accept_probability"
    generator = torch.Generator().manual_seed(seed)
    cases = [(0.3, 0.6), (0.6, 0.3), (0.25, 0.25), (0.0, 0.5), (0.4, 0.0), (0.0, 0.0), (1.0, 1.0)]
    cases += [tuple(torch.rand(2, generator=generator).tolist()) for _ in range(20)]
    for p_x, q_x in cases:
        given = f"p_x = {show(p_x)}, q_x = {show(q_x)}"
        expected = float(library_accept_probability(torch.tensor(p_x), torch.tensor(q_x)))
        zero_hint = ("q(x) = 0 means the draft could not have proposed x; return 1 when p(x) > 0 "
                     "and 0 otherwise instead of dividing by zero") if q_x == 0 else None
        got = to_float(call(accept_probability, p_x, q_x, given=given, name=name,
                            error_hint=zero_hint), name, given)
        if abs(got - expected) <= 1e-6:
            continue
        if q_x == 0 and got != got:
            hint = zero_hint
        elif got > 1:
            hint = "an accept probability exceeded 1: did you forget the min(1, ·)?"
        elif q_x > 0 and p_x > 0 and abs(got - min(1.0, q_x / p_x)) < 1e-6:
            hint = "the ratio is upside down: accept with min(1, p(x) / q(x)), target over draft"
        elif q_x == 0:
            hint = "with q(x) = 0 the library accepts iff p(x) > 0 (p/q is 'infinite' or 0/0 = 0)"
        else:
            hint = "the probability of keeping a drafted x is min(1, p(x) / q(x))"
        raise failure(name, given=given, expected=show(expected), got=show(got), hint=hint)
    passed(name, len(cases))


def _pairs(generator, count: int):
    """(p, q) pairs `[V]`: the fixed pair, p = q, disjoint supports, and Dirichlet draws."""
    yield TARGET, DRAFT
    yield TARGET, TARGET.clone()
    yield torch.tensor([0.3, 0.7, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.4, 0.6])
    yield torch.tensor([0.0, 1.0, 0.0]), torch.tensor([1.0, 0.0, 0.0])
    for _ in range(count):
        vocab = int(torch.randint(2, 9, (), generator=generator))
        p, q = (torch.empty(vocab, dtype=torch.float64).exponential_(generator=generator)
                for _ in range(2))
        yield (p / p.sum()).float(), (q / q.sum()).float()


def _residual_hint(got: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> str:
    def normalized(x):
        return x / x.sum() if x.sum() > 0 else x
    if not torch.isfinite(got).all():
        return ("NaN or inf: when p = q the excess (p − q)+ is all zero and dividing by its sum "
                "gives 0/0; return p in that case (the residual is never sampled then)")
    if (got < -1e-6).any():
        return "negative entries: keep only the excess, max(0, p − q), before normalizing"
    if abs(float(got.sum()) - 1.0) > 1e-4:
        return "the entries do not sum to 1: divide (p − q)+ by its sum Σ_v (p(v) − q(v))+"
    for wrong, hint in ((normalized((q - p).clamp_min(0)), "the sign is flipped: the residual "
                         "is the part of p above q, max(0, p − q), not max(0, q − p)"),
                        (normalized((p - q).abs()), "use max(0, p − q), not |p − q|"),
                        (p, "you returned p itself: after a rejection sample from the excess "
                         "of p over q, (p − q)+ normalized"),
                        (q, "you returned q: the residual is (p − q)+ normalized")):
        if wrong.shape == got.shape and torch.allclose(got, wrong.float(), atol=1e-5):
            return hint
    return "the residual is max(0, p − q) / Σ_v max(0, p(v) − q(v))"


def check_residual(residual_distribution, seed: int = 0) -> None:
    name = "residual_distribution"
    generator = torch.Generator().manual_seed(seed)
    num_cases = 0
    for p, q in _pairs(generator, 20):
        given = f"target_probs = {show(p)}, draft_probs = {show(q)}"
        got = call(residual_distribution, p.clone(), q.clone(), given=given, name=name)
        expected = library_residual(p, q)
        got_tensor = torch.as_tensor(got, dtype=torch.float32) if not isinstance(
            got, torch.Tensor) else got.float()
        if got_tensor.shape != expected.shape:
            raise failure(name, given=given, expected=f"a tensor of shape {list(expected.shape)}",
                          got=f"shape {list(got_tensor.shape)}",
                          hint="return one probability per token, shape [V]")
        if not torch.allclose(got_tensor, expected, atol=1e-5):
            raise failure(name, given=given, expected=show(expected), got=show(got_tensor),
                          hint=_residual_hint(got_tensor, p, q))
        num_cases += 1
    passed(name, num_cases)


def check_verify_one(verify_one, seed: int = 0, num_draws: int = 20_000) -> None:
    """The emitted token follows p, the draft is kept with probability Σ min(p, q)."""
    name = "verify_one"
    p, q = TARGET, DRAFT
    vocab = p.numel()
    generator = torch.Generator().manual_seed(seed)
    drafts = torch.multinomial(q, num_draws, replacement=True, generator=generator).tolist()
    emitted = []

    def given(index):
        return (f"target_probs = {show(p)}, draft_probs = {show(q)}, "
                f"draft_token = {drafts[index]}")
    tokens = call_each(verify_one, [(p, q, t, generator) for t in drafts], given=given,
                       name=name)
    for index, token in enumerate(tokens):
        token = to_int(token, name, given(index))
        if not 0 <= token < vocab:
            raise failure(name, given=given(index), got=token,
                          hint=f"return one token id in [0, {vocab}) (no -1 here)")
        if p[token] == 0:
            raise failure(name, given=given(index), got=token,
                          hint=f"emitted token {token}, which has p = 0: it can never come from "
                               f"the target; a draft with p(x) = 0 must always be rejected")
        emitted.append(token)
    emitted = torch.tensor(emitted)
    kept = (emitted == torch.tensor(drafts)).double().mean().item()  # a rejected x is never re-emitted
    overlap = float(acceptance_overlap(p, q))
    law, pvalue = torch.from_numpy(empirical_law(emitted, vocab)), chi2_pvalue(emitted, p)
    given = (f"{num_draws} calls with target_probs = {show(p)}, draft_probs = {show(q)}, "
             f"draft tokens drawn from q")
    if pvalue < SIGNIFICANCE:
        rest = 1.0 - overlap
        mistakes = {
            "p": (torch.minimum(p, q) + rest * p, "the law looks like 'resample from p after a "
                  "rejection': resample from the residual (p − q)+ normalized instead"),
            "q": (torch.minimum(p, q) + rest * q, "the law looks like 'resample from q after a "
                  "rejection': resample from the residual (p − q)+ normalized instead"),
            "keep": (q, "the law is q, the draft's: you seem to keep every draft token; keep x "
                     "only when u < min(1, p(x)/q(x)) with u = torch.rand((), generator=generator)"),
        }
        hint = closest_mistake(law, p, mistakes) or (
            "keep x when u < min(1, p(x)/q(x)), else emit a draw from the residual")
        raise failure(name, given=given, expected=f"tokens distributed as p = {show(p)}",
                      got=f"empirical law {show(law.float())} (χ² p-value {pvalue:.2g})",
                      hint=hint)
    if abs(kept - overlap) > binomial_tolerance(overlap, num_draws):
        # Not the overlap itself: exercise 1.0 asks for it by hand, graded after hand-in.
        raise failure(name, given=given, expected="the draft kept in a share of the calls "
                      "within binomial noise of Σ min(p, q)", got=f"kept in {kept:.4f}",
                      hint="keep x exactly when u < min(1, p(x)/q(x)) with one uniform u per call")
    twice = [(p, q, t, torch.Generator().manual_seed(7)) for t in drafts[:30] for _ in range(2)]
    repeat = [to_int(t, name, "the same inputs twice") for t in call_each(
        verify_one, twice, given=lambda i: "the same inputs twice with generators seeded alike",
        name=name)]
    if repeat[0::2] != repeat[1::2]:
        raise failure(name, given="the same inputs twice, each with a generator seeded 7",
                      got="different tokens",
                      hint="draw every random number from the `generator` argument "
                           "(torch.rand(..., generator=generator), torch.multinomial(..., "
                           "generator=generator)) so results reproduce")
    passed(name, num_draws, f"χ² p-value {pvalue:.3f}, the draft kept as often as Σ min(p, q) "
           f"predicts")
