"""specnb: speculative and parallel decoding of language models, taught executably.

    import specnb
    target, drafter, tokenizer = specnb.load_pair()    # embedded SmolLM2-135M + its feature head
    ids = specnb.chat_ids(tokenizer, "Name three colours.")
    result = specnb.speculative(target, drafter, ids, gamma=4, max_new_tokens=32)
    print(result.text(tokenizer), result.stats)

`load_pair()` returns the embedded target, a `FeatureDrafter` (the one-layer head trained on
the target's hidden states, data/head/) and the tokenizer; `load_pair("embedded-distilled")`
gives the standalone distilled draft model instead. The layers, lowest first: `core`,
`drafters`, `methods`, `models`; `training`, `bench` and `course` sit on top; `viz` draws.
"""

from ._lazy import lazy_attributes

# Each name imports its layer when first used (specnb/_lazy.py): `import specnb` alone is instant.
__getattr__, __dir__ = lazy_attributes(__name__, globals(), {
    "verify": ".core",
    **dict.fromkeys(["Drafter", "FeatureDrafter", "ModelDrafter", "NgramDrafter", "NoDrafter"],
                    ".drafters"),
    **dict.fromkeys(["CostAwareGamma", "DraftedToken", "EmittedToken", "GenerationResult",
                     "Iteration", "Stats", "autoregressive", "cost_aware_in_loop", "jacobi", "lookahead",
                     "prompt_lookup", "speculative"], ".methods"),
    "load_prompts": ".models.data",
    **dict.fromkeys(["chat_ids", "early_exit_draft", "load_model"], ".models.loading"),
    "load_pair": ".models.pairs",
    "machine_line": ".models.machine",
    **dict.fromkeys(["estimate_alpha", "estimate_cost_ratio", "expected_tokens_per_iteration",
                     "optimal_gamma", "predicted_speedup"], ".theory"),
})

__version__ = "0.1.0"

__all__ = [
    "CostAwareGamma", "DraftedToken", "Drafter", "EmittedToken", "FeatureDrafter",
    "GenerationResult", "Iteration", "ModelDrafter", "NgramDrafter", "NoDrafter", "Stats",
    "autoregressive", "chat_ids", "cost_aware_in_loop", "early_exit_draft", "estimate_alpha", "estimate_cost_ratio",
    "expected_tokens_per_iteration", "jacobi", "load_model", "load_pair", "load_prompts",
    "lookahead", "machine_line", "optimal_gamma", "predicted_speedup", "prompt_lookup", "speculative", "verify",
]
