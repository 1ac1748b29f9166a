"""specnb: speculative and parallel decoding of language models, taught executably.

    import specnb
    model, draft, tokenizer = specnb.load_pair()       # embedded SmolLM2-135M + its draft
    ids = specnb.chat_ids(tokenizer, "Name three colours.")
    result = specnb.autoregressive(model, ids, max_new_tokens=32)
    print(result.text(tokenizer), result.stats)
"""

from .models.data import load_prompts
from .methods import DraftedToken, EmittedToken, GenerationResult, Iteration, Stats, \
    autoregressive, jacobi, prompt_lookup, speculative
from .models.loading import chat_ids, early_exit_draft, load_model
from .models.pairs import load_pair
from .theory import estimate_alpha, estimate_cost_ratio, expected_tokens_per_iteration, \
    optimal_gamma, predicted_speedup

__version__ = "0.1.0"

__all__ = [
    "DraftedToken", "EmittedToken", "GenerationResult", "Iteration", "Stats", "autoregressive",
    "chat_ids", "early_exit_draft", "estimate_alpha", "estimate_cost_ratio",
    "expected_tokens_per_iteration", "jacobi", "load_model", "load_pair", "load_prompts", "optimal_gamma",
    "predicted_speedup", "prompt_lookup", "speculative",
]
