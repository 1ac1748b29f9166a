"""The core of specnb: one idea per module (caches, verify, sampler, n-gram lookup, one Jacobi
step, typical acceptance, argument checks, a forward's latency).

What goes here: functions and small classes that every layer above may use. What does not: a
generation loop (`specnb.methods`), a drafter (`specnb.drafters`), loading a model
(`specnb.models`), drawing (`specnb.viz`). Core imports nothing of specnb but theory and stats.
"""

from .batch_kv import BatchedCachedLM
from .jacobi import JacobiStep, count_converged, jacobi_step
from .kv import CachedLM, common_prefix_len
from .timed import crop_cache
from .ngram import NgramDraft, ngram_lookup
from .sampler import check_temperature, draw, logits_to_probs, sample
from .typical import typical_threshold, typical_verify
from .verify import Verdict, accept_probability, acceptance_overlap, residual_distribution, \
    verify

__all__ = [
    "BatchedCachedLM", "CachedLM", "JacobiStep", "NgramDraft", "Verdict", "accept_probability",
    "acceptance_overlap",
    "check_temperature", "common_prefix_len", "count_converged", "crop_cache", "draw",
    "jacobi_step", "logits_to_probs", "ngram_lookup", "residual_distribution", "sample",
    "typical_threshold", "typical_verify", "verify",
]
