"""The four decoding methods, each one call returning tokens, stats and a per-iteration trace."""

from .autoregressive import autoregressive
from .common import DraftedToken, EmittedToken, GenerationResult, Iteration, Stats
from .jacobi import jacobi
from .prompt_lookup import prompt_lookup
from .speculative import speculative

__all__ = ["DraftedToken", "EmittedToken", "GenerationResult", "Iteration", "Stats",
           "autoregressive", "jacobi", "prompt_lookup", "speculative"]
