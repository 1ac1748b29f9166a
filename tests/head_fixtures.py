"""A randomly initialised feature head for a tiny target (no files): exactness must not depend on
the head being any good. Its draft vocabulary is a strict subset of the target's."""

import torch

from specnb.drafters import FeatureDrafter, FeatureHead, HeadConfig


def random_head(target, *, seed: int = 0, draft_vocab: int | None = None, std: float = 0.3,
                layers=(0, 1, 2), feature_norms: bool = True) -> FeatureDrafter:
    c = target.config
    vocab = c.vocab_size
    draft_vocab = draft_vocab or vocab - vocab // 4
    # A CPU generator named as such: under SPECNB_TEST_DEVICE (scripts/gpu_check.py) a bare
    # torch.Generator() is made on the test device, and randperm and the init run on the CPU.
    generator = torch.Generator(device="cpu").manual_seed(seed)
    draft_to_target = torch.randperm(vocab, generator=generator)[:draft_vocab].sort().values
    config = HeadConfig(hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                        num_attention_heads=c.num_attention_heads,
                        num_key_value_heads=c.num_key_value_heads,
                        head_dim=c.hidden_size // c.num_attention_heads, rope_theta=10000.0,
                        feature_layers=tuple(layers), draft_vocab_size=draft_vocab,
                        max_position_embeddings=c.max_position_embeddings,
                        target_vocab_size=vocab, feature_norms=feature_norms)
    head = FeatureHead(config, target.get_input_embeddings(), draft_to_target)
    with torch.no_grad():
        for name, param in head.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, std, generator=generator)
    return FeatureDrafter(head.to(target.get_input_embeddings().weight.device).eval())
