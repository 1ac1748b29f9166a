"""Grouped-query attention without copying the cache, for multi-token chunks on a CPU.

The embedded model has 9 query heads and 3 key/value heads. transformers' SDPA attention lets
torch's kernel share each key/value head among its query heads (`enable_gqa`) only when there
is no attention mask; with a mask and more than one query token (checking drafts: a chain
after a cached prefix, a token tree, padded rows) it first copies every layer's keys and values
3× (`repeat_kv`), a copy of the whole cache per forward. Measured on a 2-core Intel Xeon
(AVX-512, torch 2.13.0, 200-token prefix, median of 7): a forward of 2, 3, 4, 8 tokens took
38.6, 40.7, 54.5, 68.7 ms with the copies and 36.3, 38.8, 51.4, 64.0 ms without, one token
35.6 ms either way, and the logits were bitwise equal (the same CPU kernel reads the shared
heads in place). So checking drafts gets cheaper and nothing else changes.

`use_gqa_attention(model)` registers `gqa_sdpa_attention` under the name "specnb_sdpa" and
switches a model that uses "sdpa" to it. The function takes only that one case, on the CPU
(query, keys, values and mask handed to torch's kernel with `enable_gqa=True`, as transformers
itself does without a mask); every other call (one token, no mask, a GPU, a model without
grouped heads, extras such as a position bias) goes to transformers' own SDPA function
unchanged. The model stays a normal transformers model: `generate`, our loops, hooks.
"""

import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "specnb_sdpa"


def gqa_sdpa_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                       is_causal=None, **kwargs):
    """transformers' SDPA attention, but a masked multi-token chunk on the CPU shares the
    key/value heads instead of copying them. `query [B, H, Q, D]`, `key`/`value [B, Hkv, S, D]`."""
    groups = getattr(module, "num_key_value_groups", 1)
    ours = (query.device.type == "cpu" and groups > 1 and attention_mask is not None
            and query.shape[2] > 1 and key.shape[-1] == value.shape[-1]
            and not any(kwargs.get(extra) is not None for extra in ("softcap", "position_bias"))
            and not kwargs.get("output_attentions", False))
    if not ours:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                            dropout_p=dropout, scale=scaling, is_causal=False,
                                            enable_gqa=True)
    return output.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make "specnb_sdpa" a name transformers knows, with SDPA's own mask builder."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(NAME, gqa_sdpa_attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def use_gqa_attention(model):
    """Switch `model` from "sdpa" to "specnb_sdpa" (in place; other attentions are left as
    they are); returns it. `model.specnb_attention` names the attention it now runs."""
    if getattr(model.config, "_attn_implementation", None) == "sdpa":
        register()
        model.set_attn_implementation(NAME)
    model.specnb_attention = model.config._attn_implementation
    return model
