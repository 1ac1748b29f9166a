"""The decoding methods, each one call returning tokens, stats and a per-row trace.

`speculative`, `prompt_lookup`, `lookahead` and `autoregressive` are one loop
(`speculative.speculate`) with different drafters; `jacobi` has its own fixed-point loop. `schedules` holds the γ schedules
(`gamma="heuristic"`, `CostAwareGamma`); `calibrate` prices a `CostAwareGamma` by running the loop.

What goes here: the loops and their bookkeeping (results, input checks, γ schedules), built on
`specnb.core` and `specnb.drafters`. What does not: loading models (`specnb.models`), timing
them against each other (`specnb.bench`), drawing (`specnb.viz`).
"""

from .autoregressive import autoregressive
from .calibrate import cost_aware_in_loop
from .jacobi import jacobi
from .lookahead import lookahead
from .prompt_lookup import prompt_lookup
from .results import DraftedToken, EmittedToken, GenerationResult, Iteration, Stats
from .schedules import CostAwareGamma, FixedGamma, GammaSchedule, HeuristicGamma
from .speculative import speculate, speculative

__all__ = ["CostAwareGamma", "DraftedToken", "EmittedToken", "FixedGamma", "GammaSchedule",
           "GenerationResult", "HeuristicGamma", "Iteration", "Stats", "autoregressive",
           "cost_aware_in_loop", "jacobi", "lookahead", "prompt_lookup", "speculate", "speculative"]
