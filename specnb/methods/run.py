"""The bookkeeping beside the speculative loop: rows, budgets, timing, the step's host read.

`Run` owns what the loop's arithmetic should not show: which rows are still running, each
row's length and remaining budget on the host, the per-step clocks, the one host read per step,
dropping finished rows from every cache, and the final result. Each job is its own method:
`read_step` (the one read), `advance` (the rows' state and the statistics), `drafter_step`
(what the drafter is told); the trace is an observer (`TraceRecorder`) that only a run asked
for one has, and only it reads the drafts' probabilities. The algorithm itself lives in
`specnb.methods.speculative.speculate`.
"""

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..core.batch_kv import BatchedCachedLM
from ..core.host import to_host
from ..core.timed import clock_start, clock_stop, seconds
from ..core.sampler import argmax
from ..core.tree import kept_columns
from ..drafters.base import Step
from ..drafters.model import pad_token_id
from .results import BatchOutput, DraftedToken, EmittedToken, GenerationResult, Iteration, Stats


@dataclass
class Budget:
    """What each running row may draft this iteration: the schedule's `gammas` (host), the
    `drafts` allowed after budget and context caps (host), the same as `max_drafts [A]`."""

    gammas: list
    drafts: list
    max_drafts: torch.Tensor

    @property
    def width(self) -> int:
        return max(self.drafts, default=0)


class Run:
    """State of one batched generation, from the prompts' fill to the result."""

    def __init__(self, target, drafter, prompts, *, max_new_tokens, temperature, generator,
                 eos_ids, schedule, verify, tree_verify=None, greedy=False, draft_max_len=None,
                 disable_by_batch_size=None, trace=False):
        self.drafter, self.temperature, self.generator = drafter, temperature, generator
        # verify: the acceptance rule (exact `verify` or `typical_verify`, parameters bound);
        # tree_verify: the rule for token trees (None: trees are refused).
        self.schedule, self.verify, self.tree_verify = schedule, verify, tree_verify
        # greedy: T = 0 with the exact rule, checked from the target's argmax ids alone
        self.greedy = greedy
        self.draft_max_len, self.disable_by_batch_size = draft_max_len, disable_by_batch_size
        schedule.start(len(prompts))
        self.eos_ids, self.max_new_tokens = eos_ids, max_new_tokens
        layers = drafter.feature_layers
        self.target_lm = BatchedCachedLM(target, pad_token_id(target), feature_layers=layers)
        self.device = self.target_lm.device
        self.row_ids = list(range(len(prompts)))  # original index of each running row (host)
        self.rows = torch.arange(len(prompts), device=self.device)  # the same, on the device
        self.lengths = [len(p) for p in prompts]  # tokens per row, the pending one included
        self.counts = [0] * len(prompts)  # new tokens kept per row
        self.out = BatchOutput(len(prompts), max_new_tokens, eos_ids, self.device)
        self.stats, self.clock = Stats(), {}
        self.recorder = TraceRecorder() if trace else None  # the trace, when asked for
        self.start = time.perf_counter()
        # 0. The prompts, all but their last token, fill the target's cache. Each row's last
        #    prompt token is its pending token, fed with the first drafts, so the drafter can
        #    already propose from the prompt (a copy of it, say) in the first iteration.
        self.target_lm.fill([p[:-1] for p in prompts])
        self.fill_forwards = self.target_lm.num_forwards  # 0 or 1; not a decoding forward
        self.pending = torch.tensor([p[-1] for p in prompts], device=self.device)
        self.finished = [False] * len(prompts)
        self.step = 0
        drafter.start(target, prompts, self.pending, eos_ids=eos_ids,
                      features=self.target_lm.features)

    @contextmanager
    def timer(self, name: str):
        """Time a section of the step on the device's clock (events on a GPU: no wait now)."""
        start = clock_start(self.device)
        yield
        self.clock[name] = clock_stop(self.device, start)

    def draft_budget(self) -> "Budget":
        """Per row: the schedule's γ, at most the remaining budget − 1 (the target adds one
        token), and what the drafter's context (or `draft_max_len`) allows: a row past it
        continues without drafts. No row drafts while `disable_by_batch_size` rows or more run."""
        lengths = [self.lengths[r] for r in self.row_ids]
        gammas = self.schedule.gammas(self.row_ids)
        if self.disable_by_batch_size is not None and \
                len(self.row_ids) >= self.disable_by_batch_size:
            gammas = [0] * len(self.row_ids)
        caps = self.drafter.max_drafts(lengths)
        if self.draft_max_len is not None:  # a draft at position L - 1 + j needs L - 1 + j < max
            caps = [min(self.draft_max_len - length + 1, math.inf if cap is None else cap)
                    for length, cap in zip(lengths, caps)]
        drafts = [max(0, min(gamma, self.max_new_tokens - self.counts[r] - 1,
                             gamma if cap is None else cap))
                  for gamma, r, cap in zip(gammas, self.row_ids, caps)]
        return Budget(gammas, drafts, torch.tensor(drafts, dtype=torch.long, device=self.device))

    def tree_columns(self, proposal) -> torch.Tensor | None:
        """For a tree proposal, each fed column's parent column in [pending, nodes] (the
        pending token continues the cache: -1); None for a chain."""
        if proposal.parents is None:
            return None
        if self.tree_verify is None:
            raise ValueError("token trees are verified by the exact rule only: "
                             "acceptance='typical' or a plugged acceptance rule checks chains")
        parents = proposal.parents
        pending = torch.full((parents.shape[0], 1), -1, dtype=parents.dtype, device=parents.device)
        return torch.cat([pending, parents.clamp_min(-1) + 1], 1)

    def read_step(self, proposal, verdict, kept, target) -> dict:
        """The step's one host read: per row, what it drafted and kept and whether it finished
        (and for a tree, its accepted branch); with a trace, also what the trace shows."""
        tensors = dict(num_drafts=proposal.num_drafts, num_accepted=verdict.num_accepted,
                       kept=kept, tokens=verdict.tokens, finished=self.out.finished[self.rows])
        if proposal.parents is not None:
            tensors["path"] = verdict.path
        if self.recorder is not None:
            tensors.update(self.recorder.tensors(proposal, verdict, target))
        return to_host(**tensors)

    def advance(self, host: dict, budget, proposal) -> list:
        """The rows' state from the step's read: new tokens, lengths, finished; the statistics
        and the schedule. Returns each row's emitted tokens (host lists)."""
        self.step += 1
        emitted_rows = []
        for i, row in enumerate(self.row_ids):
            kept = host["kept"][i]
            emitted_rows.append(host["tokens"][i][:kept])
            self.counts[row] += kept
            self.lengths[row] += kept
            self.finished[row] = host["finished"][i]
        stats = self.stats
        stats.drafted += sum(host["num_drafts"])
        stats.accepted += sum(host["num_accepted"])
        for i, (drafted, accepted) in enumerate(zip(host["num_drafts"], host["num_accepted"])):
            if drafted:  # an engine's "draft": a row's step that drafted anything
                stats.drafting_steps += 1
                # positions: the γ (a tree: the depth) the row's budget allowed
                depth = max(budget.drafts[i], accepted)
                positions = stats.accepted_per_position
                positions += [0] * (depth - len(positions))
                for j in range(accepted):
                    positions[j] += 1
        self.schedule.update(self.row_ids, host["num_drafts"], host["num_accepted"])
        if self.recorder is not None:
            self.recorder.observe(self, host, budget, proposal, emitted_rows)
        return emitted_rows

    def drafter_step(self, host: dict, proposal, verdict, target, emitted_rows) -> Step:
        """What the drafter is told: the kept tokens (device and host), the target's features
        at the kept positions if it reads them, and the target's ids if it asked for them."""
        features = self.target_lm.features
        if proposal.parents is not None and features is not None:
            # The pending token's features, then the accepted branch's.
            path = verdict.path
            pending = torch.zeros(path.shape[0], 1, dtype=path.dtype, device=path.device)
            columns = torch.cat([pending, path.clamp_min(-1) + 1], 1)  # -1 after: column 0
            features = features.gather(1, columns[:, :, None, None].expand(
                -1, -1, *features.shape[2:]))
        target_ids = None
        if self.drafter.reads_target_ids:  # greedy: the ids checked against; else their laws'
            target_ids = target if target.dim() == 2 else \
                torch.where(target.isfinite().all(-1), argmax(target), -1)
        return Step(verdict.tokens, verdict.num_accepted, emitted_rows, features,
                    proposal.token_ids.shape[1], target_ids, accepted=host["num_accepted"])

    def drop_finished(self) -> bool:
        """Drop finished rows from the batch and every cache; False when none is left."""
        keep = [i for i, row in enumerate(self.row_ids) if not self.finished[row]]
        if len(keep) < len(self.row_ids) and keep:
            keep_tensor = torch.tensor(keep, device=self.device)
            self.row_ids = [self.row_ids[i] for i in keep]
            self.rows, self.pending = self.rows[keep_tensor], self.pending[keep_tensor]
            self.target_lm.select_rows(keep)  # a host list: its lengths stay known there
            self.drafter.select_rows(keep_tensor)
        return bool(keep)

    def result(self, method: str) -> GenerationResult:
        stats = self.stats
        stats.wall_s = time.perf_counter() - self.start
        stats.new_tokens, stats.iterations = sum(self.counts), self.step
        # Decoding forwards: the one that filled the cache with the prompts does not count
        # (autoregressive decoding then makes exactly one forward per token); its time does.
        stats.target_forwards = self.target_lm.num_forwards - self.fill_forwards
        stats.target_s = self.target_lm.forward_seconds
        stats.decoding_target_s = sum(self.target_lm.log.seconds[self.fill_forwards:])
        stats.decoding_steps = self.step
        stats.draft_forwards = self.drafter.num_forwards
        stats.draft_s = self.drafter.forward_seconds
        trace = None if self.recorder is None else \
            sorted(self.recorder.iterations, key=lambda it: (it.row, it.step))
        return GenerationResult(method, self.out.tokens(), stats, trace)


class TraceRecorder:
    """The trace, as an observer of the loop: per row and step, what was drafted (token, q, p,
    min(1, p/q), Σ min(p, q), status) and emitted, and the step's clocks. Its tensors join the
    step's one host read; a run without a recorder computes and reads none of them."""

    def __init__(self):
        self.iterations = []

    @staticmethod
    def tensors(proposal, verdict, target) -> dict:
        """What the trace reads, on the device. `target` is what the drafts were checked
        against: the laws `[A, K+1, V]`, or greedy, the argmax ids `[A, K+1]`."""
        width = proposal.token_ids.shape[1]
        tree = proposal.parents is not None
        if proposal.probs is None:
            overlap = verdict.p_of_draft
        else:  # Σ min(p, q) against the law each draft was checked at (a tree: its parent's)
            at = (proposal.parents + 1).clamp_min(0) if tree else None
            if target.dim() == 2:  # p one-hot at the argmax: Σ min(p, q) = q(argmax)
                best = (target[:, :width] if at is None else target.gather(1, at)).clamp_min(0)
                overlap = proposal.probs.gather(-1, best.unsqueeze(-1)).squeeze(-1)
            else:  # a chain's laws are a view; a tree's are gathered
                laws = target[:, :width] if at is None else \
                    target.gather(1, at[..., None].expand(-1, -1, target.shape[-1]))
                overlap = torch.minimum(laws, proposal.probs).sum(-1)  # [A, K]
        tensors = dict(drafts=proposal.token_ids, q=verdict.q_of_draft, p=verdict.p_of_draft,
                       accept_prob=verdict.accept_probs, overlap=overlap)
        if tree:  # where each node sits and what became of it
            tensors.update(parents=proposal.parents, on_branch=kept_columns(verdict.path)[:, 1:],
                           tried=verdict.tried)
        return tensors

    def observe(self, run, host: dict, budget, proposal, emitted_rows) -> None:
        """One `Iteration` per running row, from the step's host read."""
        tree = "parents" in host
        clock = {name: seconds(span) for name, span in run.clock.items()}
        target_s = run.target_lm.log.seconds[-1]
        for i, row in enumerate(run.row_ids):
            num_drafts, num_accepted = host["num_drafts"][i], host["num_accepted"][i]
            if tree:
                statuses = ["accepted" if host["on_branch"][i][j] else
                            "rejected" if host["tried"][i][j] else "unverified"
                            for j in range(num_drafts)]
            else:
                statuses = ["accepted" if j < num_accepted else
                            "rejected" if j == num_accepted else "unverified"
                            for j in range(num_drafts)]
            drafted = [DraftedToken(host["drafts"][i][j], host["q"][i][j], host["p"][i][j],
                                    host["accept_prob"][i][j], host["overlap"][i][j],
                                    statuses[j], host["parents"][i][j] if tree else None)
                       for j in range(num_drafts)]
            if tree:  # after the last kept node (or the pending token): were children tried?
                last = host["path"][i][num_accepted - 1] if num_accepted else -1
                all_passed = not any(host["tried"][i][j] and host["parents"][i][j] == last
                                     for j in range(num_drafts))
            else:
                all_passed = num_accepted == num_drafts
            kinds = ["accepted"] * num_accepted + [
                "target" if num_drafts == 0 else "bonus" if all_passed else "resampled"]
            self.iterations.append(Iteration(
                drafted=drafted,
                emitted=[EmittedToken(t, k) for t, k in zip(emitted_rows[i], kinds)],
                draft_s=clock.get("draft", 0.0), target_s=target_s,
                verify_s=clock.get("verify", 0.0), row=row, step=run.step,
                info=proposal.info[i] if proposal.info else {},
                gamma=budget.gammas[i]))
