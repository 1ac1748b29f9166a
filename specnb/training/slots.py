"""Continuous batching for data generation: R slots, each a row that a new prompt takes over as
soon as its answer ends, with the target's hidden states captured by the forwards that write.

Why not `model(..., past_key_values=DynamicCache())` on a padded batch (what head_data did
first): every step concatenates every layer's keys and values (a copy of the whole cache, so
quadratic in the answer length), and finished rows keep computing until the slowest row of the
batch ends. Here each slot has a fixed strip of a preallocated KV buffer; a token's keys and
values are written in place at the row's own position, a finished row is refilled with the next
prompt (one prefill forward for the prompts admitted together), and every step computes R rows
that all still write answers.

The forward is the target's own: its embedding, its decoder layers (their attention, MLP and
norms, called as modules), its rotary embedding, final norm and LM head; only the KV cache and
the attention mask are ours. Llama-style models only (`model.model.layers`, as SmolLM2).

    slots, S columns each:   0 1 2 3 4 5 6 7
    row 0 (prompt a b c):    a b c x y            writes its next token at column 5
    row 1 (prompt d e):      d e u v w z          (a new prompt takes row 1 when it ends)

It does not decide what to generate or store shards (`head_data` does); it keeps no state
between calls of `generate_stream`.
"""

import functools
import inspect

import torch

from ..core.sampler import argmax


class SlotCache:
    """Keys and values of R rows × S columns per layer, written in place.

    `mode = ("prefill", rows)`: the new states of `rows` fill columns 0..P-1 of those rows and
    attention sees only them. `mode = ("decode", columns, width)`: row r's single new state goes
    to column `columns[r]`, and attention sees columns 0..width-1 of every row."""

    def __init__(self, num_layers, rows, columns, kv_heads, head_dim, dtype, device):
        shape = (rows, kv_heads, columns, head_dim)
        # Zeros, not empty: masked columns still enter the matrix product (0 · NaN = NaN).
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.mode = None

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        if self.mode[0] == "prefill":
            width = key_states.shape[2]
            for i, row in enumerate(self.mode[1]):
                keys[row, :, :width] = key_states[i]
                values[row, :, :width] = value_states[i]
            return key_states, value_states
        _, columns, width = self.mode
        # Row r's new state to column columns[r]: a scatter touches only those elements
        # (indexing keys[rows, :, columns] would move the whole buffer).
        index = columns.view(-1, 1, 1, 1).expand(key_states.shape)  # [R, kv_heads, 1, D]
        keys.scatter_(2, index, key_states)
        values.scatter_(2, index, value_states)
        return keys[:, :, :width], values[:, :, :width]


@functools.cache  # one signature per layer class, not one per decoding step
def cache_argument(layer_class) -> str:
    """The name under which a decoder layer takes its KV cache: `cache` in transformers 5.24,
    `past_key_values` in 5.0 to 5.17 at least. A name the layer does not know would vanish into
    its **kwargs and leave it without a cache, so the signature decides."""
    names = inspect.signature(layer_class.forward).parameters
    for name in ("cache", "past_key_values", "past_key_value"):
        if name in names:
            return name
    raise TypeError(f"{layer_class.__name__}.forward takes no KV cache argument that specnb "
                    f"knows (cache, past_key_values, past_key_value): {list(names)}")


def forward_slots(target, cache: SlotCache, input_ids, positions, mask, layers) -> tuple:
    """The target's forward on `input_ids [N, T]` at `positions [N, T]` with a boolean
    attention mask `[N, 1, T, K]`; returns (features `[N, T, len(layers), H]`, the final normed
    state `[N, T, H]`). Feature index i < num_layers is the residual stream entering layer i,
    num_layers the final normed state (as `output_hidden_states` numbers them)."""
    body = target.model
    hidden = body.embed_tokens(input_ids)
    # Additive, in the model's dtype: SDPA also takes a bool mask, but eager attention adds the
    # mask to the scores, where True/False would silently count as 1/0.
    mask = torch.zeros(mask.shape, dtype=hidden.dtype, device=mask.device).masked_fill_(
        ~mask, torch.finfo(hidden.dtype).min)
    rotary = body.rotary_emb(hidden, positions)
    captured = {}
    cache_kwarg = {cache_argument(type(body.layers[0])): cache}
    for index, layer in enumerate(body.layers):
        if index in layers:
            captured[index] = hidden
        hidden = layer(hidden, attention_mask=mask, position_ids=positions,
                       position_embeddings=rotary, **cache_kwarg)
    hidden = body.norm(hidden)
    captured[len(body.layers)] = hidden
    return torch.stack([captured[i] for i in layers], dim=2), hidden


def prefill_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[N, 1, P, P]: causal, and only the row's own prompt columns (right padding).
    Example: lengths [2], width 3 -> rows [[1,0,0],[1,1,0],[1,1,0]]."""
    column = torch.arange(width, device=lengths.device)
    causal = column[None, :] <= column[:, None]  # [P, P]
    return (causal[None] & (column < lengths[:, None])[:, None, :])[:, None]


def prefill_groups(slots: list, lengths: list, waste: float = 0.15) -> list:
    """`slots` in groups of similar prompt length, each prefilled by one forward: sorted by
    length, a group grows while its padding stays under `waste` of its tokens.
    Example: lengths [30, 200, 32, 210] -> groups of the slots with [30, 32] and [200, 210]."""
    order = sorted(range(len(slots)), key=lambda i: lengths[i])
    groups, group = [], []
    for i in order:
        trial = group + [i]  # sorted, so the newest is the longest
        if group and lengths[i] * len(trial) > (1 + waste) * sum(lengths[j] for j in trial):
            groups.append(group)
            trial = [i]
        group = trial
    return [[slots[i] for i in g] for g in groups + [group] if g]


@torch.inference_mode()
def generate_stream(target, jobs, *, rows: int, max_new_tokens: int, eos_id: int, layers,
                    top_k: int = 16, columns: int):
    """Answer `jobs`, an iterable of (key, prompt ids, temperature, generator or None), through
    `rows` slots of `columns` columns (>= the longest prompt + max_new_tokens); yield (key,
    example) as answers end, in the order they end. An example is what `head_data` stores.

    Greedy rows (T = 0) take the argmax of the target's logits, as `generate(do_sample=False)`.
    Sampled rows draw from softmax(logits / T) by inverting the CDF with one uniform from the
    row's own generator, so a row's answer depends on its prompt and generator only, not on
    which rows run beside it.
    """
    device = target.device
    config = target.config
    num_layers = len(target.model.layers)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    cache = SlotCache(num_layers, rows, columns, config.num_key_value_heads, head_dim,
                      target.dtype, device)
    feature_buffer = torch.zeros(rows, columns, len(layers), config.hidden_size,
                                 dtype=torch.float16)  # [R, S, L, H], on the CPU
    top_ids_buffer = torch.full((rows, columns, top_k), -1, dtype=torch.int32)
    top_logp_buffer = torch.zeros(rows, columns, top_k, dtype=torch.float16)
    slot_job = [None] * rows  # (key, prompt, temperature, generator) per busy slot
    answers = [[] for _ in range(rows)]
    length = torch.zeros(rows, dtype=torch.long)  # tokens of each row in the cache
    last_token = torch.zeros(rows, dtype=torch.long)  # the row's next token to feed
    pending = iter(jobs)
    exhausted = False

    def choose(logits, slots):
        """Next token of each of `slots` from its logits [n, V]; records its top-k."""
        logp = logits.float().log_softmax(-1)
        top_logp, top_ids = logp.topk(top_k, dim=-1)
        tokens = argmax(logits).cpu()  # greedy: the argmax of the logits, as generate
        temperatures = torch.tensor([float(slot_job[int(s)][2]) for s in slots])
        for temperature in temperatures.unique().tolist():
            if temperature == 0:
                continue
            picked = (temperatures == temperature).nonzero()[:, 0]
            cdf = torch.softmax(logits[picked.to(logits.device)].float() / temperature,
                                -1).cumsum(-1)  # [n, V]
            uniform = torch.cat([torch.rand(1, generator=slot_job[int(slots[i])][3],
                                            device=cdf.device) for i in picked])
            drawn = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None])[:, 0]
            tokens[picked] = drawn.clamp_max(cdf.shape[-1] - 1).cpu()
        column = length[slots] - 1
        top_ids_buffer[slots, column] = top_ids.int().cpu()
        top_logp_buffer[slots, column] = top_logp.half().cpu()
        return tokens

    def record(slots):
        """Append each row's newest token; yield and free the rows whose answer ended."""
        for slot in slots:
            slot = int(slot)
            token = int(last_token[slot])
            answers[slot].append(token)
            if token == eos_id or len(answers[slot]) >= max_new_tokens:
                key, prompt = slot_job[slot][0], slot_job[slot][1]
                fed = len(prompt) + len(answers[slot]) - 1  # the last token is never fed
                yield key, {"ids": list(prompt) + answers[slot], "answer_start": len(prompt),
                            "features": feature_buffer[slot, :fed].clone(),
                            "top_logp": top_logp_buffer[slot, :fed].clone(),
                            "top_ids": top_ids_buffer[slot, :fed].clone()}
                slot_job[slot], length[slot] = None, 0

    while True:
        free = [s for s in range(rows) if slot_job[s] is None]
        admitted = []
        while free and not exhausted:
            try:
                job = next(pending)
            except StopIteration:
                exhausted = True
                break
            if not 1 <= len(job[1]) <= columns - max_new_tokens:
                raise ValueError(f"prompt of {len(job[1])} tokens does not fit in columns="
                                 f"{columns} with max_new_tokens={max_new_tokens}")
            slot = free.pop(0)
            slot_job[slot], answers[slot] = job, []
            top_ids_buffer[slot].fill_(-1)
            top_logp_buffer[slot].zero_()
            admitted.append(slot)
        for group in prefill_groups(admitted, [len(slot_job[s][1]) for s in admitted]):
            prompts = [slot_job[s][1] for s in group]
            lengths = torch.tensor([len(p) for p in prompts])
            width = int(lengths.max())
            ids = torch.full((len(prompts), width), eos_id, dtype=torch.long)
            for i, p in enumerate(prompts):
                ids[i, :len(p)] = torch.tensor(p)
            positions = torch.arange(width).expand(len(prompts), width)
            cache.mode = ("prefill", group)
            features, final = forward_slots(target, cache, ids.to(device), positions.to(device),
                                            prefill_mask(lengths, width).to(device), layers)
            features = features.half().cpu()
            for i, slot in enumerate(group):
                feature_buffer[slot, :lengths[i]] = features[i, :lengths[i]]
            slots = torch.tensor(group)
            length[slots] = lengths
            last = final[torch.arange(len(prompts), device=device), (lengths - 1).to(device)]
            last_token[slots] = choose(target.lm_head(last), slots)
            yield from record(group)
        if admitted:
            continue  # a row may have ended at once: refill before stepping
        busy = [s for s in range(rows) if slot_job[s] is not None]
        if not busy:
            return
        # One decode step for every slot (idle slots, only at the very end, compute at column 0
        # and are ignored): row r feeds its newest token at column length[r].
        column = length.clone()
        width = int(column.max()) + 1
        cache.mode = ("decode", column.to(device), width)
        mask = (torch.arange(width)[None, :] <= column[:, None])[:, None, None, :]
        features, final = forward_slots(target, cache, last_token[:, None].to(device),
                                        column[:, None].to(device), mask.to(device), layers)
        feature_buffer[torch.arange(rows), column] = features[:, 0].half().cpu()
        slots = torch.tensor(busy)
        length[slots] += 1
        last_token[slots] = choose(target.lm_head(final[slots.to(device), 0]), slots)
        yield from record(busy)
