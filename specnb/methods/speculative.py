"""Speculative decoding (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023): the one loop.

Every method that drafts and verifies runs through `speculate`, batched; a single prompt is a
batch of one. What proposes the drafts is a drafter (`specnb.drafters`): a standalone draft
model, copied n-grams, a head that reads the target's features, or none (autoregressive).
Each emitted token is distributed exactly as the target would have produced it.
"""

import torch

from functools import partial

from ..core.sampler import draw, greedy_ids, logits_to_probs
from ..core.typical import POSTERIOR_ALPHA, POSTERIOR_THRESHOLD, check_typical_parameters, \
    typical_verify
from ..core.tree import kept_columns
from ..core.tree_verify import TreeVerdict, greedy_tree_verify, tree_verify
from ..core.verify import Verdict, greedy_verify, verify
from ..core.verify import verify as exact_verify  # `verify` may be swapped (course, tests)
from ..drafters import Drafter, ModelDrafter
from ..core.args import check_int
from ..core.sampler import check_temperature
from .inputs import check_same_vocab, eos_token_ids, prompt_list
from .results import GenerationResult
from .run import Run
from .schedules import as_schedule


def speculate(run: Run) -> None:
    """Algorithm 1 for the rows of `run` until each has hit EOS or its budget."""
    while run.drop_finished():
        # 1. Draft: up to k_b <= γ_b tokens per row (the row's schedule, its budget, context).
        budget = run.draft_budget()
        with run.timer("draft"):
            proposal = run.drafter.propose(budget.max_drafts, width=budget.width,
                                           temperature=run.temperature, generator=run.generator)
        width = proposal.token_ids.shape[1]  # K
        # A token tree (drafts with parents) is scored and verified branch by branch; a chain
        # is the case without parents.
        tree = run.tree_columns(proposal)  # [A, K+1] or None

        # 2. Score: one target forward over [pending token, drafts] gives p at K+1 positions.
        fed = torch.cat([run.pending.unsqueeze(1), proposal.token_ids], 1)  # [A, K+1]
        logits = run.target_lm.forward(fed, tree=tree)

        # 3. Verify: each row keeps a prefix of its drafts (a tree: a branch), then one token of
        #    the target's own. Greedy with the exact rule, p is the one-hot of the target's
        #    argmax and checking only compares ids: the same verdict, without [A, K+1, V] laws.
        target = greedy_ids(logits) if run.greedy else logits_to_probs(logits, run.temperature)
        with run.timer("verify"):
            verdict = (verify_greedy if run.greedy else verify_drafts)(run, proposal, target, tree)

        # 4. Emit: append within each row's budget and up to its EOS; the next pending token.
        kept = run.out.extend(run.rows, verdict.tokens)
        run.pending = verdict.tokens.gather(1, verdict.num_accepted.unsqueeze(1)).squeeze(1)

        # 5. The step's one host read: what each row kept (and its trace, if one is recorded).
        host = run.read_step(proposal, verdict, kept, target)
        accepted = host["num_accepted"]
        emitted = run.advance(host, budget, proposal)

        # 6. Roll back: the target forgets each row's rejected (and padding) drafts; the
        #    drafter rolls its own state back, given what each row kept (and the features).
        if tree is None:
            run.target_lm.rollback(width - verdict.num_accepted,
                                   counts=[width - a for a in accepted])
        else:
            run.target_lm.keep_only(kept_columns(verdict.path), counts=[a + 1 for a in accepted],
                                    used=branch_end(host["path"], accepted))
        run.drafter.update(run.drafter_step(host, proposal, verdict, target, emitted))


def branch_end(paths: list, accepted: list) -> int:
    """The fed columns up to the deepest kept node of any row (column 0 is the pending
    token; node j sits in column j + 1): what a tree chunk leaves in use in the cache."""
    return 1 + max((path[a - 1] + 1 for path, a in zip(paths, accepted) if a), default=0)


def verify_drafts(run: Run, proposal, target_probs, tree) -> Verdict | TreeVerdict:
    """Step 3 against the target's laws `target_probs [A, K+1, V]`. A chain: accept a prefix
    of each row's drafts, then emit a token from the residual at the first rejection, else the
    bonus after the last draft. A tree: walk down from the pending token trying siblings in
    turn; the token drawn where the walk stops is the rule's own (no bonus apart)."""
    if tree is not None:
        return run.tree_verify(target_probs, proposal.probs, proposal.token_ids,
                               proposal.parents, num_drafts=proposal.num_drafts,
                               generator=run.generator, check=False)
    at_bonus = proposal.num_drafts.view(-1, 1, 1).expand(-1, 1, target_probs.shape[-1])
    bonus = draw(target_probs.gather(1, at_bonus).squeeze(1), run.temperature,
                 generator=run.generator, check=False)  # [A]
    # (`run.verify` is the acceptance rule: exact `verify`, or `typical_verify`.)
    return run.verify(target_probs[:, :proposal.token_ids.shape[1]], proposal.probs,
                      proposal.token_ids, bonus.unsqueeze(1), num_drafts=proposal.num_drafts,
                      generator=run.generator, check=False)


def verify_greedy(run: Run, proposal, target_ids, tree) -> Verdict | TreeVerdict:
    """Step 3 at T = 0 with the exact rule, from the target's argmax ids `[A, K+1]`: what
    `verify_drafts` decides on their one-hot laws, bit for bit (tests/test_greedy_verify.py)."""
    if tree is not None:
        return greedy_tree_verify(target_ids, proposal.probs, proposal.token_ids,
                                  proposal.parents, num_drafts=proposal.num_drafts)
    return greedy_verify(target_ids, proposal.probs, proposal.token_ids,
                         num_drafts=proposal.num_drafts)


def generate(target, drafter, input_ids, *, gamma, max_new_tokens, temperature, generator,
             eos_token_id, attention_mask, method, acceptance="exact",
             posterior_threshold=POSTERIOR_THRESHOLD, posterior_alpha=POSTERIOR_ALPHA,
             draft_max_len=None, disable_by_batch_size=None, trace=False) -> GenerationResult:
    """Check the inputs, run the loop, restore the caller's model modes, return the result."""
    temperature = check_temperature(temperature)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got "
                         f"{type(generator).__name__}")
    schedule = as_schedule(gamma)
    rule = acceptance_rule(acceptance, posterior_threshold, posterior_alpha)
    # Trees have one rule, the exact one; a lossy or plugged chain rule cannot check them.
    tree_rule = tree_verify if rule is exact_verify else None
    # Greedy with the library's own rule: verification compares argmax ids (`run.greedy`).
    # A rule plugged in (a course's, a test's) is called as it is, on one-hot laws.
    greedy = temperature == 0 and rule is exact_verify
    if draft_max_len is not None:
        draft_max_len = check_int("draft_max_len", draft_max_len, 1)
    if disable_by_batch_size is not None:
        disable_by_batch_size = check_int("disable_by_batch_size", disable_by_batch_size, 1)
    prompts, max_new_tokens = prompt_list(target, input_ids, attention_mask, max_new_tokens)
    models = [target] + ([drafter.model] if isinstance(drafter, ModelDrafter) else [])
    modes = [model.training for model in models]
    # Inference mode for the whole loop, not only the forwards: each of the loop's many small
    # tensor ops per iteration then skips autograd's bookkeeping, a cost per op that shows where
    # forwards are short (`python -m specnb.bench.overhead` times the loop's own work).
    try:
        with torch.inference_mode():
            run = Run(target, drafter, prompts, max_new_tokens=max_new_tokens,
                      temperature=temperature, generator=generator,
                      eos_ids=eos_token_ids(target, eos_token_id), schedule=schedule,
                      verify=rule, tree_verify=tree_rule, greedy=greedy,
                      draft_max_len=draft_max_len, disable_by_batch_size=disable_by_batch_size,
                      trace=check_trace(trace))
            speculate(run)
            return run.result(method)
    finally:
        for model, training in zip(models, modes):
            model.train(training)


def check_trace(trace) -> bool:
    if not isinstance(trace, bool):
        raise ValueError(f"trace must be True (record every step: `result.trace`) or False, "
                         f"got {trace!r}")
    return trace


def acceptance_rule(acceptance, posterior_threshold, posterior_alpha):
    """"exact" (rejection sampling: the target's law) or "typical" (lossy, see core.typical)."""
    if acceptance == "exact":
        return verify
    if acceptance == "typical":
        check_typical_parameters(posterior_threshold, posterior_alpha)
        return partial(typical_verify, posterior_threshold=posterior_threshold,
                       posterior_alpha=posterior_alpha)
    raise ValueError(f"acceptance must be 'exact' (the target's law) or 'typical' (lossy, "
                     f"Medusa's rule), got {acceptance!r}")


def as_drafter(target, drafter) -> Drafter:
    """A drafter as it is, or a plain draft model wrapped in `ModelDrafter`."""
    if isinstance(drafter, Drafter):
        return drafter
    if not hasattr(drafter, "get_output_embeddings"):
        raise ValueError(f"draft must be a specnb.drafters.Drafter or a transformers causal LM, "
                         f"got {type(drafter).__name__}")
    check_same_vocab(target, drafter)
    return ModelDrafter(drafter)


def speculative(target, draft, input_ids, *, gamma=None, max_new_tokens, temperature=0.0,
                generator=None, eos_token_id=None, attention_mask=None, acceptance="exact",
                posterior_threshold=POSTERIOR_THRESHOLD, posterior_alpha=POSTERIOR_ALPHA,
                draft_max_len=None, disable_by_batch_size=None, trace=False) -> GenerationResult:
    """Speculative decoding of `target`, `draft` proposing up to `gamma` tokens per iteration.

    `draft` is a drafter (`specnb.drafters`) or a causal LM sharing the target's vocabulary.
    `input_ids` is one prompt or a batch (see `specnb.methods.inputs`); rows run together, each
    accepting its own number of drafts.

    - `gamma`: an int, "heuristic" (transformers' schedule) or a `GammaSchedule`
      (`specnb.methods.schedules`, e.g. `CostAwareGamma`); each row adapts on its own. None:
      the drafter's recommended setting (`load_pair()`'s head: the chain or token tree measured
      fastest on this machine, a chain when sampling, `specnb.models.tree_shape`); other
      drafters ask for γ.
    - `acceptance`: "exact" (default: every token has the target's law) or "typical"
      (Medusa's lossy rule with `posterior_threshold`, `posterior_alpha`; greedy-exact at T = 0).
    - `draft_max_len`: rows longer than this stop drafting and continue one target token per
      iteration (a draft model's own context limit applies anyway).
    - `disable_by_batch_size`: while this many rows or more are running, nothing is drafted.
    - `trace`: record every step (`result.trace`: what each row drafted, its q, p, status,
      and what it emitted). Off, the loop reads only the counts it needs, once per step.
    """
    drafter = as_drafter(target, draft)
    if gamma is None:  # the shape depends on the temperature (sampled chains accept more)
        drafter, gamma = drafter.recommended(check_temperature(temperature))
    return generate(target, drafter, input_ids, gamma=gamma,
                    max_new_tokens=max_new_tokens, temperature=temperature, generator=generator,
                    eos_token_id=eos_token_id, attention_mask=attention_mask,
                    method="speculative", acceptance=acceptance,
                    posterior_threshold=posterior_threshold, posterior_alpha=posterior_alpha,
                    draft_max_len=draft_max_len, disable_by_batch_size=disable_by_batch_size,
                    trace=trace)
