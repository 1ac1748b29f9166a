"""A KV cache that lets code think in whole sequences: `CachedLM`, one row of `BatchedCachedLM`.

Each call gets the *full* token sequence; the wrapper keeps the keys/values of the longest
prefix it already holds, rolls back the rest (this is how rejected draft tokens go), runs only
the new tokens in one forward and returns the logits of the last `keep` positions. There is one
cache mechanism in specnb (`specnb.core.batch_kv`); this is its single-sequence face, used by
Jacobi decoding and the latency measurements.

Example: cached [5, 6, 7, 8], asked for [5, 6, 9] with keep=1 -> roll back 7, 8; run [9].
"""

import torch

from .args import check_in_vocab, check_int, token_ids
from .batch_kv import BatchedCachedLM


def common_prefix_len(a, b) -> int:
    """Length of the longest common prefix: ([1, 2, 3], [1, 2, 4, 5]) -> 2."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class CachedLM(BatchedCachedLM):
    """A causal LM plus its KV cache for one growing (and sometimes shrinking) sequence."""

    def __init__(self, model):
        super().__init__(model)
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self.reset()

    def reset(self) -> None:
        """Forget the cache and the counters."""
        super().__init__(self.model, self.pad_token_id)
        self.cached_ids: list[int] = []

    @torch.inference_mode()
    def logits(self, sequence, keep: int = 1) -> torch.Tensor:
        """Logits `[1, keep, V]` predicting the token after each of the last `keep` positions."""
        sequence = token_ids("sequence", sequence)
        check_in_vocab("sequence", sequence, self.vocab_size)
        length = len(sequence)
        keep = check_int("keep", keep, 1)
        if keep > length:
            raise ValueError(f"keep must be in [1, len(sequence)={length}], got {keep}")
        if self.max_positions is not None and length > self.max_positions:
            raise ValueError(
                f"sequence of {length} tokens exceeds the model's context of {self.max_positions}"
            )
        # Reuse the common prefix, but re-run at least `keep` tokens: their logits are not stored.
        reuse = min(common_prefix_len(self.cached_ids, sequence), length - keep)
        if len(self.cached_ids) > reuse:
            drop = len(self.cached_ids) - reuse
            self.rollback(torch.tensor([drop], device=self.device), crop=True, counts=[drop])  # one row: keep the cache exactly its ids
        new_ids = torch.tensor([sequence[reuse:]], dtype=torch.long, device=self.device)
        logits = self.forward(new_ids, keep=keep)
        self.cached_ids = sequence
        return logits[:, -keep:, :]
