"""specnb.course.broken_samplers: the rule that keeps checking drafts after a rejection, and its catch.

By hand: where every coin is certain, the broken rule and `verify` differ exactly as described.
Through the loop (tiny random models, a few thousand rows of one prompt in one batch): the first
emitted token of the broken loop still has the target's law (a one-token test passes it), while
the joint law of the first two tokens, enumerated exactly, rejects it. The power of that test is
computed, not hoped for: the broken joint law has a closed form (below), so the χ² noncentrality
λ = N Σ (broken − exact)² / exact is known before sampling, and the test asserts it is large.
"""

import pytest
import torch
from scipy.stats import chi2, ncx2

import specnb
from specnb.course.broken_samplers import loop_verifies_with, verify_keeps_checking
from specnb.core import verify
from specnb.stats import chi2_pvalue
from tiny_models import tiny_llama

VOCAB, ROWS, P_MIN, GAMMA = 6, 6000, 1e-3, 4
PROMPT = [1, 4, 2, 1, 4]


def test_by_hand_the_broken_rule_goes_on_after_a_rejection():
    # γ = 3, V = 3. Position 1: p puts 0 on the draft 0 (certain rejection, residual = token 1).
    # Positions 2 and 3: p = q (certain acceptance).
    p = torch.tensor([[[0.0, 1.0, 0.0], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]])
    q = torch.tensor([[[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]])
    drafts, bonus = torch.tensor([[0, 2, 0]]), torch.tensor([[1]])
    exact = verify(p, q, drafts, bonus, generator=torch.Generator().manual_seed(0))
    broken = verify_keeps_checking(p, q, drafts, bonus, generator=torch.Generator().manual_seed(0))
    assert exact.tokens.tolist() == [[1, -1, -1, -1]] and exact.num_accepted.tolist() == [0]
    assert broken.tokens.tolist() == [[1, 2, 0, 1]] and broken.num_accepted.tolist() == [3]


@pytest.mark.parametrize("case", ["all accepted", "last rejected", "short row", "no drafts"])
def test_by_hand_bonus_and_counts(case):
    one = torch.tensor([0.0, 1.0])  # certain: accepts draft 1, rejects draft 0 (residual 1)
    p = one.expand(1, 2, 2).clone()
    q = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])  # position 2: draft 0 has p = 0 -> rejected
    bonus = torch.tensor([[0]])
    if case == "all accepted":
        tokens, count = verify_keeps_checking(p, p, torch.tensor([[1, 1]]), bonus), [[1, 1, 0]]
        assert tokens.num_accepted.tolist() == [2]
    elif case == "last rejected":
        tokens, count = verify_keeps_checking(p, q, torch.tensor([[1, 0]]), bonus), [[1, 1, -1]]
        assert tokens.num_accepted.tolist() == [1]  # the loop's next token is the residual draw
    elif case == "short row":  # one real draft, then padding: the bonus follows the real draft
        tokens = verify_keeps_checking(p, q, torch.tensor([[1, 0]]), bonus,
                                       num_drafts=torch.tensor([1]))
        count = [[1, 0, -1]]
        assert tokens.num_accepted.tolist() == [1]
    else:
        tokens = verify_keeps_checking(p[:, :0], q[:, :0], torch.zeros(1, 0, dtype=torch.long),
                                       bonus)
        count = [[0]]
        assert tokens.num_accepted.tolist() == [0]
    assert tokens.tokens.tolist() == count


@pytest.fixture(scope="module")
def pair():
    target = tiny_llama(11, vocab=VOCAB, std=0.5)
    draft = tiny_llama(13, vocab=VOCAB, std=0.3, hidden=16, layers=1)
    return target, draft


def next_probs(model, prefixes):
    with torch.no_grad():
        return torch.softmax(model(torch.tensor(prefixes)).logits[:, -1].double(), -1)  # [R, V]


def exact_and_broken_joint(pair):
    """[V²] laws of (t1, t2), flattened as t1·V + t2: the target's, and the broken loop's.

    Broken: a kept first draft a is followed by p(· | a) as it should be; a rejected first draft
    x is replaced by a residual draw a, but the second token still follows p(· | x), so
    broken(a, b) = min(p1, q1)(a) p(b | a) + (p1 − q1)+(a) Σ_x (q1 − p1)+(x) p(b | x) / Σ (q1 − p1)+.
    """
    target, draft = pair
    p1, q1 = next_probs(target, [PROMPT])[0], next_probs(draft, [PROMPT])[0]  # [V]
    p2 = next_probs(target, [PROMPT + [t] for t in range(VOCAB)])  # [V, V]: p(b | a)
    exact = p1[:, None] * p2
    over = (q1 - p1).clamp_min(0)  # the drafts that are sometimes rejected
    after_rejection = (over[:, None] * p2).sum(0) / over.sum()  # [V]
    broken = torch.minimum(p1, q1)[:, None] * p2 + (p1 - q1).clamp_min(0)[:, None] * after_rejection
    return exact.flatten(), broken.flatten(), p1


def first_two(pair, rule):
    target, draft = pair
    generator = torch.Generator().manual_seed(7)
    with loop_verifies_with(rule):
        result = specnb.speculative(target, draft, [PROMPT] * ROWS, gamma=GAMMA,
                                    max_new_tokens=GAMMA + 1, temperature=1.0, generator=generator)
    tokens = torch.tensor([row[:2] for row in result.tokens])  # [ROWS, 2]
    return tokens[:, 0], tokens[:, 0] * VOCAB + tokens[:, 1]


def test_the_test_has_power_against_the_broken_loop(pair):
    exact, broken, _ = exact_and_broken_joint(pair)
    assert torch.isclose(broken.sum(), torch.tensor(1.0, dtype=torch.double))
    noncentrality = ROWS * float(((broken - exact) ** 2 / exact).sum())
    dof = VOCAB ** 2 - 1
    power = ncx2.sf(chi2.isf(P_MIN, dof), dof, noncentrality)
    assert power > 0.999, (noncentrality, power)


def test_the_joint_test_passes_verify_and_rejects_keeps_checking(pair):
    exact, _, p1 = exact_and_broken_joint(pair)
    first, codes = first_two(pair, verify)
    assert chi2_pvalue(codes, exact) > P_MIN
    first, codes = first_two(pair, verify_keeps_checking)
    assert chi2_pvalue(first, p1) > P_MIN, "the broken loop's first token still has law p"
    assert chi2_pvalue(codes, exact) < P_MIN, "the pair of the first two tokens does not"


def test_the_loop_gets_its_verify_back():
    loop = __import__("importlib").import_module("specnb.methods.speculative")
    with loop_verifies_with(verify_keeps_checking):
        assert loop.verify is verify_keeps_checking
    assert loop.verify is verify
