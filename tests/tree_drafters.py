"""Tree-proposing drafters for the loop's tests (no cache: tiny models, whole contexts).

`TopKTree(model, k, depth)`: the draft's top-k at depth 1, then the greedy chain below each of
them (k·depth nodes); deterministic candidates (`probs` None), so any rule that is exact for
point masses is exact here. `SampledSiblings(model, k)`: k children of the pending token drawn
independently from the draft's law at T (SpecInfer's multi-round case), with their q.
"""

import torch

from specnb.core.sampler import logits_to_probs, sample
from specnb.drafters import Drafter, Proposal


class _Contexts(Drafter):
    """Keeps each row's whole sequence on the host (prompts, then what each row emitted)."""

    def __init__(self, model):
        self.model = model

    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.contexts = [list(p) for p in prompts]

    def update(self, step) -> None:
        for context, emitted in zip(self.contexts, step.emitted):
            context.extend(emitted)

    def select_rows(self, keep) -> None:
        self.contexts = [self.contexts[i] for i in keep.tolist()]

    @torch.no_grad()
    def logits(self, sequences) -> torch.Tensor:
        width = max(map(len, sequences))
        ids = torch.zeros(len(sequences), width, dtype=torch.long)
        mask = torch.zeros(len(sequences), width, dtype=torch.long)
        for i, s in enumerate(sequences):  # left padding: the last column is every row's last
            ids[i, width - len(s):], mask[i, width - len(s):] = torch.tensor(s), 1
        positions = (mask.cumsum(1) - 1).clamp_min(0)
        return self.model(ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()


class TopKTree(_Contexts):
    def __init__(self, model, k: int, depth: int):
        super().__init__(model)
        self.k, self.depth = k, depth

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows = len(self.contexts)
        depth = min(self.depth, max(0, width))
        if depth == 0:
            empty = torch.zeros(rows, 0, dtype=torch.long)
            return Proposal(empty, torch.zeros(rows, dtype=torch.long), parents=empty)
        firsts = self.logits(self.contexts).topk(self.k, -1).indices  # [A, k]
        tokens, parents = [], []
        for branch in range(self.k):
            chain = [firsts[:, branch]]
            for _ in range(depth - 1):
                sequences = [c + [int(t[i]) for t in chain] for i, c in enumerate(self.contexts)]
                chain.append(self.logits(sequences).argmax(-1))
            for level, token in enumerate(chain):
                tokens.append(token)
                parents.append(-1 if level == 0 else len(tokens) - 2)
        token_ids = torch.stack(tokens, 1)
        parents = torch.tensor(parents).expand(rows, -1).clone()
        # A row whose budget allows fewer levels keeps the first ones of the first branch only.
        num_drafts = torch.where(max_drafts >= depth, token_ids.shape[1], max_drafts.clamp(max=1))
        return Proposal(token_ids, num_drafts, parents=parents)


class SampledSiblings(_Contexts):
    def __init__(self, model, k: int):
        super().__init__(model)
        self.k = k

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        rows = len(self.contexts)
        if width == 0:
            empty = torch.zeros(rows, 0, dtype=torch.long)
            return Proposal(empty, torch.zeros(rows, dtype=torch.long), parents=empty)
        q = logits_to_probs(self.logits(self.contexts), temperature)  # [A, V]
        tokens = torch.stack([sample(q, generator=generator) for _ in range(self.k)], 1)
        parents = torch.full((rows, self.k), -1, dtype=torch.long)
        num_drafts = torch.full((rows,), self.k, dtype=torch.long)
        return Proposal(tokens, num_drafts, q.unsqueeze(1).expand(-1, self.k, -1), parents=parents)
