"""Notebook 04's two-token law test, as a function any sampler can be put through.

The first two tokens a sampler emits after a prompt should follow the target's joint law
p(t1) p(t2 | t1). The vocabulary is too large to count every pair, so the pairs are bucketed:
t1 among the target's `k_first` most likely first tokens and t2 among the `k_second` most likely
after it (k_first · k_second cells), any other t2 after such a t1 (k_first cells), or any other
t1 (one cell). The exact law of those cells takes 1 + k_first target forwards; a χ² test
(`specnb.stats.chi2_goodness_of_fit`, cells expecting fewer than 5 counts pooled) compares a
sampler's counts with it. One token at a time is not enough: a loop that keeps checking drafts
after a rejection emits the right first token and the wrong second one (notebook 04 §5).

Example (notebook 05 §1): law = exact_pair_law(target, input_ids); tokens = [two tokens of each
of 250 runs]; pair_pvalue(law, tokens) > 1e-3 for an exact sampler.
"""

from dataclasses import dataclass

import torch

from ..core.sampler import logits_to_probs
from ..stats import chi2_goodness_of_fit


@dataclass
class PairLaw:
    probs: torch.Tensor  # [k_first · (k_second + 1) + 1] float64, the cells' exact law
    top_first: torch.Tensor  # [k_first] the target's most likely first tokens
    top_second: torch.Tensor  # [k_first, k_second] the most likely second tokens after each
    first_probs: torch.Tensor  # [V] float32, p(t1): the target's next-token law


@torch.no_grad()
def exact_pair_law(target, input_ids, temperature: float = 1.0, k_first: int = 6,
                   k_second: int = 4) -> PairLaw:
    """The exact law of the pair cells after the prompt `input_ids` ([1, L]) at `temperature`."""
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must be one prompt, [1, L]; got shape {tuple(input_ids.shape)}")
    if not (isinstance(k_first, int) and isinstance(k_second, int) and k_first >= 1
            and k_second >= 1):
        raise ValueError(f"k_first and k_second must be ints >= 1, got {k_first!r}, {k_second!r}")
    first = logits_to_probs(target(input_ids).logits[:, -1], temperature)[0]  # [V]
    top_first = torch.topk(first, k_first).indices  # [K1]
    after = torch.cat([input_ids.expand(k_first, -1), top_first.view(-1, 1)], 1)  # [K1, L+1]
    second = logits_to_probs(target(after).logits[:, -1], temperature).double()  # [K1, V]
    top_second = torch.topk(second, k_second, dim=-1).indices  # [K1, K2]
    p_first, p_second = first.double()[top_first], second.gather(1, top_second)
    probs = torch.cat([
        torch.cat([p_first[:, None] * p_second,
                   (p_first * (1 - p_second.sum(1)))[:, None]], 1).flatten(),
        (1 - p_first.sum()).view(1)])
    return PairLaw(probs.cpu(), top_first.cpu(), top_second.cpu(), first.cpu())


def pair_cells(law: PairLaw, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """[R] first and second tokens -> [R] cells: i·(K2+1) + j when the first token is the i-th
    of `law.top_first` and the second the j-th of `law.top_second[i]` (j = K2: any other),
    K1·(K2+1) for any other first token."""
    k_first, k_second = law.top_second.shape
    cells = torch.full_like(first, k_first * (k_second + 1))
    for i, token in enumerate(law.top_first):
        matches = second.unsqueeze(1) == law.top_second[i]  # [R, K2]
        j = torch.where(matches.any(1), matches.long().argmax(1), k_second)
        cells = torch.where(first == token, i * (k_second + 1) + j, cells)
    return cells


def pair_pvalue(law: PairLaw, tokens) -> float:
    """χ² p-value of the first two tokens of each run (`tokens`: R sequences of >= 2 ids)
    against the exact cell law."""
    tokens = [list(t) for t in tokens]
    if not tokens or any(len(t) < 2 for t in tokens):
        raise ValueError("pair_pvalue needs at least one run, each with two tokens or more")
    pairs = torch.tensor([t[:2] for t in tokens])  # [R, 2]
    cells = pair_cells(law, pairs[:, 0], pairs[:, 1])
    counts = torch.bincount(cells, minlength=len(law.probs))
    return float(chi2_goodness_of_fit(counts.numpy(), law.probs.numpy())[1])
