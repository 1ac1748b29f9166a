"""Export a feature head as an EAGLE-3 draft that serving engines load.

    python -m specnb.export DIR                      # vLLM and SGLang, one directory
    python -m specnb.export DIR --layout speculators # Red Hat's speculators format
    python -m specnb.export DIR --head PATH          # a head other than data/engines_head

`FeatureHead` is EAGLE-3's draft layer: `fc` over three target layers' residual streams, one
Llama decoder layer whose attention reads [normed embedding; normed features] (2H wide) with the
features as its residual, a final norm and an LM head over a draft vocabulary. Exported, its
tensors keep their roles under the engines' names:

    fc.weight [H, 3H]                          fc
    midlayer.input_layernorm.weight            embed_norm  (the embedding's norm)
    midlayer.hidden_norm.weight                hidden_norm (the features' norm)
    midlayer.self_attn.{q,k,v}_proj.weight     q/k/v_proj  (input width 2H)
    midlayer.self_attn.o_proj.weight           o_proj
    midlayer.post_attention_layernorm.weight   mlp_norm
    midlayer.mlp.{gate,up,down}_proj.weight    gate/up/down_proj
    norm.weight, lm_head.weight [Vd, H]        final_norm, lm_head
    d2t [Vd] int64                             draft_to_target − arange: an offset
    t2d [V] bool                               the target ids the draft vocabulary holds

The flat layout (`engines`) names the decoder layer `midlayer.*`: vLLM renames it to `layers.0.*`
(vllm/model_executor/models/llama_eagle3.py), SGLang loads it as is and silently drops any other
name (python/sglang/srt/models/llama_eagle3.py), so this one directory loads in both. The
embedding is not exported: the head shares the target's (both engines then use the target's).
The `speculators` layout names it `layers.0.*`, carries the embedding, and names the target as
the verifier (speculators/models/eagle3).

Only a head in the engines' layout exports: exactly three target layers (vLLM builds `fc` for
3), each an index the engines capture, and no per-layer norm before `fc` (specnb's default head
has one, `HeadConfig.feature_norms`; no engine does). The embedded `data/engines_head` is such
a head, trained by `train_head --layout engines`, and what this command exports by default: the
checkpoint is the head specnb runs, not a conversion of another. The layer ids are written in
both engines' conventions: vLLM's top-level `eagle_aux_hidden_state_layer_ids` are transformers'
`hidden_states` indices, SGLang's `eagle_config.eagle_aux_hidden_state_layer_ids` one less.
The directory is written beside its final place and renamed at the end: a failed export leaves
nothing behind.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

NUM_ENGINE_LAYERS = 3  # vLLM's fc is Linear(3 * target hidden, hidden)
LAYOUTS = ("engines", "speculators")
VERIFIER = "HuggingFaceTB/SmolLM2-135M-Instruct"
# specnb name -> the engines' name, inside the decoder layer (prefixed midlayer. / layers.0.)
LAYER_NAMES = {"embed_norm": "input_layernorm", "hidden_norm": "hidden_norm",
               "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
               "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
               "mlp_norm": "post_attention_layernorm", "gate_proj": "mlp.gate_proj",
               "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj"}


class ExportError(ValueError):
    """The head cannot be exported as asked; the message says why and what to do."""


def check_exportable(head, target_config) -> None:
    """Raise `ExportError` unless `head` is in the engines' EAGLE-3 layout for this target."""
    c = head.config
    layers = list(c.feature_layers)
    num_target_layers = int(target_config.num_hidden_layers)
    if c.feature_norms:
        raise ExportError("this head RMS-norms each target layer's features before fc (specnb's "
                          "default layout); the engines' EAGLE-3 feeds fc the raw hidden states. "
                          "Export a head built with HeadConfig(feature_norms=False)")
    if len(layers) != NUM_ENGINE_LAYERS:
        raise ExportError(f"this head reads {len(layers)} target layers {layers}; vLLM's EAGLE-3 "
                          f"reads exactly {NUM_ENGINE_LAYERS} (its fc is 3 × hidden wide), e.g. "
                          f"the engines' default {default_layers(num_target_layers)}")
    if layers != sorted(set(layers)) or not all(1 <= k <= num_target_layers - 1 for k in layers):
        raise ExportError(f"feature layers {layers}: the engines capture hidden_states[k] for "
                          f"1 <= k <= {num_target_layers - 1} (the residual stream before "
                          f"decoder layer k), in ascending order")
    hidden = int(target_config.hidden_size)
    if c.hidden_size != hidden:
        raise ExportError(f"the head is {c.hidden_size} wide, the target {hidden}: this head "
                          f"shares the target's embedding, so both must be equal")
    if c.target_vocab_size != int(target_config.vocab_size):
        raise ExportError(f"the head was built for a vocabulary of {c.target_vocab_size} tokens, "
                          f"the target has {target_config.vocab_size}: a mismatched target")


def default_layers(num_target_layers: int) -> list:
    """The layers both engines read when none are configured: (2, N // 2, N − 3)."""
    return [2, num_target_layers // 2, num_target_layers - 3]


def eagle3_tensors(head, layout: str = "engines") -> dict:
    """{name: tensor} of the exported checkpoint (contiguous, on the CPU, the head's dtype)."""
    if layout not in LAYOUTS:
        raise ExportError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    prefix = "midlayer." if layout == "engines" else "layers.0."
    state = head.state_dict()
    tensors = {"fc.weight": state["fc.weight"], "norm.weight": state["final_norm.weight"],
               "lm_head.weight": state["lm_head.weight"]}
    for ours, theirs in LAYER_NAMES.items():
        tensors[f"{prefix}{theirs}.weight"] = state[f"{ours}.weight"]
    draft_to_target = head.draft_to_target.long().cpu()
    tensors["d2t"] = draft_to_target - torch.arange(len(draft_to_target))
    t2d = torch.zeros(head.config.target_vocab_size, dtype=torch.bool)
    t2d[draft_to_target] = True
    tensors["t2d"] = t2d
    if layout == "speculators":
        tensors["embed_tokens.weight"] = head.embed[0].weight.detach()
    return {name: tensor.detach().cpu().contiguous() for name, tensor in tensors.items()}


def _layer_config(head, target_config) -> dict:
    c = head.config
    dtype = str(head.fc.weight.dtype).removeprefix("torch.")
    return {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size,
            "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim,
            "hidden_act": "silu", "rms_norm_eps": c.rms_norm_eps, "rope_theta": c.rope_theta,
            "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
            "max_position_embeddings": c.max_position_embeddings,
            "vocab_size": int(target_config.vocab_size), "tie_word_embeddings": False,
            "attention_bias": False, "mlp_bias": False, "torch_dtype": dtype}


def eagle3_config(head, target_config, layout: str = "engines", verifier: str = VERIFIER,
                  speculative_tokens: int = 3) -> dict:
    """config.json of the exported checkpoint."""
    c = head.config
    layers = list(c.feature_layers)
    draft = {"draft_vocab_size": c.draft_vocab_size, "target_hidden_size": c.hidden_size,
             # Written out: vLLM's speculators path defaults it to True, specnb's head is False
             # (the residual is the features before hidden_norm); SGLang has no such option.
             "norm_before_residual": False}
    if layout == "engines":
        return {"architectures": ["LlamaForCausalLMEagle3"], **_layer_config(head, target_config),
                **draft, "eagle_aux_hidden_state_layer_ids": layers,
                "eagle_config": {"use_aux_hidden_state": True,
                                 "eagle_aux_hidden_state_layer_ids": [k - 1 for k in layers]}}
    architectures = list(getattr(target_config, "architectures", None) or ["LlamaForCausalLM"])
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
            "transformer_layer_config": _layer_config(head, target_config), **draft,
            "eagle_aux_hidden_state_layer_ids": layers,
            "speculators_config": {
                "algorithm": "eagle3", "default_proposal_method": "greedy",
                "proposal_methods": [{"proposal_type": "greedy",
                                      "speculative_tokens": int(speculative_tokens)}],
                "verifier": {"name_or_path": verifier, "architectures": architectures}}}


def export_eagle3(head, target_config, out, layout: str = "engines", verifier: str = VERIFIER,
                  speculative_tokens: int = 3) -> Path:
    """Write `head` to the new (or empty) folder `out` as an EAGLE-3 checkpoint; return it."""
    from safetensors.torch import save_file

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out} exists and is not an empty folder: choose a new one (nothing "
                          f"was written)")
    if speculative_tokens < 1:
        raise ExportError(f"speculative_tokens must be >= 1, got {speculative_tokens}")
    check_exportable(head, target_config)
    tensors = eagle3_tensors(head, layout)
    config = eagle3_config(head, target_config, layout, verifier, speculative_tokens)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        save_file(tensors, staging / "model.safetensors", metadata={"format": "pt"})
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specnb.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder to write (new, or empty)")
    parser.add_argument("--head", type=Path, default=None,
                        help="a saved feature head in the engines' layout (default: the "
                             "embedded one, data/engines_head)")
    parser.add_argument("--layout", choices=LAYOUTS, default="engines",
                        help="engines: one folder vLLM and SGLang load; speculators: the "
                             "speculators format, the target named as verifier "
                             "(default: %(default)s)")
    parser.add_argument("--verifier", default=VERIFIER,
                        help="the target's name the speculators config records "
                             "(default: %(default)s)")
    parser.add_argument("--speculative-tokens", type=int, default=3,
                        help="drafts per step the speculators config proposes (default: 3)")
    args = parser.parse_args(argv)
    if args.head is not None and not (args.head / "config.json").is_file():
        parser.error(f"--head {args.head}: no saved head there (config.json missing)")
    from .drafters.feature import FeatureDrafter
    from .models.pairs import EMBEDDED_ENGINES_HEAD, load_model

    target, _ = load_model(device="cpu", cpu_path="dense")
    head = FeatureDrafter.from_pretrained(args.head or EMBEDDED_ENGINES_HEAD, target).head
    try:
        out = export_eagle3(head, target.config, args.out, args.layout, args.verifier,
                            args.speculative_tokens)
    except ExportError as error:
        parser.error(str(error))
    print(f"wrote {out} ({args.layout} layout, target layers {list(head.config.feature_layers)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
