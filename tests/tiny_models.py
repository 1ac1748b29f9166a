"""Tiny random Llama models built in memory (no files, no hub) for the tests.

Weights are drawn with an explicit generator, wide enough (std 0.5) that next-token
distributions are peaked, so greedy argmaxes are far from ties and comparisons are stable.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 96


def tiny_llama(seed: int, *, vocab: int = VOCAB, hidden: int = 32, layers: int = 2,
               std: float = 0.5, eos_token_id=None) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, bos_token_id=0, pad_token_id=0,
                         eos_token_id=eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, std, generator=generator)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    return model


def perturbed(model: LlamaForCausalLM, seed: int, noise: float) -> LlamaForCausalLM:
    """A copy of `model` with Gaussian noise on every weight: a draft that often agrees."""
    copy = tiny_llama(0, vocab=model.config.vocab_size, hidden=model.config.hidden_size,
                      layers=model.config.num_hidden_layers)
    copy.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in copy.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * noise)
    return copy
