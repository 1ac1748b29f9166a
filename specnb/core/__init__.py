"""The core of specnb: one idea per module (caches, verify, sampler, n-gram lookup, one Jacobi
step, typical acceptance, argument checks, a forward's latency).

What goes here: functions and small classes that every layer above may use. What does not: a
generation loop (`specnb.methods`), a drafter (`specnb.drafters`), loading a model
(`specnb.models`), drawing (`specnb.viz`). Core imports nothing of specnb but theory and stats.
"""

from .._lazy import lazy_attributes
# `verify` is a submodule's name and its function's: imported here, so that the package's
# `verify` is the function however the submodule is reached first.
from .verify import Verdict, accept_probability, acceptance_overlap, residual_distribution, \
    verify

# The rest imports on first use (specnb/_lazy.py): the checks of an exercise that needs only
# `verify` do not wait for transformers, which the caches import.
__getattr__, __dir__ = lazy_attributes(__name__, globals(), {
    "BatchedCachedLM": ".batch_kv",
    **dict.fromkeys(["JacobiStep", "count_converged", "jacobi_step"], ".jacobi"),
    **dict.fromkeys(["CachedLM", "common_prefix_len"], ".kv"),
    "crop_cache": ".timed",
    **dict.fromkeys(["NgramDraft", "ngram_lookup"], ".ngram"),
    **dict.fromkeys(["check_temperature", "draw", "logits_to_probs", "sample"], ".sampler"),
    **dict.fromkeys(["typical_law", "typical_threshold", "typical_verify"], ".typical"),
})

__all__ = [
    "BatchedCachedLM", "CachedLM", "JacobiStep", "NgramDraft", "Verdict", "accept_probability",
    "acceptance_overlap",
    "check_temperature", "common_prefix_len", "count_converged", "crop_cache", "draw",
    "jacobi_step", "logits_to_probs", "ngram_lookup", "residual_distribution", "sample",
    "typical_law", "typical_threshold", "typical_verify", "verify",
]
