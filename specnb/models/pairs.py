"""Target/draft pairs: the embedded offline pairs, and named pairs from the Hugging Face Hub.

`load_pair()` returns the embedded target with its default drafter, the feature-reading head
of `data/head/` (`specnb.drafters.FeatureDrafter`); `load_pair("embedded-distilled")` returns
the same target with the standalone draft model distilled for it (`data/draft/`), kept for
comparison and as the assistant of transformers' assisted generation.

Speculative decoding compares the two models' probabilities token by token, so a pair must
share one tokenizer. Vocabularies may differ only by padding rows (embedding rows beyond the
tokenizer's size, added for matmul efficiency); those rows are cut so both score the same ids.
"""

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from .attention import use_gqa_attention
from .data import DATA_DIR
from .fast_path import apply_cpu_path, follow_path, resolve_cpu_path
from .loading import cpu_path_cache, default_device, default_dtype, load_model

EMBEDDED_DRAFT = DATA_DIR / "draft"
EMBEDDED_HEAD = DATA_DIR / "head"
# The same head's recipe in the serving engines' EAGLE-3 layout (`python -m specnb.export`).
EMBEDDED_ENGINES_HEAD = DATA_DIR / "engines_head"
EMBEDDED = ("embedded", "embedded-distilled")  # offline: the head (default), the distilled draft
PAIRS = {  # name: (target, draft); these need internet on first use
    "smollm2-1.7b": ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "smollm2-360m": ("HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "qwen2.5-1.5b": ("Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
    "llama-160m": ("JackFram/llama-160m", "JackFram/llama-68m"),
}


def output_rows(model) -> int:
    return model.get_output_embeddings().weight.shape[0]


def match_vocabularies(target, draft, target_tokenizer, draft_tokenizer) -> None:
    """Refuse pairs with different tokenizers; cut padding rows so both score the same ids."""
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        raise ValueError("the target's and the draft's tokenizers differ; speculative decoding "
                         "needs one shared vocabulary")
    size = len(target_tokenizer)
    rows = {"target": output_rows(target), "draft": output_rows(draft)}
    for name, count in rows.items():
        if count < size:
            raise ValueError(f"the {name} scores {count} ids but its tokenizer has {size}")
    if rows["target"] != rows["draft"]:
        for model in (target, draft):  # rows past the tokenizer are padding: no text maps there
            model.resize_token_embeddings(size)


def load_embedded_draft(device=None, dtype=None, cpu_path="dense"):
    """The distilled draft shipped in data/draft (see data/README.md), on `cpu_path`."""
    if not (EMBEDDED_DRAFT / "config.json").exists():
        raise ValueError(f"no embedded draft in {EMBEDDED_DRAFT}; rebuild it with "
                         f"`python -m specnb.training.train_draft` (data/README.md)")
    device = torch.device(device) if device is not None else default_device()
    draft = AutoModelForCausalLM.from_pretrained(EMBEDDED_DRAFT,
                                                 dtype=dtype or default_dtype(device))
    use_gqa_attention(draft)  # as load_model does (specnb.models.attention)
    return apply_cpu_path(draft.to(device).eval(), cpu_path, cache_file=cpu_path_cache())


def load_head(path, target):
    """A saved feature head (`FeatureDrafter.save_pretrained`'s folder) as a drafter for
    `target`, its linears on the target's CPU path (as the embedded head's)."""
    from ..drafters import FeatureDrafter

    if not (Path(path) / "config.json").is_file():
        raise ValueError(f"no saved head in {path} (config.json missing); train one with "
                         f"`python -m specnb.training.train_head --out {path}`")
    drafter = FeatureDrafter.from_pretrained(path, target)
    follow_path(drafter.head, target)
    return drafter


def load_embedded_head(target):
    """The feature-reading draft head shipped in data/head, as a drafter for `target`."""
    from ..drafters import FeatureDrafter
    from ..drafters.feature import Advice

    from .int8_draft import int8_copy, why_not_int8
    from .tree_shape import int8_for, recommend_shape, shape_for, tree_cost

    head = load_head(EMBEDDED_HEAD, target)
    # Its int8 twin (the same parameters) competes for the recommended shape on the CPU.
    int8 = FeatureDrafter(int8_copy(head.head)) if why_not_int8(head.head) is None else None
    measured = []

    def record():  # measured (or read from the cache) at the first call, then kept
        if not measured:
            measured.append(recommend_shape(target, head, int8_head=int8))
        return measured[0]

    def advisor(temperature=0.0):  # `speculative(target, head, ids)` without gamma
        with_int8 = int8_for(record(), temperature)
        # Trimmed on a CPU, where a wider forward costs more; a GPU's is flat far further, and
        # trimming's one host read per iteration would stall its queue of kernels.
        trim = tree_cost(record(), with_int8) if target.device.type == "cpu" else None
        return Advice(shape_for(record(), temperature), int8.head if with_int8 else None,
                      trim=trim)
    advisor.record = record  # the whole measurement (`bench --trim` reads its costs)
    head.advisor = advisor
    return head


def load_pair(name=None, *, device=None, dtype=None, cpu_path=None):
    """Return `(target, draft, tokenizer)`.

    No name (or "embedded"): the embedded target and its feature head (a drafter);
    "embedded-distilled": the embedded target and the distilled draft model; a name of `PAIRS`:
    a Hub pair (needs internet). `cpu_path` (see `load_model`) goes to the target and to a draft
    model, each calibrated for itself under "auto" (a draft mostly runs 1-token forwards, and
    "auto" never picks a path slower there). The feature head takes the target's path (its
    linears are measured as the target's are, by the same kernels on the same CPU) and reads the
    target's features from its hidden states (`output_hidden_states`), which the swap leaves as
    they are.
    """
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a pair name (str) or None, got {type(name).__name__}; "
                         f"choose one of {sorted(PAIRS)} or {list(EMBEDDED)}")
    if name is None or name in EMBEDDED:
        target, tokenizer = load_model(device=device, dtype=dtype, cpu_path=cpu_path)
        if name == "embedded-distilled":
            draft = load_embedded_draft(target.device, target.dtype, cpu_path=cpu_path)
            return target, draft, tokenizer
        return target, load_embedded_head(target), tokenizer
    if name not in PAIRS:
        raise ValueError(f"unknown pair {name!r}; choose one of {sorted(PAIRS)}, "
                         f"{list(EMBEDDED)} or None for the embedded offline pair")
    resolve_cpu_path(cpu_path)  # a bad value fails before any download
    target_id, draft_id = PAIRS[name]
    target, target_tokenizer = load_model(target_id, device=device, dtype=dtype, cpu_path="dense")
    draft, draft_tokenizer = load_model(draft_id, device=target.device, dtype=target.dtype,
                                        cpu_path="dense")
    match_vocabularies(target, draft, target_tokenizer, draft_tokenizer)  # may resize lm_head
    cache = cpu_path_cache()
    return (apply_cpu_path(target, cpu_path, cache_file=cache),
            apply_cpu_path(draft, cpu_path, cache_file=cache), target_tokenizer)
