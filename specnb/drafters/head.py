"""`FeatureHead`: a one-layer draft network that reads the target's hidden states (EAGLE-3 style).

Entry t of the head is built from the target's residual stream at position t (a few layers,
concatenated and projected by `fc` to the target's width) and the embedding of token t+1 (the
target's own, frozen embedding). One pre-norm Llama decoder layer, whose attention takes both
halves ([embedding; features], 2H wide) and whose residual is the features, predicts the next
position; a final norm and an LM head over a reduced draft vocabulary give q. From the second
draft step on, the head feeds its own output in place of the target's features:

    entry t:    x = fc(F_t) (target) or o_{t-1} (own)  ->  o_t = Layer([E(x_{t+1}); x], pos t)
    q_t = softmax(LMHead(norm(o_t)))  over the draft vocabulary, mapped to target ids

Two forward paths share the weights: `forward` (one chunk of entries against a KV cache, as
`BatchedCachedLM` drives any causal LM) and `unrolled` (training: every position of a batch of
sequences, then steps 2..k on the head's own outputs, attending as they would at inference).
It does not sample, verify or decide what to feed: `FeatureDrafter` does.
"""

import math
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class HeadConfig:
    hidden_size: int = 576
    intermediate_size: int = 1536
    num_attention_heads: int = 9
    num_key_value_heads: int = 3
    head_dim: int = 64
    rope_theta: float = 100000.0
    rms_norm_eps: float = 1e-5
    feature_layers: tuple = (2, 15, 27, 30)
    draft_vocab_size: int = 8192
    max_position_embeddings: int = 8192
    target_vocab_size: int = 49152
    # RMS-norm each target layer's features before `fc` (specnb's default head). The engines'
    # EAGLE-3 layout (vLLM, SGLang) has no such norms: `fc` reads the raw residual streams of
    # three layers, so a head meant for export is built and trained with False.
    feature_norms: bool = True
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, values: dict) -> "HeadConfig":
        values = dict(values)
        values["feature_layers"] = tuple(values["feature_layers"])
        return cls(**values)

    def to_dict(self) -> dict:
        return {**asdict(self), "feature_layers": list(self.feature_layers)}


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(size)), eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotary_tables(positions, d: int, theta: float, dtype):
    """RoPE's (cos, sin) `[B, 1, T, d]` at `positions [B, T]`, halves repeated as in Llama."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, device=positions.device,
                                             dtype=torch.float32) / d))
    angles = positions.float().unsqueeze(-1) * inv_freq  # [B, T, d/2]
    angles = torch.cat([angles, angles], -1).unsqueeze(1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(x, tables):
    """RoPE as in Llama (halves rotated): x [B, heads, T, d], `tables` from `rotary_tables`."""
    cos, sin = tables
    first, second = x.chunk(2, -1)
    return x * cos + torch.cat([-second, first], -1) * sin


class FeatureHead(nn.Module):
    """The head's weights; `embed` is the target's input embedding (shared, frozen)."""

    def __init__(self, config: HeadConfig, embed: nn.Embedding, draft_to_target: torch.Tensor):
        super().__init__()
        c = self.config = config
        h, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.embed = [embed]  # a list: not a submodule, so it is neither saved nor trained
        # The residual stream carries huge outliers (values near 25 000 at some positions in
        # SmolLM2's middle layers): each layer's features are RMS-normed before the projection.
        self.feature_norms = nn.ModuleList(RMSNorm(c.hidden_size, c.rms_norm_eps)
                                           for _ in c.feature_layers) if c.feature_norms else None
        self.fc = nn.Linear(len(c.feature_layers) * c.hidden_size, c.hidden_size, bias=False)
        self.embed_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.q_proj = nn.Linear(2 * c.hidden_size, h, bias=False)
        self.k_proj = nn.Linear(2 * c.hidden_size, kv, bias=False)
        self.v_proj = nn.Linear(2 * c.hidden_size, kv, bias=False)
        self.o_proj = nn.Linear(h, c.hidden_size, bias=False)
        self.mlp_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.final_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.draft_vocab_size, bias=False)
        self.register_buffer("draft_to_target", draft_to_target.long().clone())
        # What `BatchedCachedLM` reads off a causal LM.
        self.generation_config = SimpleNamespace(pad_token_id=0, eos_token_id=None)

    def get_output_embeddings(self):
        return self.lm_head

    # ---- the pieces ------------------------------------------------------------------------
    def project(self, features):
        """Target features `[..., L', H]` -> the head's input width `[..., H]`: the head's L
        layers are the first L of the L' given (training data may carry more after them, e.g.
        the final state a loss regresses onto)."""
        features = features[..., :len(self.config.feature_layers), :].to(self.fc.weight.dtype)
        if self.feature_norms is None:  # the engines' layout: the layers side by side, as read
            return self.fc(features.flatten(-2))
        normed = [norm(features[..., i, :]) for i, norm in enumerate(self.feature_norms)]
        return self.fc(torch.cat(normed, -1))

    def _qkv(self, token_ids, hidden, positions):
        c = self.config
        x = torch.cat([self.embed_norm(self.embed[0](token_ids).to(hidden.dtype)),
                       self.hidden_norm(hidden)], -1)
        batch, width = token_ids.shape
        q = self.q_proj(x).view(batch, width, c.num_attention_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, width, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, width, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        tables = rotary_tables(positions, c.head_dim, c.rope_theta, q.dtype)  # q and k share
        return rotate(q, tables), rotate(k, tables), v

    def _finish(self, hidden, attended):
        """Residual over the features, then the MLP: `o_t`."""
        batch, heads, width, d = attended.shape
        x = hidden + self.o_proj(attended.transpose(1, 2).reshape(batch, width, heads * d))
        y = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))

    def logits(self, output):
        return self.lm_head(self.final_norm(output))

    # ---- inference: one chunk against a cache ------------------------------------------------
    def forward(self, input_ids, attention_mask, position_ids, past_key_values, features=None,
                hidden=None, use_cache=True, logits_to_keep=0):
        """A chunk of entries `[B, T]`; exactly one of `features [B, T, L, H]` (the target's)
        or `hidden [B, T, H]` (the head's own previous outputs). Returns `.logits` (draft
        vocabulary) and `.hidden` (the outputs o, inputs of the next step)."""
        if (features is None) == (hidden is None):
            raise ValueError("pass exactly one of features (the target's) or hidden (own outputs)")
        x = self.project(features) if features is not None else hidden
        q, k, v = self._qkv(input_ids, x, position_ids)
        k, v = past_key_values.update(k, v, 0)
        total, width = attention_mask.shape[-1], input_ids.shape[1]
        past = total - width
        if attention_mask.dim() == 4:  # a token tree's additive mask [B, 1, T, S] (0: seen)
            mask = attention_mask[:, 0] == 0
        else:
            causal = torch.arange(total, device=x.device) <= \
                (past + torch.arange(width, device=x.device)).unsqueeze(1)  # [T, S]
            mask = causal.unsqueeze(0) & attention_mask.bool().unsqueeze(1)  # [B, T, S]
        # A query always sees its own slot: a padding query then stays finite (never NaN).
        own = torch.arange(total, device=x.device) == \
            (past + torch.arange(width, device=x.device)).unsqueeze(1)
        mask = mask | own.unsqueeze(0)
        if x.device.type == "cpu":  # the kernel shares each key/value head in place
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1),
                                                      enable_gqa=True)
        else:  # (a masked GQA call can fall back to the slow kernel on a GPU)
            groups = self.config.num_attention_heads // self.config.num_key_value_heads
            attended = F.scaled_dot_product_attention(
                q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                attn_mask=mask.unsqueeze(1))
        output = self._finish(x, attended)
        if isinstance(logits_to_keep, torch.Tensor):
            keep = output[:, logits_to_keep]
        else:
            keep = output if not logits_to_keep else output[:, -logits_to_keep:]
        return SimpleNamespace(logits=self.logits(keep), hidden=output)

    # ---- training: every position, then k - 1 steps on own outputs ------------------------
    def unrolled(self, token_ids, features, valid, steps: int, offset: int = 0):
        """Training-time test. `token_ids [B, T]` holds x_{t+1} for entry t, `features
        [B, T, L, H]` the target's F_t, `valid [B, T]` real entries. Step 1 runs every entry;
        step k >= 2 runs anchors t >= `offset` (skip the prompt) at position t + k - 1 with
        token x_{t+k}, attending to step-1 keys at positions <= t and to its own chain's keys
        of steps 2..k, exactly what the cache holds at inference. Returns `steps` outputs o,
        each `[B, T - offset, H]`: row i is anchor offset + i."""
        batch, width = token_ids.shape
        positions = torch.arange(width, device=token_ids.device).expand(batch, width)
        x = self.project(features)
        q, k1, v1 = self._qkv(token_ids, x, positions)
        groups = self.config.num_attention_heads // self.config.num_key_value_heads
        k1, v1 = k1.repeat_interleave(groups, 1), v1.repeat_interleave(groups, 1)
        causal = torch.ones(width, width, dtype=torch.bool, device=x.device).tril()
        mask = causal.unsqueeze(0) & valid.bool().unsqueeze(1)  # [B, T, T]
        scale = 1.0 / math.sqrt(self.config.head_dim)
        first = self._finish(x, F.scaled_dot_product_attention(q, k1, v1,
                                                                attn_mask=mask.unsqueeze(1)))
        outputs = [first[:, offset:]]
        chain_k, chain_v = [], []
        seen = mask[:, offset:].unsqueeze(1)  # step k's anchor t still sees step-1 keys <= t
        for step in range(2, steps + 1):
            shift = step - 1
            # Token x_{t+k} for anchor t is entry (t + k - 1)'s token: shift left, pad at the end.
            tokens = torch.cat([token_ids[:, shift:], token_ids[:, -1:].expand(-1, shift)], 1)
            hidden = outputs[-1]
            q, k, v = self._qkv(tokens[:, offset:], hidden, positions[:, offset:] + shift)
            chain_k.append(k.repeat_interleave(groups, 1))
            chain_v.append(v.repeat_interleave(groups, 1))
            main = ((q @ k1.transpose(-1, -2)) * scale).masked_fill(~seen, float("-inf"))
            diagonal = torch.stack([(q * key).sum(-1) * scale for key in chain_k], -1)
            weights = torch.cat([main, diagonal], -1).softmax(-1)  # [B, h, T', T + k - 1]
            attended = weights[..., :width] @ v1 + sum(
                weights[..., width + j].unsqueeze(-1) * value for j, value in enumerate(chain_v))
            outputs.append(self._finish(hidden, attended))
        return outputs
