"""A KV-cache wrapper that lets decoding loops think in whole sequences.

`CachedLM` wraps any `transformers` causal LM for one sequence (batch of one). Each call gets
the *full* token sequence; the wrapper keeps the keys/values of the longest prefix it already
holds, crops the rest (this is how rejected draft tokens are rolled back), runs only the new
tokens in one forward and returns the logits of the last `keep` positions. It counts forwards
and times each one (synchronizing on GPU so the clock measures the work, not the launch).

It deliberately does not sample, pad or batch rows of different lengths.

Example: cached [5, 6, 7, 8], asked for [5, 6, 9] with keep=1 -> crop to [5, 6], run [9].
"""

import inspect
import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache


def common_prefix_len(a, b) -> int:
    """Length of the longest common prefix: ([1, 2, 3], [1, 2, 4, 5]) -> 2."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def crop_cache(cache, num_tokens_to_remove: int) -> None:
    """Drop the last `num_tokens_to_remove` positions from a `DynamicCache`.

    `DynamicCache.crop` changed meaning within transformers 5.x: older releases read a positive
    argument as the length to keep, newer ones refuse it and take a negative count to remove.
    A negative count means "remove that many" in both, so that is all we ever pass (and never 0,
    which older releases read as "keep nothing").
    """
    if num_tokens_to_remove < 0:
        raise ValueError(f"num_tokens_to_remove must be >= 0, got {num_tokens_to_remove}")
    if num_tokens_to_remove > 0:
        cache.crop(-num_tokens_to_remove)


@dataclass
class ForwardLog:
    """What one forward cost: how many tokens it processed and how long it took."""

    num_tokens: list = field(default_factory=list)
    seconds: list = field(default_factory=list)


class TimedModel:
    """What the cache wrappers share: the model, its keyword names, and the log of forwards."""

    def __init__(self, model):
        self.model = model.eval()
        self.device = next(model.parameters()).device
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        params = inspect.signature(model.forward).parameters
        # transformers 5.24 renamed `past_key_values` to `cache`; accept either release.
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        self._can_keep = "logits_to_keep" in params
        self.log = ForwardLog()

    @property
    def num_forwards(self) -> int:
        return len(self.log.seconds)

    @property
    def forward_seconds(self) -> float:
        return sum(self.log.seconds)

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


class CachedLM(TimedModel):
    """A causal LM plus its KV cache for one growing (and sometimes shrinking) sequence."""

    def __init__(self, model):
        super().__init__(model)
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self.reset()

    def reset(self) -> None:
        """Forget the cache and the counters."""
        self.cache = DynamicCache()
        self.cached_ids: list[int] = []
        self.log = ForwardLog()

    @torch.inference_mode()
    def logits(self, sequence, keep: int = 1) -> torch.Tensor:
        """Logits `[1, keep, V]` predicting the token after each of the last `keep` positions."""
        sequence = [int(t) for t in sequence]
        length = len(sequence)
        if not 1 <= keep <= length:
            raise ValueError(f"keep must be in [1, len(sequence)={length}], got {keep}")
        if self.max_positions is not None and length > self.max_positions:
            raise ValueError(
                f"sequence of {length} tokens exceeds the model's context of {self.max_positions}"
            )
        # Reuse the common prefix, but re-run at least `keep` tokens: their logits are not stored.
        reuse = min(common_prefix_len(self.cached_ids, sequence), length - keep)
        crop_cache(self.cache, len(self.cached_ids) - reuse)
        new_ids = torch.tensor([sequence[reuse:]], dtype=torch.long, device=self.device)
        positions = torch.arange(reuse, length, device=self.device).unsqueeze(0)
        kwargs = {self._cache_kwarg: self.cache, "use_cache": True, "position_ids": positions}
        if self._can_keep:
            kwargs["logits_to_keep"] = keep

        self._synchronize()
        start = time.perf_counter()
        out = self.model(input_ids=new_ids, **kwargs)
        self._synchronize()
        self.log.seconds.append(time.perf_counter() - start)
        self.log.num_tokens.append(length - reuse)

        self.cached_ids = sequence
        return out.logits[:, -keep:, :]
