"""What vLLM and SGLang do with an EAGLE-3 checkpoint's names and shapes, as a test oracle.

The rules below are ported from the engines' loaders (read in their source, not run here):

- vLLM, vllm/model_executor/models/llama_eagle3.py: `Eagle3LlamaForCausalLM.load_weights` skips
  `t2d`, renames `d2t` to `draft_id_to_target_id`, keeps `lm_head*`, prefixes everything else
  with `model.`; `LlamaModel.load_weights` renames `midlayer.` to `layers.0.` and stacks
  q/k/v into `qkv_proj` and gate/up into `gate_up_proj`; a name with no parameter raises.
  `fc` is Linear(3 × target_hidden_size, hidden_size), q/k/v read 2 × hidden_size, `lm_head` is
  [draft_vocab_size, hidden]; a draft token i means target token i + d2t[i]. The aux layers are
  the top-level `eagle_aux_hidden_state_layer_ids` (vllm/v1/.../eagle3_utils.py), else
  (2, N // 2, N − 3) (vllm/model_executor/models/llama.py), each captured as the residual stream
  entering decoder layer k: transformers' `hidden_states[k]`. `norm_before_residual` defaults to
  False in a flat config (True on vLLM's speculators-format path).
- SGLang, python/sglang/srt/models/llama_eagle3.py: `load_weights` turns `d2t` into hot token
  ids (d2t + arange), skips `t2d`, stacks q/k/v and gate/up, loads a name as is or under
  `model.`, and **silently drops** any other name; `tie_word_embeddings` makes `lm_head` the
  embedding; one decoder layer only. The aux layers are `eagle_config.
  eagle_aux_hidden_state_layer_ids`, each plus one (python/sglang/srt/models/llama.py,
  `set_eagle3_layers_to_capture`), else (2, N // 2, N − 3).

Each loader returns what the engine would end up with (the parameters loaded, the draft →
target map, the target layers read) and raises `LoadError` where the engine would fail; the
tests also fail on what SGLang would drop without a word. (The engines stack q/k/v and gate/up
into one parameter each; the shards are checked one by one here, against their rows.)
"""

import torch


class LoadError(ValueError):
    """The engine would refuse this checkpoint."""


def _shard_shapes(config) -> dict:
    """{parameter (unstacked name, under layers.0.): expected shape}."""
    h, i = config["hidden_size"], config["intermediate_size"]
    heads, kv, d = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    return {"self_attn.q_proj.weight": (heads * d, 2 * h),
            "self_attn.k_proj.weight": (kv * d, 2 * h),
            "self_attn.v_proj.weight": (kv * d, 2 * h),
            "self_attn.o_proj.weight": (h, heads * d),
            "mlp.gate_proj.weight": (i, h), "mlp.up_proj.weight": (i, h),
            "mlp.down_proj.weight": (h, i), "input_layernorm.weight": (h,),
            "hidden_norm.weight": (h,), "post_attention_layernorm.weight": (h,)}


def _top_shapes(config) -> dict:
    h = config["hidden_size"]
    target_h = config.get("target_hidden_size") or h
    vocab = config["vocab_size"]
    draft_vocab = config.get("draft_vocab_size") or vocab
    return {"fc.weight": (h, 3 * target_h), "norm.weight": (h,),
            "lm_head.weight": (draft_vocab, h), "embed_tokens.weight": (vocab, h)}


def _check_shape(name, tensor, shape):
    if tuple(tensor.shape) != tuple(shape):
        raise LoadError(f"{name}: shape {tuple(tensor.shape)}, the engine's parameter is "
                        f"{tuple(shape)}")


def _hot_ids(d2t, config):
    vocab = config["vocab_size"]
    targets = torch.arange(len(d2t)) + d2t.long()
    if d2t.dtype != torch.int64 or targets.min() < 0 or targets.max() >= vocab:
        raise LoadError(f"d2t must be int64 offsets with 0 <= i + d2t[i] < {vocab}; got "
                        f"{d2t.dtype}, targets from {int(targets.min())} to {int(targets.max())}")
    return targets


def _default_layers(num_target_layers):
    return [2, num_target_layers // 2, num_target_layers - 3]


def vllm_load(tensors: dict, config: dict, num_target_layers: int) -> dict:
    if not set(config.get("architectures", [])) & {"LlamaForCausalLMEagle3",
                                                   "Eagle3LlamaForCausalLM"}:
        raise LoadError(f"architectures {config.get('architectures')}: not an EAGLE-3 Llama")
    shards = {f"model.layers.0.{k}": v for k, v in _shard_shapes(config).items()}
    top = {("lm_head.weight" if k == "lm_head.weight" else f"model.{k}"): v
           for k, v in _top_shapes(config).items()}
    loaded, draft_to_target = set(), None
    for name, tensor in tensors.items():
        if "t2d" in name:
            continue
        if "d2t" in name:
            draft_to_target = _hot_ids(tensor, config)
            continue
        full = name if "lm_head" in name else f"model.{name}"
        full = full.replace("midlayer.", "layers.0.")
        if full in shards:
            _check_shape(name, tensor, shards[full])
        elif full in top:
            _check_shape(name, tensor, top[full])
        else:
            raise LoadError(f"There is no module or parameter named {full!r}")
        loaded.add(full)
    missing = (set(shards) | set(top)) - loaded - {"model.embed_tokens.weight"}
    if missing:
        raise LoadError(f"weights not in the checkpoint: {sorted(missing)}")
    layers = config.get("eagle_aux_hidden_state_layer_ids") or _default_layers(num_target_layers)
    if not all(1 <= k <= num_target_layers - 1 for k in layers):
        raise LoadError(f"aux layer ids {layers}: vLLM captures layers 1..{num_target_layers - 1}")
    return {"loaded": loaded, "draft_to_target": draft_to_target,
            "hidden_states": list(layers),  # transformers' hidden_states indices
            "norm_before_residual": bool(config.get("norm_before_residual", False))}


def sglang_load(tensors: dict, config: dict, num_target_layers: int) -> dict:
    if config.get("num_hidden_layers", 1) != 1:
        raise LoadError("SGLang's EAGLE-3 draft has exactly one decoder layer")
    params = {f"model.midlayer.{k}": v for k, v in _shard_shapes(config).items()}
    params.update({("lm_head.weight" if k == "lm_head.weight" else f"model.{k}"): v
                   for k, v in _top_shapes(config).items()})
    loaded, dropped, draft_to_target = set(), [], None
    for name, tensor in tensors.items():
        if "d2t" in name:
            draft_to_target = _hot_ids(tensor, config)
            continue
        if "t2d" in name:
            continue
        for candidate in (name, f"model.{name}"):
            if candidate in params:
                _check_shape(name, tensor, params[candidate])
                loaded.add(candidate)
                break
        else:
            dropped.append(name)  # no error in SGLang: the weight is simply not loaded
    if config.get("tie_word_embeddings", False):
        loaded.discard("lm_head.weight")  # replaced by the (target's) embedding
    ids = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    layers = [v + 1 for v in ids] if ids is not None else _default_layers(num_target_layers)
    return {"loaded": loaded, "dropped": dropped, "draft_to_target": draft_to_target,
            "hidden_states": layers,
            "missing": sorted(set(params) - loaded - {"model.embed_tokens.weight"})}
