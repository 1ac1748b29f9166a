"""Checks for assignment 8, part 1: the output law of typical acceptance (notebook 12).

    typical_law(p, q, posterior_threshold, posterior_alpha) -> [V], the law of the emitted token

With one draft x ~ q, typical acceptance keeps x when p(x) > min(posterior_threshold,
posterior_alpha · exp(−H(p))), H the entropy of p in nats, and otherwise emits the target's
argmax. The student's law is compared with `specnb.core.typical.typical_law` on hand-made and
random pairs (peaked and flat targets, so that either side of the min decides); a wrong law is
matched against the classic mistakes to say which one it is. `check_law_prediction` grades a
law worked out by hand.
"""

import math

import torch

from ...core.typical import typical_law as library_law
from .report import call_each, failure, passed, show

NAME = "typical_law"

HAND_CASES = [  # (p, q, posterior_threshold, posterior_alpha)
    ([0.6, 0.3, 0.1], [0.2, 0.2, 0.6], 0.09, 0.3),  # every token clears the bar
    ([0.6, 0.3, 0.1], [0.2, 0.2, 0.6], 0.2, 1.0),  # the threshold decides: x3 gives way
    ([0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4], 0.3, 0.9),  # flat p: the entropy term
    ([0.9, 0.05, 0.05], [0.1, 0.45, 0.45], 0.09, 0.3),  # a confident target
    ([0.1, 0.7, 0.2], [0.5, 0.0, 0.5], 0.3, 0.5),  # the argmax was never drafted
]


def _bar(p, threshold, alpha, *, entropy_base=math.e, use_entropy=True):
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum() / math.log(entropy_base)
    return min(threshold, alpha * float(torch.exp(-entropy))) if use_entropy else threshold


def _variant(p, q, threshold, alpha, *, keep_with="q", fallback="p", **bar_switches):
    passes = p > _bar(p, threshold, alpha, **bar_switches)
    law = torch.where(passes, q if keep_with == "q" else p, torch.zeros_like(q))
    rejected = q[~passes].sum()
    law[(p if fallback == "p" else q).argmax()] += rejected
    return law


MISTAKES = [
    (dict(use_entropy=False), "the bar is min(posterior_threshold, posterior_alpha · exp(−H(p))): "
                              "a flat target (high entropy) lowers it"),
    (dict(entropy_base=2), "H(p) = −Σ p ln p, in nats (natural log), as vLLM computes it"),
    (dict(keep_with="p"), "a kept draft x was *drawn from q*: it contributes q(x), not p(x)"),
    (dict(fallback="q"), "a rejected draft gives way to the *target's* argmax, argmax p"),
]


def _hint(p, q, threshold, alpha, got, atol: float = 1e-6) -> str:
    for switches, hint in MISTAKES:
        if torch.allclose(got, _variant(p, q, threshold, alpha, **switches), atol=atol):
            return hint
    if abs(float(got.sum()) - 1) > 1e-6:
        return f"the law sums to {float(got.sum()):.4g}: every draft is either kept or replaced"
    return ("P(y) = q(y)·[p(y) > bar] + (Σ_{x: p(x) <= bar} q(x))·[y = argmax p], "
            "bar = min(posterior_threshold, posterior_alpha · exp(−H(p)))")


def _random_cases(generator, count):
    for index in range(count):
        vocab = int(torch.randint(2, 9, (), generator=generator))
        sharpness = [0.3, 1.0, 3.0][index % 3]  # flat, middling and peaked targets
        logits = torch.randn(vocab, generator=generator, dtype=torch.float64) * sharpness
        p = torch.softmax(logits, 0)
        q = torch.empty(vocab, dtype=torch.float64).exponential_(generator=generator)
        threshold = float(torch.empty(()).uniform_(0.05, 0.5, generator=generator))
        alpha = float(torch.empty(()).uniform_(0.1, 1.0, generator=generator))
        yield p, q / q.sum(), threshold, alpha


def check_typical_law(typical_law, seed: int = 0, num_random: int = 60) -> None:
    generator = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor(p, dtype=torch.float64), torch.tensor(q, dtype=torch.float64), t, a)
             for p, q, t, a in HAND_CASES] + list(_random_cases(generator, num_random))

    def given(index):
        p, q, threshold, alpha = cases[index]
        return (f"p = {show(p)}, q = {show(q)}, posterior_threshold = {threshold:.4g}, "
                f"posterior_alpha = {alpha:.4g}")
    answers = call_each(typical_law, cases, given=given, name=NAME)
    for index, ((p, q, threshold, alpha), got) in enumerate(zip(cases, answers)):
        expected = library_law(p, q, threshold, alpha)
        try:
            got = torch.as_tensor(got, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError):
            raise failure(NAME, given=given(index), got=repr(got)[:200],
                          hint="return the law as a [V] tensor (or a list of V floats)") from None
        if got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-6):
            raise failure(NAME, given=given(index), expected=show(expected), got=show(got),
                          hint=_hint(p, q, threshold, alpha, got) if got.shape == expected.shape
                          else f"the law has one entry per token: {expected.numel()}")
    passed(NAME, len(cases))


# The law worked out by hand: peaked enough that the entropy's bar, not the threshold, decides.
PREDICT_P = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
PREDICT_Q = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
PREDICT_THRESHOLD, PREDICT_ALPHA = 0.2, 0.3


def check_law_prediction(predicted_law, reveal: bool = False) -> None:
    """The form (4 probabilities summing to 1) always; with `reveal` (the hidden test) the law
    itself, to ±0.01 (arithmetic by hand)."""
    name = "predicted_law"
    given = (f"p = {show(PREDICT_P)}, q = {show(PREDICT_Q)}, posterior_threshold = "
             f"{PREDICT_THRESHOLD}, posterior_alpha = {PREDICT_ALPHA}")
    if predicted_law is None:
        raise failure(name, given=given, got="None", hint=f"{name} is still None: set it above")
    try:
        law = torch.as_tensor(predicted_law, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        law = None
    if law is None or law.numel() != 4 or abs(float(law.sum()) - 1) > 0.02 or (law < 0).any():
        raise failure(name, given=given, got=repr(predicted_law)[:200],
                      hint="four probabilities, one per token, that sum to 1")
    if not reveal:
        print(f"✓ {name} has the form of an answer; whether it is right is graded after you "
              f"hand in")
        return
    expected = library_law(PREDICT_P, PREDICT_Q, PREDICT_THRESHOLD, PREDICT_ALPHA)
    if (law - expected).abs().max() > 0.01:
        raise failure(name, given=given, got=show(law, 3),
                      hint=_hint(PREDICT_P, PREDICT_Q, PREDICT_THRESHOLD, PREDICT_ALPHA, law,
                                 atol=0.01))
    passed(name, 1)


__all__ = ["check_law_prediction", "check_typical_law"]
