"""Tiny random Llama models built in memory (no files, no hub) for the tests.

Weights are drawn with an explicit generator, wide enough (std 0.5) that next-token
distributions are peaked, so greedy argmaxes are far from ties and comparisons are stable.

`SPECNB_TEST_DEVICE=cuda` (set by scripts/gpu_check.py) puts the same models on that device:
see `on_test_device`. Unset, everything stays on the CPU.
"""

import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 96
TEST_DEVICE = os.environ.get("SPECNB_TEST_DEVICE") or None


def tiny_llama(seed: int, *, vocab: int = VOCAB, hidden: int = 32, layers: int = 2,
               std: float = 0.5, eos_token_id=None, max_positions: int = 256) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, bos_token_id=0, pad_token_id=0,
                         eos_token_id=eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    generator = torch.Generator(device="cpu").manual_seed(seed)  # the same weights on any device
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, std, generator=generator)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    return on_test_device(model)


def perturbed(model: LlamaForCausalLM, seed: int, noise: float) -> LlamaForCausalLM:
    """A copy of `model` with Gaussian noise on every weight: a draft that often agrees."""
    copy = tiny_llama(0, vocab=model.config.vocab_size, hidden=model.config.hidden_size,
                      layers=model.config.num_hidden_layers)
    copy.load_state_dict(model.state_dict())
    generator = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for param in copy.parameters():
            param.add_(torch.randn(param.shape, generator=generator).to(param.device) * noise)
    return copy


def on_test_device(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Under SPECNB_TEST_DEVICE, move `model` there and let the tests stay as they are: tensors
    a test made on the CPU are moved in, and the logits go back to the device the input came
    from. specnb passes tensors on the model's device, so its loops compute and sample there."""
    if TEST_DEVICE is None:
        return model
    model.to(TEST_DEVICE)
    model.register_forward_pre_hook(_inputs_to_model_device, with_kwargs=True)
    model.register_forward_hook(_logits_to_caller_device, with_kwargs=True)
    return model


def _inputs_to_model_device(model, args, kwargs):
    first = kwargs.get("input_ids", args[0] if args else kwargs.get("inputs_embeds"))
    model._caller_device = first.device if isinstance(first, torch.Tensor) else None

    def move(value):
        return value.to(model.device) if isinstance(value, torch.Tensor) else value
    return tuple(move(a) for a in args), {key: move(v) for key, v in kwargs.items()}


def _logits_to_caller_device(model, args, kwargs, output):
    caller = getattr(model, "_caller_device", None)
    if caller is not None and getattr(output, "logits", None) is not None:
        output.logits = output.logits.to(caller)
    return output


def random_prompts(count, seed=0, longest=12):
    """`count` prompts of 1..longest-1 ids in [6, 96) (clear of the tiny models' EOS 5)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)  # CPU draws on any test device
    lengths = torch.randint(1, longest, (count,), generator=generator).tolist()
    return [torch.randint(6, 96, (n,), generator=generator).tolist() for n in lengths]
