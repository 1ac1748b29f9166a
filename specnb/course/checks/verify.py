"""Checks for exercise 2: batched `verify` over `[B, γ, V]`, with −1 padding and the bonus token.

The student's `verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, generator)`
must return what `specnb.core.verify` returns: `[B, γ+1]` int64, per row the accepted drafts,
then one token (resampled from the residual, or the bonus after γ acceptances), then −1.

Three kinds of cases. Deterministic ones (one-hot p and q, p = q, q = 0 at the draft, γ = 0)
have a single right answer, compared with the library exactly. Random rows are checked for the
layout and for facts that hold whatever the coins (a rejection emits a token with p > q). A
large batch is checked in law: at every column reached, the token follows p (χ²) and the draft
passes with probability Σ min(p, q).
"""

import torch
import torch.nn.functional as F

from ...core import acceptance_overlap, verify as library_verify
from ...stats import SIGNIFICANCE, binomial_tolerance, chi2_pvalue, empirical_law
from .report import call, closest_mistake, failure, \
    passed, show

NAME = "verify"


def _run(verify, target, draft, ids, bonus, generator, given):
    got = call(verify, target.clone(), draft.clone(), ids.clone(), bonus.clone(), generator,
               given=given, name=NAME)
    batch, gamma = ids.shape
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (batch, gamma + 1):
        shape = list(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        raise failure(NAME, given=given, expected=f"a tensor of shape [B, γ+1] = "
                      f"{[batch, gamma + 1]}", got=shape,
                      hint="one row per sequence and γ+1 columns: drafts, one more token, −1s")
    if got.dtype != torch.int64:
        raise failure(NAME, given=given, expected="dtype torch.int64", got=str(got.dtype),
                      hint="token ids are int64 (torch.long), like draft_token_ids")
    return got


def _row_hint(expected: list, got: list, bonus: int) -> str:
    if expected[-1] == bonus and got[-1] != bonus and expected[:-1] == got[:-1]:
        return ("every draft was accepted, so the row must end with the bonus token "
                "(bonus_token_ids[b]) in column γ: did you forget the bonus?")
    for e, g in zip(expected, got):
        if e == -1 and g != -1:
            return ("after the first rejection every later column is −1: stop at the first "
                    "rejected draft (later drafts are never looked at)")
        if e != -1 and g == -1:
            return ("at the first rejection emit one token drawn from the residual before the "
                    "−1 padding (and the bonus after γ acceptances)")
    return "accept x_j with probability min(1, p_j(x_j)/q_j(x_j)); on rejection sample the residual"


def _deterministic_cases():
    """(label, p, q, drafts, bonus): cases whose output does not depend on the coins."""
    vocab = 5
    argmax = torch.tensor([[1, 2], [1, 2], [1, 2], [1, 2]])
    drafts = torch.tensor([[1, 2], [1, 3], [0, 2], [4, 4]])
    yield ("one-hot p and q (greedy)", F.one_hot(argmax, vocab).float(),
           F.one_hot(drafts, vocab).float(), drafts, torch.full((4, 1), 3))
    p = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0]).expand(3, 3, vocab).contiguous()
    yield ("p = q (every draft accepted)", p, p.clone(),
           torch.tensor([[0, 1, 0], [1, 1, 1], [0, 0, 1]]), torch.tensor([[4], [2], [0]]))
    yield ("q = 0 < p at the drafted token (accepted)",
           torch.tensor([0.25, 0.25, 0.25, 0.25]).expand(2, 1, 4).contiguous(),
           torch.tensor([0.0, 1 / 3, 1 / 3, 1 / 3]).expand(2, 1, 4).contiguous(),
           torch.zeros(2, 1, dtype=torch.long), torch.tensor([[2], [3]]))
    yield ("γ = 0 (no drafts: just the bonus)", torch.empty(3, 0, vocab),
           torch.empty(3, 0, vocab), torch.empty(3, 0, dtype=torch.long),
           torch.tensor([[4], [0], [2]]))


def _dirichlet(shape, generator):
    e = torch.empty(*shape, dtype=torch.float64).exponential_(generator=generator)
    return (e / e.sum(-1, keepdim=True)).float()


def _check_layout(got, p, q, ids, bonus, given):
    """Facts that hold for every coin: prefix of drafts, one token, then −1; residual support."""
    batch, gamma = ids.shape
    for b in range(batch):
        row = got[b].tolist()
        n = 0
        while n < gamma and row[n] == int(ids[b, n]):
            n += 1
        where = f"{given}; row {b}: drafts {ids[b].tolist()}, bonus {int(bonus[b])}"
        if any(t != -1 for t in row[n + 1:]):
            raise failure(NAME, given=where, got=row,
                          hint=f"column {n} ends the row (first rejection or bonus), so every "
                               f"later column must be −1; stop at the first rejection")
        token = row[n]
        if n == gamma and token != int(bonus[b]):
            raise failure(NAME, given=where, got=row, expected=f"column {gamma} = bonus "
                          f"{int(bonus[b])}", hint="all γ drafts were accepted: append the bonus "
                          "token; did you forget the bonus?")
        if n < gamma:
            if token == -1:
                raise failure(NAME, given=where, got=row, hint=(
                    f"column {n} is −1 but should hold the token drawn after rejecting draft "
                    f"{n}" + (f"; or, if you rejected draft {n - 1} and drew the same token "
                              f"again, you did not sample the residual (p − q)+, which is 0 at "
                              f"a rejected draft" if n else "")))
            if not 0 <= token < p.shape[-1] or p[b, n, token] <= q[b, n, token]:
                raise failure(NAME, given=where, got=row, hint=(
                    f"column {n} holds {token} after a rejection, but p({token}) <= q({token}) "
                    f"there, so the residual (p − q)+ gives it probability 0: sample the "
                    f"replacement from (p − q)+ normalized, not from p or q"))
        if n > 0 and (p[b, torch.arange(n), ids[b, :n]] == 0).any():
            raise failure(NAME, given=where, got=row,
                          hint="a draft with p(x) = 0 was accepted: its accept probability "
                               "min(1, p/q) is 0")


def check_verify(verify, seed: int = 0, batch: int = 20_000) -> None:
    generator = torch.Generator().manual_seed(seed)
    num_cases = 0
    for label, p, q, ids, bonus in _deterministic_cases():
        given = f"{label}: drafts {ids.tolist()}, bonus {bonus.flatten().tolist()}"
        expected = library_verify(p, q, ids, bonus, generator=torch.Generator().manual_seed(0)).tokens
        got = _run(verify, p, q, ids, bonus, generator, given)
        for b in range(ids.shape[0]):
            if got[b].tolist() != expected[b].tolist():
                raise failure(NAME, given=f"{given}, row {b}", expected=expected[b].tolist(),
                              got=got[b].tolist(), hint=_row_hint(expected[b].tolist(),
                                                                  got[b].tolist(), int(bonus[b])))
            num_cases += 1

    for _ in range(10):  # random rows: layout and residual support, whatever the coins
        rows, gamma, vocab = 8, int(torch.randint(1, 5, (), generator=generator)), 6
        p, q = _dirichlet((rows, gamma, vocab), generator), _dirichlet((rows, gamma, vocab), generator)
        ids = torch.multinomial(q.view(-1, vocab), 1, generator=generator).view(rows, gamma)
        bonus = torch.randint(0, vocab, (rows, 1), generator=generator)
        got = _run(verify, p, q, ids, bonus, generator, f"random p, q of shape {[rows, gamma, vocab]}")
        _check_layout(got, p, q, ids, bonus, f"random p, q of shape {[rows, gamma, vocab]}")
        num_cases += rows

    # In law: one big batch, the same p_j and q_j in every row, drafts x_j ~ q_j.
    p = torch.tensor([[0.30, 0.25, 0.20, 0.15, 0.10, 0.00],
                      [0.10, 0.10, 0.40, 0.20, 0.20, 0.00],
                      [0.50, 0.20, 0.10, 0.10, 0.05, 0.05]])
    q = torch.tensor([[0.05, 0.00, 0.40, 0.15, 0.20, 0.20],
                      [0.30, 0.10, 0.20, 0.20, 0.10, 0.10],
                      [0.10, 0.30, 0.30, 0.10, 0.10, 0.10]])
    gamma, vocab = p.shape
    ids = torch.stack([torch.multinomial(q[j], batch, replacement=True, generator=generator)
                       for j in range(gamma)], dim=1)  # [B, γ]
    bonus = torch.full((batch, 1), vocab - 1)
    given = f"{batch} rows sharing p_j = {show(p)}, q_j = {show(q)}, drafts x_j ~ q_j"
    got = _run(verify, p.expand(batch, gamma, vocab), q.expand(batch, gamma, vocab), ids, bonus,
               generator, given)
    _check_layout(got[:200], p.expand(200, gamma, vocab), q.expand(200, gamma, vocab), ids[:200],
                  bonus[:200], given)
    accepted = (got[:, :gamma] == ids).long().cumprod(dim=1).sum(dim=1)  # [B]
    for j in range(gamma):
        reached = accepted >= j
        if not reached.any():  # no row got this far: nothing to test at this column
            continue
        tokens = got[reached, j]
        overlap = float(acceptance_overlap(p[j], q[j]))
        pvalue = chi2_pvalue(tokens, p[j])
        if pvalue < SIGNIFICANCE:
            law, rest = torch.from_numpy(empirical_law(tokens, vocab)), 1.0 - overlap
            mistakes = {"p": (torch.minimum(p[j], q[j]) + rest * p[j], "looks like resampling "
                              "from p after a rejection: sample from (p − q)+ normalized"),
                        "q": (q[j], "looks like the draft's law q: are drafts kept without the "
                              "coin u < min(1, p/q)?")}
            raise failure(NAME, given=given, expected=f"column {j} (rows that reached it) "
                          f"distributed as p_{j} = {show(p[j])}",
                          got=f"{show(law.float())} (χ² p-value {pvalue:.2g})",
                          hint=closest_mistake(law, p[j], mistakes) or
                          "accept with min(1, p/q), on rejection draw from the residual")
        rate = (accepted[reached] > j).double().mean().item()
        if abs(rate - overlap) > binomial_tolerance(overlap, int(reached.sum())):
            raise failure(NAME, given=given, expected=f"draft {j} accepted in {overlap:.4f} of "
                          f"the rows that reached it (Σ min(p, q))", got=f"{rate:.4f}",
                          hint="one uniform per draft from `generator`; accept iff u < "
                               "min(1, p(x)/q(x))")
    passed(NAME, num_cases + batch, "χ² per column")
