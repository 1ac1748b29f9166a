"""A KV cache for a batch of rows that grow and roll back by different amounts.

Here B rows share one cache of S *slots*; a boolean mask
`valid [B, S]` says which slots hold a real token of each row. Every forward appends the same
number of slots T to all rows (a row with fewer new tokens pads, with `new_valid` False there);
rolling back a row marks its last real slots invalid instead of moving memory, so each row rolls
back to its own length. Position ids come from each row's own count of real tokens, and the
attention mask hides padding and rolled-back slots, so every row sees exactly its own sequence.

    slots:    0  1  2  3  4  5          row 0: prompt [a b c], drafts d e rejected -> holes
    row 0:    a  b  c  d× e× f          f sits at position 3, attends to a b c f
    row 1:    a  b  ·  g  h  i          (· = prompt padding, never valid)

Slot 0 holds a real token in every row (prompts are right-padded), so no query ever attends to
nothing. Holes cost a little attention work: a tree's trailing ones are cropped, and the cache
is compacted when holes pile up.
Finished rows leave with `select_rows`. Rows that start from the same prompt (N copies, as a
statistical test runs them) share one prefill forward.

It does not sample, verify or decide what to feed; the loops in `specnb.methods` do.
"""

import torch

from .timed import TimedModel, clock_start, clock_stop, crop_cache
from .sampler import checking
from .tree import check_parents, tree_ancestors

# Compact when the cache has this many more slots than its longest row (holes from rollbacks).
MAX_HOLES = 64


def drop_last_real(valid: torch.Tensor, num_tokens: torch.Tensor) -> torch.Tensor:
    """The mask `valid [B, S]` with each row b's last `num_tokens[b]` real (True) slots made
    holes; earlier holes do not count. Example: [T T T F F T T], 3 -> [T T F F F F F]."""
    # rank_from_end is 1 for a row's last real slot, 2 for the one before, ...
    rank_from_end = valid.flip(1).long().cumsum(1).flip(1)
    return valid & (rank_from_end > num_tokens.unsqueeze(1))


class BatchedCachedLM(TimedModel):
    """A causal LM plus one KV cache for B rows of different lengths."""

    def __init__(self, model, pad_token_id: int = 0, feature_layers=()):
        super().__init__(model)
        self.pad_token_id = int(pad_token_id)
        # Hidden states to keep from every forward (indices into `hidden_states`), for drafters
        # that read the target's features; empty: none are requested, so none are paid for.
        self.feature_layers = tuple(feature_layers)
        self.features = None  # [B, T, len(feature_layers), H] of the last forward
        from transformers import DynamicCache  # here: the core imports without transformers

        self.cache = DynamicCache()
        self.valid = None  # [B, S] bool: slot s holds a real token of row b
        self.lengths = None  # [B] int64: real tokens per row = the next position id
        # The same counts on the host while they are known without reading the device (callers
        # pass what they already read); None: `host_lengths()` reads them once.
        self._host_lengths = None
        self._host_before = None  # the counts before the last forward (a tree chunk's start)

    def host_lengths(self) -> list:
        """Each row's real tokens, on the host: the mirror, or one read of the device."""
        if self._host_lengths is None:
            self._host_lengths = self.lengths.tolist()
        return self._host_lengths

    @property
    def num_slots(self) -> int:
        return 0 if self.valid is None else self.valid.shape[1]

    def _shared_prompts(self, prompts: list, model_inputs: dict):
        """(distinct prompts, [B] index of each row's among them) when rows repeat a prompt
        into an empty cache (a statistical test runs N copies of one prompt), else None: the
        copies then share one forward and the cache is expanded to B rows afterwards."""
        if self.valid is not None or model_inputs:
            return None
        distinct = {}
        index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        if len(distinct) == len(prompts):
            return None
        return [list(p) for p in distinct], index

    def _expand_rows(self, index: list) -> None:
        """Row b of the cache becomes row index[b] of the current one (rows may repeat)."""
        self.select_rows(index)
        if self.features is not None:
            self.features = self.features[torch.tensor(index, device=self.device)]

    def _right_padded(self, prompts: list) -> tuple:
        """Ragged prompts -> (ids `[B, width]` right-padded, valid `[B, width]`, lengths `[B]`).

        Example: [[5, 6, 7], [8]] -> ids [[5, 6, 7], [8, pad, pad]], lengths [3, 1].
        """
        lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        ids = torch.full((len(prompts), int(lengths.max())), self.pad_token_id, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, :len(prompt)] = torch.tensor(prompt, dtype=torch.long)
        valid = torch.arange(ids.shape[1], device=self.device) < lengths.unsqueeze(1)
        return ids.to(self.device), valid, lengths

    @torch.inference_mode()
    def prefill(self, prompts: list, **model_inputs) -> torch.Tensor:
        """Run ragged prompts (lists of ids; right-padded here); return last logits `[B, V]`."""
        shared = self._shared_prompts(prompts, model_inputs)
        if shared is not None:
            distinct, index = shared
            logits = self.prefill(distinct)
            self._expand_rows(index)
            return logits[torch.tensor(index, device=self.device)]
        ids, new_valid, lengths = self._right_padded(prompts)
        last = lengths - 1
        # Only the columns holding some row's last token: [B, K, V] instead of [B, width, V].
        columns = torch.unique(last)
        logits = self.forward(ids, new_valid, keep_columns=columns,
                              new_counts=[len(p) for p in prompts], **model_inputs)
        return logits[torch.arange(len(prompts), device=self.device),
                      torch.searchsorted(columns, last)]

    @torch.inference_mode()
    def fill(self, prompts: list, **model_inputs) -> None:
        """Feed ragged prompts (right-padded here) without reading logits; an empty prompt
        feeds nothing (its row starts empty), and when every prompt is empty nothing runs."""
        self.features = None
        if not any(prompts):
            return
        shared = self._shared_prompts(prompts, model_inputs)
        if shared is not None:
            distinct, index = shared
            self.fill(distinct)
            self._expand_rows(index)
            return
        ids, new_valid, _ = self._right_padded(prompts)
        self.forward(ids, new_valid, keep=1, new_counts=[len(p) for p in prompts],
                     **model_inputs)

    @torch.inference_mode()
    def forward(self, new_ids, new_valid=None, keep: int | None = None,
                keep_columns=None, tree=None, visible=None, new_counts=None,
                **model_inputs) -> torch.Tensor:
        """Append `new_ids [B, T]` (padding where `new_valid` is False); return logits.

        Logits are `[B, keep, V]` for the last `keep` columns (all T when keep is None), or for
        the given `keep_columns`. Put padding on the left of a chunk to read every row's last
        real token at column -1. `model_inputs` go to the model as they are (a draft head's
        features, for example).

        `tree [B, T]`: the chunk is a token tree (`specnb.core.tree`), `tree[b, t]` the column
        of token t's parent in the chunk or -1 (it continues the cache). Each token then sees
        the cache, its ancestors and itself, at position length + depth - 1, so every branch
        is scored as if fed alone; `keep_only` afterwards keeps one branch. `visible [B, T, S]`
        (with `tree`) narrows the cache each token sees to some of its S slots: a tree grown one
        depth per forward (EAGLE-2's dynamic tree) feeds each depth as a chunk that sees the
        prefix and its own ancestors of earlier chunks, not their siblings. A token's position
        is then the number of real slots it sees, plus its depth in the chunk, minus one.
        `new_counts`: each row's number of real new tokens, when the caller knows it on the host
        (with `new_valid`), so the cache's lengths stay known there without a read.
        """
        batch, width = new_ids.shape
        all_real = new_valid is None  # the common case, a few tensor ops cheaper
        if all_real:
            new_valid = torch.ones_like(new_ids, dtype=torch.bool)
        if self.valid is None:
            self.valid = torch.zeros(batch, 0, dtype=torch.bool, device=self.device)
            self.lengths = torch.zeros(batch, dtype=torch.long, device=self.device)
            self._host_lengths = [0] * batch
        if self.valid.shape[0] != batch:
            raise ValueError(f"new_ids has {batch} rows but the cache holds {self.valid.shape[0]}; "
                             f"use select_rows to drop finished rows first")
        if visible is not None and tree is None:
            raise ValueError("visible narrows a tree chunk's view of the cache: pass tree too")
        if tree is not None:
            positions, attention_mask = self._tree_inputs(tree, new_valid, visible)
        else:
            # Each real token's position is its row's count of real tokens before it.
            if all_real:
                positions = self.lengths.unsqueeze(1) + torch.arange(width, device=self.device)
            else:
                positions = (self.lengths.unsqueeze(1) + new_valid.long().cumsum(1) - 1
                             ).clamp_min(0)
            attention_mask = torch.cat([self.valid, new_valid], dim=1).long()
        kwargs = {self._cache_kwarg: self.cache, "use_cache": True, **model_inputs}
        if self.feature_layers:
            kwargs["output_hidden_states"] = True
        if keep_columns is not None and self._can_keep:
            kwargs["logits_to_keep"] = keep_columns
        elif keep is not None and self._can_keep:
            kwargs["logits_to_keep"] = keep

        start = clock_start(self.device)
        out = self.model(input_ids=new_ids if all_real else
                         torch.where(new_valid, new_ids, self.pad_token_id),
                         attention_mask=attention_mask, position_ids=positions, **kwargs)
        self.log.spans.append(clock_stop(self.device, start))
        self.log.num_tokens.append(batch * width)

        self.valid = torch.cat([self.valid, new_valid], dim=1)
        self.lengths = self.lengths + (width if all_real else new_valid.sum(1))
        host = self._host_before = self._host_lengths
        if all_real and host is not None:
            self._host_lengths = [h + width for h in host]
        else:
            self._host_lengths = None if host is None or new_counts is None else \
                [h + int(c) for h, c in zip(host, new_counts)]
        self.model_output = out  # the whole output of the last forward (a draft head reads it)
        if self.feature_layers:
            self.features = torch.stack([out.hidden_states[i] for i in self.feature_layers], 2)
        logits = out.logits
        if keep_columns is not None and not self._can_keep:
            return logits[:, keep_columns]
        return logits if keep is None or self._can_keep else logits[:, -keep:]

    def _tree_inputs(self, tree, new_valid, visible=None) -> tuple:
        """Position ids `[B, T]` and the additive 4D mask `[B, 1, T, S + T]` of a tree chunk."""
        if checking(tree, None):  # host reads: always on the CPU, on a GPU only when strict
            check_parents(tree)
            if visible is not None and (visible.dim() != 3 or tuple(visible.shape) != (
                    *tree.shape, self.num_slots) or visible.dtype != torch.bool):
                raise ValueError(f"visible must be a bool tensor [B, T, S] = "
                                 f"{[*tree.shape, self.num_slots]}, got "
                                 f"{getattr(visible, 'dtype', type(visible).__name__)} "
                                 f"{list(getattr(visible, 'shape', []))}")
        ancestors = tree_ancestors(tree)  # [B, T, T]: ancestors and self
        depths = ancestors.sum(2)  # the pending token's column counts 1
        seen = ancestors & new_valid.unsqueeze(1)
        cache_seen = self.valid.unsqueeze(1).expand(-1, tree.shape[1], -1)
        if visible is None:
            positions = self.lengths.unsqueeze(1) + depths - 1
        else:
            cache_seen = cache_seen & visible
            positions = cache_seen.sum(2) + depths - 1
        allowed = torch.cat([cache_seen, seen], 2)
        dtype = getattr(self.model, "dtype", torch.float32)
        # Additive, in the model's dtype: eager attention adds a mask to its scores, where a
        # bool mask would silently count as 1/0; SDPA takes either.
        mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device).masked_fill_(
            ~allowed, torch.finfo(dtype).min)
        return positions, mask.unsqueeze(1)

    def keep_only(self, kept: torch.Tensor, *, counts=None, used: int | None = None) -> None:
        """After a tree chunk: keep, of the last forward's `T` columns, those where `kept [B, T]`
        is True (the pending token and the accepted branch; ancestors before descendants).
        What the caller already read spares the device a read: `counts`, each row's number of
        kept columns; `used`, the number of columns up to the last one any row keeps."""
        width = kept.shape[1]
        dropped = self.valid[:, -width:] & ~kept
        self.valid = torch.cat([self.valid[:, :-width], self.valid[:, -width:] & kept], 1)
        self.lengths = self.lengths - dropped.sum(1)
        before = self._host_before
        self._host_lengths = None if before is None or counts is None else \
            [b + int(c) for b, c in zip(before, counts)]
        self._tidy(crop=True, num_used=None if used is None else self.num_slots - width + used)

    def rollback(self, num_tokens: torch.Tensor, *, crop: bool = False, counts=None) -> None:
        """Forget the last `num_tokens[b]` real tokens of each row b (its rejected drafts);
        `crop`: also drop the trailing slots no row uses now (see `_tidy`); `counts`: the same
        numbers on the host, when the caller has read them (no read here then)."""
        self.valid = drop_last_real(self.valid, num_tokens)
        self.lengths = self.lengths - num_tokens
        host = self._host_lengths
        self._host_lengths = None if host is None or counts is None else \
            [h - int(c) for h, c in zip(host, counts)]
        self._tidy(crop=crop)

    def _tidy(self, crop: bool, num_used: int | None = None) -> None:
        """Compact when holes pile up; until then they stay in place, masked. After a tree
        chunk (`crop`), first crop the trailing slots no row uses (`num_used` slots are in use,
        read here unless given): a tree leaves many. A chain leaves a rejected draft or two:
        cropping every layer's keys and values for those (two tensor slices per layer, every
        iteration) costs more in per-op overhead than attending over them, so they wait for the
        next compaction. Deciding reads the rows' lengths on the host, known there without a
        read when the caller passed its counts."""
        if crop:
            if num_used is None:
                slot_numbers = torch.arange(1, self.num_slots + 1, device=self.device)
                num_used = int((self.valid.any(0) * slot_numbers).max())
            if num_used < self.num_slots:
                crop_cache(self.cache, self.num_slots - num_used)
                self.valid = self.valid[:, :num_used]
        if self.num_slots - max(self.host_lengths(), default=0) > MAX_HOLES:
            self.compact()

    def compact(self) -> None:
        """Move each row's real slots to the front, in order; drop the holes."""
        width = max(self.host_lengths(), default=0)
        # A stable sort of "is a hole" puts real slots first, keeping their order.
        order = torch.sort((~self.valid).long(), dim=1, stable=True).indices[:, :width]
        for layer in self.cache.layers:
            index = order[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            layer.keys = layer.keys.gather(2, index)
            layer.values = layer.values.gather(2, index)
        self.valid = torch.arange(width, device=self.device) < self.lengths.unsqueeze(1)

    def select_rows(self, rows) -> None:
        """Keep only `rows` (indices into the current batch: a list, or a tensor, after which
        the rows' lengths are read again when next needed), e.g. the unfinished ones."""
        if isinstance(rows, torch.Tensor):
            self._host_lengths = None
        else:
            if self._host_lengths is not None:
                self._host_lengths = [self._host_lengths[i] for i in rows]
            rows = torch.tensor(rows, dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(rows)
        self.valid, self.lengths = self.valid[rows], self.lengths[rows]
