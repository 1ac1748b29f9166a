"""`FeatureDrafter`: draft with a `FeatureHead` that reads the target's own hidden states.

The head keeps a KV cache of *entries*; entry t is built from the target's features F_t and
token x_{t+1}. With x_{m-1} the pending token (emitted, not yet fed to the target):

    known     entries 0..m-2 from true features; the last one's output gives q for draft 1
    propose   feed the true entries not yet fed (below); draft 1 from the last output;
              draft j >= 2 from a new entry (o_prev, d_{j-1})
    update    the target scored [x_{m-1}, d1..dK]; row kept a drafts and then token y:
              drop the K-1 entries built from the head's own outputs; the a+1 true entries
              (F_{m-1..m-1+a}, [d1..da, y]) wait to be fed with the next proposal

So after a rejection the cache holds only entries built from the target's true features, and
the next proposal equals one computed from scratch on the accepted prefix (a test checks it).
q is zero outside the draft vocabulary; `verify` stays exact whatever q is.
"""

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.batch_kv import BatchedCachedLM
from ..core.host import reads_are_cheap
from ..core.sampler import draw, greedy_tokens, logits_to_probs
from .base import Drafter, Proposal, Step, check_stop_below
from .dynamic_tree import DynamicTree, check_dynamic, grow
from .head import FeatureHead, HeadConfig
from .trim import TreeCost, best_widths

def right_align(values: torch.Tensor, counts: torch.Tensor, width: int | None = None):
    """Per row, its first `counts[b]` columns of `values [A, W, ...]`, right-aligned in a
    `[A, width, ...]` block (`width`: max(counts) unless given); returns (block, valid).
    Example: [[1, 2, 3], [4, 5, 6]] with counts [1, 3] -> [[·, ·, 1], [4, 5, 6]]."""
    width = int(counts.max()) if width is None else width
    column = torch.arange(width, device=values.device)
    source = column - (width - counts).unsqueeze(1)  # [A, width]
    valid = source >= 0
    index = source.clamp_min(0)
    while index.dim() < values.dim():
        index = index.unsqueeze(-1)
    gathered = values.gather(1, index.expand(-1, -1, *values.shape[2:]))
    return gathered, valid

def check_tree_widths(tree):
    """None (a chain) or a tuple of ints >= 1: children per depth of the head's tree."""
    if tree is None:
        return None
    if isinstance(tree, int) and not isinstance(tree, bool):
        tree = (tree,)
    if not isinstance(tree, (tuple, list)) or not tree or any(
            isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in tree):
        raise ValueError(f"tree must be None (a chain) or widths per depth, ints >= 1 such as "
                         f"(4, 2), got {tree!r}")
    return tuple(tree)


@dataclass(frozen=True)
class Advice:
    """What a `FeatureDrafter.advisor` recommends: `shape` (widths per depth, a chain when all
    are 1, or a DynamicTree) drafted by `head` (None: the drafter's own head); a static tree
    is trimmed each iteration by `trim` (a `TreeCost` of this machine; None: never)."""

    shape: object
    head: FeatureHead | None = None
    trim: TreeCost | None = None


def lm_head_start(embedding, draft_to_target) -> torch.Tensor:
    """The head's LM head as training starts it and stores it: the target's embedding rows of
    the draft vocabulary, in bfloat16, on the CPU."""
    return embedding.weight.detach()[draft_to_target.to(embedding.weight.device)].to(
        torch.bfloat16).cpu().contiguous()


class FeatureDrafter(Drafter):
    """Wrap a `FeatureHead` as a drafter for its target: a chain, a static tree (`tree`: the
    head's runners-up along its best branch; with `trim`, a `TreeCost` of this machine, cut
    each iteration to the nodes that pay, specnb/drafters/trim.py) or EAGLE-2's dynamic tree
    (`dynamic`: (nodes, depth, branch), specnb/drafters/dynamic_tree.py)."""

    def __init__(self, head: FeatureHead, *, stop_below=None, tree=None, dynamic=None,
                 trim=None):
        if not isinstance(head, FeatureHead):
            hint = " (a drafter's head is its .head)" if isinstance(head, FeatureDrafter) else ""
            raise ValueError(f"FeatureDrafter needs a FeatureHead, got {type(head).__name__}"
                             f"{hint}")
        self.head = head
        self.stop_below = check_stop_below(stop_below)
        self.tree = check_tree_widths(tree)
        self.dynamic = check_dynamic(dynamic)
        if self.dynamic is not None and (self.tree is not None or self.stop_below is not None):
            raise ValueError("dynamic grows its own tree from the head's probabilities: pass it "
                             "without tree or stop_below")
        if trim is not None and (self.tree is None or not isinstance(trim, TreeCost)):
            raise ValueError(f"trim cuts a static tree to what pays: pass tree and a "
                             f"specnb.drafters.trim.TreeCost, got tree={self.tree!r}, "
                             f"trim={type(trim).__name__}")
        self.trim = trim
        self.feature_layers = tuple(head.config.feature_layers)
        self.lm = None

    # Set by `load_pair()`: (temperature) -> the widths or the DynamicTree to draft on this
    # machine at that temperature (specnb.models.tree_shape), or an `Advice` naming also the
    # head to draft it with (the int8 copy, specnb.models.int8_draft).
    advisor = None

    def recommended(self, temperature: float = 0.0) -> tuple:
        """(drafter, γ) for `speculative(..., gamma=None)`: a tree as it is (γ = its depth), else
        the shape `advisor` measures for this machine and `temperature`: a chain (this
        drafter), a static or a dynamic tree (a new drafter on the same head)."""
        if self.tree is not None:
            return self, len(self.tree)
        if self.dynamic is not None:
            return self, self.dynamic.depth
        if self.advisor is None:
            raise ValueError("this FeatureDrafter has no recommended shape: pass gamma, give it a "
                             "tree, or load it with specnb.load_pair(), which measures one for "
                             "this machine")
        choice, head, trim = self.advisor(temperature), self.head, None
        if isinstance(choice, Advice):
            head = self.head if choice.head is None else choice.head
            choice, trim = choice.shape, choice.trim
        if isinstance(choice, DynamicTree):
            return FeatureDrafter(head, dynamic=choice), choice.depth
        shape = tuple(choice)
        if all(width == 1 for width in shape):
            chain = self if head is self.head else FeatureDrafter(head, stop_below=self.stop_below)
            return chain, len(shape)
        return FeatureDrafter(head, stop_below=self.stop_below, tree=shape, trim=trim), len(shape)

    def shape_text(self, gamma: int) -> str:
        """What this drafter drafts with `gamma`: 'γ=1', 'tree (2,)', 'dynamic tree (2, 2, 2)',
        followed by ', int8 head' when its head is an int8 copy (specnb.models.int8_draft) and
        ', trimmed' when each iteration trims the tree (`trim`)."""
        notes = ", int8 head" if getattr(self.head, "specnb_cpu_path", None) == "int8" else ""
        notes += ", trimmed" if self.trim is not None else ""
        if self.dynamic is not None:
            d = self.dynamic
            return f"dynamic tree ({d.nodes}, {d.depth}, {d.branch}){notes}"
        return (f"γ={gamma}" if self.tree is None else f"tree {self.tree}") + notes

    def __repr__(self) -> str:
        c = self.head.config
        shape = "" if self.tree is None else f", tree={self.tree}"
        shape += ", trimmed" if self.trim is not None else ""
        if self.dynamic is not None:
            shape = (f", dynamic=(nodes={self.dynamic.nodes}, depth={self.dynamic.depth}, "
                     f"branch={self.dynamic.branch})")
        return (f"FeatureDrafter(layers={list(c.feature_layers)}, "
                f"draft_vocab={c.draft_vocab_size}{shape})")

    @classmethod
    def from_pretrained(cls, path, target, *, stop_below=None, tree=None,
                        dynamic=None) -> "FeatureDrafter":
        """Load a head saved by `save_pretrained` for `target` (whose embedding it shares).
        Its linears are dense; `specnb.models.fast_path.follow_path(drafter.head, target)` puts
        them on the target's CPU path (`load_pair` does)."""
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").exists() or not (path / "model.safetensors").exists():
            raise ValueError(f"no feature head in {path}: expected config.json and "
                             f"model.safetensors (rebuild with `python -m specnb.training.train_head`)")
        config = HeadConfig.from_dict(json.loads((path / "config.json").read_text()))
        if config.target_vocab_size != target.get_input_embeddings().weight.shape[0]:
            raise ValueError(f"the head in {path} was trained for a vocabulary of "
                             f"{config.target_vocab_size} tokens, the target has "
                             f"{target.get_input_embeddings().weight.shape[0]}")
        state = load_file(path / "model.safetensors")
        embedding = target.get_input_embeddings()
        if "lm_head.weight" not in state:  # never trained: the start save_pretrained left out
            state["lm_head.weight"] = lm_head_start(embedding, state["draft_to_target"])
        head = FeatureHead(config, embedding, state["draft_to_target"])
        head.load_state_dict(state)
        parameter = next(target.parameters())
        return cls(head.to(device=parameter.device, dtype=parameter.dtype).eval(),
                   stop_below=stop_below, tree=tree, dynamic=dynamic)

    def save_pretrained(self, path) -> None:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps(self.head.config.to_dict(), indent=2) + "\n")
        state = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).cpu().contiguous()
                 for k, v in self.head.state_dict().items()}  # a head trained on a GPU too
        # An LM head still at its start (the target's rows of the draft vocabulary, frozen unless
        # `train_head --train-lm-head`) is the target's: left out, rebuilt bit for bit at load.
        if torch.equal(state["lm_head.weight"],
                       lm_head_start(self.head.embed[0], self.head.draft_to_target)):
            del state["lm_head.weight"]
        save_file(state, path / "model.safetensors")

    # ---- the contract ----------------------------------------------------------------------
    def start(self, target, prompts, pending, *, eos_ids, features=None) -> None:
        self.lm = BatchedCachedLM(self.head, 0)
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=pending.device)
        self.own_entries, self.ready, self.fill_forwards = 0, features is not None, 0
        # True entries not yet fed, right-aligned: (tokens, valid, features, counts per row)
        self.unfed = None
        if not self.ready:  # one-token prompts: no features yet, nothing to draft from
            return
        device = pending.device
        lengths = torch.tensor([len(p) - 1 for p in prompts], device=device)  # entries per row
        # Entry t = (F_t, x_{t+1}) for t < L - 1: the prompt shifted by one (the pending token
        # last), against the features of the prompt without its pending token.
        tokens = torch.zeros(len(prompts), features.shape[1], dtype=torch.long, device=device)
        for row, prompt in enumerate(prompts):
            tokens[row, :len(prompt) - 1] = torch.tensor(prompt[1:], device=device)
        valid = torch.arange(features.shape[1], device=device) < lengths.unsqueeze(1)
        self.lm.forward(tokens, valid, features=features,
                        new_counts=[len(p) - 1 for p in prompts])
        self.fill_forwards = 1
        self._remember(torch.arange(len(prompts), device=device), (lengths - 1).clamp_min(0))

    def _remember(self, rows, columns, logits=None) -> None:
        """Keep the output of each row's last real entry: the input of the next proposal (and
        its logits, unless the forward already computed them: `logits [A, Vd]`)."""
        self.next_hidden = self.lm.model_output.hidden[rows, columns]  # [A, H]
        self.next_logits = self.head.logits(self.next_hidden) if logits is None else logits

    def catch_up(self) -> None:
        """Feed the true entries that wait (one forward), so `next_logits` gives draft 1."""
        if self.unfed is None:
            return
        tokens, valid, features, counts = self.unfed
        # Right-aligned: every row's last real entry is the last column, the only logits needed.
        logits = self.lm.forward(tokens, valid, keep=1, features=features,
                                 new_counts=counts)[:, -1]
        self.next_hidden, self.next_logits = self.lm.model_output.hidden[:, -1], logits
        self.unfed, self.ready = None, True

    def propose(self, max_drafts, *, width, temperature, generator) -> Proposal:
        if self.tree is not None:
            return self.propose_tree(max_drafts, depth=min(width, len(self.tree)))
        if self.dynamic is not None:
            if width > 0:
                self.catch_up()
            if width > 0 and self.ready:
                return grow(self, max_drafts, self.dynamic, depth=width)
            empty = torch.zeros(max_drafts.shape[0], 0, dtype=torch.long, device=max_drafts.device)
            return Proposal(empty, torch.zeros_like(max_drafts), parents=empty)
        rows = max_drafts.shape[0]
        device = max_drafts.device
        vocab = self.head.config.target_vocab_size
        draft_to_target = self.head.draft_to_target
        ids, probs = [], []
        stopped = torch.zeros(rows, dtype=torch.bool, device=device)  # drafted an EOS
        num_drafts = torch.zeros(rows, dtype=torch.long, device=device)
        if width > 0:
            self.catch_up()
        if not self.ready:
            width = 0
        else:
            hidden, logits = self.next_hidden, self.next_logits
        for j in range(width):
            if j > 0:  # a new entry from the head's own output and the previous draft
                out = self.lm.forward(ids[-1].unsqueeze(1), keep=1,
                                      hidden=hidden.unsqueeze(1).to(self.head.fc.weight.dtype))
                hidden = self.lm.model_output.hidden[:, -1]
                logits = out[:, -1]
            if temperature == 0:  # the argmax; q is its one-hot, never built (nor sent)
                q, drawn = None, greedy_tokens(logits)  # -1: a NaN row
            else:
                q = logits_to_probs(logits, temperature)  # [A, Vd]
                drawn = draw(q, temperature, generator=generator, check=False)
                # q over the target's vocabulary: zero outside the draft vocabulary.
                probs.append(q.new_zeros(rows, vocab).scatter_(
                    1, draft_to_target.expand(rows, -1), q))
            ids.append(torch.where(drawn >= 0, draft_to_target[drawn.clamp_min(0)], -1))
            num_drafts += ~stopped & (j < max_drafts)  # nothing after a stop counts
            stopped |= self.stops(ids[-1], drawn, self.eos, q=q, logits=logits,
                                  temperature=temperature)
            # Every row stopped: the rest would never be counted. A host read, so the CPU only
            # (as in ModelDrafter).
            if j + 1 < width and reads_are_cheap(device) and bool(stopped.all()):
                break
        self.own_entries = max(0, len(ids) - 1)
        if not ids:
            return Proposal(torch.zeros(rows, 0, dtype=torch.long, device=device),
                            torch.zeros(rows, dtype=torch.long, device=device),
                            torch.zeros(rows, 0, vocab, device=device))
        return Proposal(torch.stack(ids, 1), num_drafts, torch.stack(probs, 1) if probs else None)

    def propose_tree(self, max_drafts, *, depth) -> Proposal:
        """A tree along the head's best guesses: at depth d the top `tree[d]` tokens of the
        head's law after the best node of depth d - 1; `depth` is at most len(tree) (γ caps it).
        Only the best node of a depth is fed to the head, so drafting costs a chain's forwards
        and the head's cache holds one branch; the siblings are its runners-up.

            tree (3, 2): depth 1: a b c (best a);  depth 2: a→d a→e   parents [-1,-1,-1,0,0]

        Candidates are the head's top-k, deterministic: `verify` takes them as point masses
        (exact at any temperature). A row keeps the depths its budget `max_drafts` allows;
        `stop_below` ends a row's tree after a depth whose best node the head doubts; `trim`
        (a `TreeCost`) then keeps the sub-tree worth its place in the target's forward
        (`specnb.drafters.trim`)."""
        rows, device = max_drafts.shape[0], max_drafts.device
        if depth > 0:
            self.catch_up()
        if not self.ready:
            depth = 0
        levels, chances = [], []  # per depth: its tokens [A, w_d], and (trim) their q
        stopped = torch.zeros(rows, dtype=torch.bool, device=device)
        live_depths = torch.zeros(rows, dtype=torch.long, device=device)
        hidden, logits = (self.next_hidden, self.next_logits) if depth else (None, None)
        fed = 0  # the head's own entries (one per depth after the first), rolled back in update
        for d in range(depth):
            if d > 0:  # feed the best node of the last depth: its output ranks the next one
                fed += 1
                out = self.lm.forward(levels[-1][:, :1], keep=1,
                                      hidden=hidden.unsqueeze(1).to(self.head.fc.weight.dtype))
                hidden, logits = self.lm.model_output.hidden[:, -1], out[:, -1]
            scores = logits.float()
            top = scores.topk(self.tree[d], -1)
            levels.append(self.head.draft_to_target[top.indices])  # [A, width], best first
            live = ~stopped & (d < max_drafts)
            live_depths += live.long()
            if self.trim is not None:  # q of each candidate; 0 where the row drafts no more
                q = (top.values - scores.logsumexp(-1, keepdim=True)).exp()
                chances.append(q * live.unsqueeze(1))
            if self.stop_below is not None:  # the head's own confidence in its best guess
                confidence = torch.softmax(scores, -1).gather(1, top.indices[:, :1])
                stopped |= confidence.squeeze(1) < self.stop_below
            stopped |= torch.isin(levels[-1][:, 0], self.eos)
            if d + 1 < depth and reads_are_cheap(device) and bool(stopped.all()):
                break
        self.own_entries = fed
        if self.trim is not None and levels:
            kept = best_widths(chances, self.trim)
            levels = [level[:, :width] for level, width in zip(levels, kept)]
        if not levels:
            empty = torch.zeros(rows, 0, dtype=torch.long, device=device)
            return Proposal(empty, torch.zeros(rows, dtype=torch.long, device=device),
                            parents=empty)
        # Depth by depth, best first: the best node of a depth is the parent of the next one.
        counts = [0] + list(itertools.accumulate(level.shape[1] for level in levels))
        parents = [-1] * counts[1]
        for d in range(1, len(levels)):
            parents += [counts[d - 1]] * levels[d].shape[1]
        # A row's drafts: the nodes of the depths it was live at (a prefix of the depths).
        num_drafts = torch.tensor(counts, device=device)[live_depths.clamp(max=len(levels))]
        parent_ids = torch.tensor(parents, device=device).expand(rows, -1).clone()
        return Proposal(torch.cat(levels, 1), num_drafts, parents=parent_ids)

    def update(self, step: Step) -> None:
        rows = step.num_accepted.shape[0]
        if self.own_entries:
            # A dynamic tree's entries are many and every row's last: cropped, not left as holes.
            self.lm.rollback(torch.full((rows,), self.own_entries, device=step.tokens.device),
                             crop=self.dynamic is not None, counts=[self.own_entries] * rows)
        self.own_entries = 0
        counts = step.num_accepted + 1  # kept drafts, then the next token
        accepted = step.accepted if step.accepted is not None else step.num_accepted.tolist()
        host_counts = [a + 1 for a in accepted]
        fewest, width = min(host_counts), max(host_counts)
        if fewest == width:  # every row kept as many (always, for one row): no gathers
            tokens, features = step.tokens[:, :width], step.features[:, :width]
            valid = None  # every entry real
        else:
            tokens, valid = right_align(step.tokens, counts, width)
            features, _ = right_align(step.features, counts, width)
        # Fed when drafting resumes, in one forward: steps without drafts (γ = 0, a disabled
        # batch) cost the head nothing.
        if self.unfed is not None:
            old_tokens, old_valid, old_features, old_counts = self.unfed
            if (old_valid is None) != (valid is None):
                old_valid, valid = (torch.ones_like(t, dtype=torch.bool) if v is None else v
                                    for t, v in ((old_tokens, old_valid), (tokens, valid)))
            tokens, features = torch.cat([old_tokens, tokens], 1), \
                torch.cat([old_features, features], 1)
            valid = None if valid is None else torch.cat([old_valid, valid], 1)
            host_counts = None if old_counts is None else \
                [a + b for a, b in zip(old_counts, host_counts)]
        # valid None: every entry real; host_counts: each row's real entries, on the host
        self.unfed = (tokens.clamp_min(0), valid, features, host_counts)

    def select_rows(self, keep) -> None:
        self.lm.select_rows(keep)
        if self.unfed is not None:
            tokens, valid, features, _ = self.unfed  # the host counts: read again when fed
            self.unfed = (tokens[keep], None if valid is None else valid[keep], features[keep],
                          None)
        if self.ready:
            self.next_hidden, self.next_logits = self.next_hidden[keep], self.next_logits[keep]
