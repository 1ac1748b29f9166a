"""Tests of `specnb.course.checks`: right solutions pass, classic mistakes fail with the right hint.

Each exercise's check is run on a reference solution (written here from scratch, as a student
would) and on deliberately broken copies of it; a broken copy must raise `CheckFailed` whose
message carries the hint that names its mistake. Checks that run a model use the tiny random
Llama built inside `specnb.course.checks`, so nothing here needs the embedded model.
"""

import json
import math

import pytest
import torch

from specnb.course import checks
from specnb.course.checks import CheckFailed
from specnb.core import count_converged, ngram_lookup
from specnb.methods.results import GenerationResult, Stats


# ----------------------------------------------------------------------------------------------
# Exercise 1: one position
# ----------------------------------------------------------------------------------------------

def accept_probability(p_x, q_x):
    if q_x == 0:
        return 1.0 if p_x > 0 else 0.0
    return min(1.0, p_x / q_x)


def residual_distribution(target_probs, draft_probs):
    excess = (target_probs - draft_probs).clamp_min(0.0)
    return excess / excess.sum() if excess.sum() > 0 else target_probs.clone()


def make_verify_one(accept=accept_probability, residual=residual_distribution):
    def verify_one(target_probs, draft_probs, draft_token, generator):
        u = torch.rand((), generator=generator)
        if u < accept(float(target_probs[draft_token]), float(draft_probs[draft_token])):
            return draft_token
        return int(torch.multinomial(residual(target_probs, draft_probs), 1, generator=generator))
    return verify_one


def expect_failure(check, fn, *hints, **kwargs):
    with pytest.raises(CheckFailed) as info:
        check(fn, **kwargs)
    message = str(info.value)
    for hint in hints:
        assert hint in message, message
    return message


def test_exercise_1_reference_passes(capsys):
    checks.check_accept_probability(accept_probability)
    checks.check_residual(residual_distribution)
    checks.check_verify_one(make_verify_one())
    out = capsys.readouterr().out
    assert out.count("✓") == 3 and "accept_probability passed" in out


def test_accept_probability_without_min():
    message = expect_failure(checks.check_accept_probability,
                             lambda p, q: p / q if q else float(p > 0),
                             "did you forget the min(1, ·)?")
    assert "input:" in message and "expected:" in message and "got:" in message


@pytest.mark.parametrize("broken, hint", [
    (lambda p, q: min(1.0, p / q), "q(x) = 0 means the draft could not have proposed x"),
    (lambda p, q: min(1.0, q / p) if p else 0.0, "upside down"),
])
def test_accept_probability_mistakes(broken, hint):
    expect_failure(checks.check_accept_probability, broken, hint)


@pytest.mark.parametrize("broken, hint", [
    (lambda p, q: (p - q).clamp_min(0) / (p - q).clamp_min(0).sum(), "p = q"),  # NaN at p = q
    (lambda p, q: (p - q) / (p - q).clamp_min(0).sum(), "negative entries"),
    (lambda p, q: (p - q).clamp_min(0), "do not sum to 1"),
    (lambda p, q: p.clone(), "you returned p itself"),
    (lambda p, q: residual_distribution(q, p), "the sign is flipped"),
])
def test_residual_mistakes(broken, hint):
    expect_failure(checks.check_residual, broken, hint)


def test_verify_one_forgetting_the_residual_is_caught_in_law():
    expect_failure(checks.check_verify_one,
                   make_verify_one(residual=lambda p, q: p), "resample from p",
                   "χ² p-value")


def test_verify_one_never_rejecting_is_caught():
    expect_failure(checks.check_verify_one, lambda p, q, token, generator: token, "p = 0")


def test_verify_one_global_rng_is_caught():
    def global_rng(target_probs, draft_probs, draft_token, generator):
        return make_verify_one()(target_probs, draft_probs, draft_token, None)
    expect_failure(checks.check_verify_one, global_rng, "`generator` argument")


def test_not_implemented_says_so():
    def stub(p_x, q_x):
        raise NotImplementedError()
    expect_failure(checks.check_accept_probability, stub, "not implemented yet",
                   "raise NotImplementedError()")


def test_student_exceptions_name_the_input():
    message = expect_failure(checks.check_residual, lambda p, q: p[99], "raised IndexError")
    assert "target_probs = [" in message


# ----------------------------------------------------------------------------------------------
# Exercise 2: batched verify
# ----------------------------------------------------------------------------------------------

def reference_verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, generator,
                     *, use_min=True, residual=True, bonus=True, stop=True):
    """Row by row, as a student might write it; the switches are the classic mistakes."""
    batch, gamma, _ = target_probs.shape
    out = torch.full((batch, gamma + 1), -1, dtype=torch.long)
    for b in range(batch):
        for j in range(gamma):
            x = int(draft_token_ids[b, j])
            p, q = target_probs[b, j], draft_probs[b, j]
            ratio = float(p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)
            if torch.rand((), generator=generator) < (min(1.0, ratio) if use_min else ratio):
                out[b, j] = x
                continue
            law = residual_distribution(p, q) if residual else p
            out[b, j] = int(torch.multinomial(law, 1, generator=generator))
            if stop:
                break
        else:
            if bonus:
                out[b, gamma] = bonus_token_ids[b, 0]
    return out


def test_exercise_2_reference_passes(capsys):
    checks.check_verify(reference_verify, batch=4000)
    assert "✓ verify passed" in capsys.readouterr().out


@pytest.mark.parametrize("switch, hint", [
    ("residual", "(p − q)+"),
    ("bonus", "did you forget the bonus?"),
    ("stop", "stop at the first rejected draft"),
])
def test_verify_mistakes(switch, hint):
    def broken(*args):
        return reference_verify(*args, **{switch: False})
    expect_failure(checks.check_verify, broken, hint, batch=4000)


def test_verify_wrong_padding_and_dtype():
    def zero_padded(*args):
        out = reference_verify(*args)
        return out.clamp_min(0)
    expect_failure(checks.check_verify, zero_padded, "input:", batch=4000)
    expect_failure(checks.check_verify, lambda *args: reference_verify(*args).int(), "int64",
                   batch=4000)


def test_verify_library_passes():
    from specnb.core import verify
    checks.check_verify(lambda p, q, ids, bonus, g: verify(p, q, ids, bonus, generator=g).tokens,
                        batch=4000)


# ----------------------------------------------------------------------------------------------
# Exercise 3: n-gram lookup
# ----------------------------------------------------------------------------------------------

def reference_lookup(tokens, n_max, n_min, k, *, offset=None, self_match=False):
    length = len(tokens)
    for n in range(min(n_max, length - 1 + self_match), n_min - 1, -1):
        tail, best = tokens[length - n:], None
        for start in range(length - n - (0 if self_match else 1), -1, -1):
            if tokens[start:start + n] == tail:
                continuation = min(k, length - start - n)
                if best is None or continuation > best[0]:
                    best = (continuation, start)
        if best is not None and k > 0:
            source = best[1] + (n if offset is None else offset)
            return tokens[source:source + best[0]]
    return []


def test_exercise_3_reference_and_library_pass(capsys):
    checks.check_ngram_lookup(reference_lookup)
    checks.check_ngram_lookup(lambda tokens, n_max, n_min, k: ngram_lookup(
        tokens, n_max=n_max, n_min=n_min, k=k))  # an NgramDraft is accepted too
    assert capsys.readouterr().out.count("✓ ngram_lookup passed") == 2


@pytest.mark.parametrize("broken, hint", [
    (lambda t, n_max, n_min, k: reference_lookup(t, n_max, n_min, k, offset=0), "off by one"),
    (lambda t, n_max, n_min, k: reference_lookup(t, n_max, n_min, k, self_match=True),
     "the tail matched itself"),
    (lambda t, n_max, n_min, k: reference_lookup(t, n_max, n_min, k + 1), "longer than k"),
    (lambda t, n_max, n_min, k: reference_lookup(t, n_min, n_min, k), "longest n first"),
])
def test_ngram_mistakes(broken, hint):
    expect_failure(checks.check_ngram_lookup, broken, hint)


# ----------------------------------------------------------------------------------------------
# Exercise 4: Jacobi
# ----------------------------------------------------------------------------------------------

def reference_step(lm, prefix, guesses, *, shift=False, all_matches=False):
    sequence = prefix + (guesses if shift else guesses[:-1])
    refreshed = lm.logits(sequence, keep=len(guesses))[0].argmax(-1).tolist()
    if all_matches:
        return refreshed, max(1, sum(a == b for a, b in zip(guesses, refreshed)))
    return refreshed, count_converged(guesses, refreshed)


def make_decode(step=reference_step, trim=True, emit_all=False, fresh_guesses=False):
    def jacobi_decode(lm, prompt, block, max_new_tokens):
        new_tokens, guesses = [], [prompt[-1]] * block
        while len(new_tokens) < max_new_tokens:
            if trim:
                guesses = guesses[:max_new_tokens - len(new_tokens)]
            refreshed, num_converged = step(lm, prompt + new_tokens, guesses)
            new_tokens += refreshed if emit_all else refreshed[:num_converged]
            guesses = refreshed[num_converged:] + [refreshed[-1]] * num_converged
            guesses = [prompt[-1]] * block if fresh_guesses else guesses[:block]
        return new_tokens
    return jacobi_decode


@pytest.mark.slow  # every Jacobi check case, step and loop: ~35 s on 2 cores
def test_exercise_4_reference_passes(capsys):
    checks.check_jacobi_step(reference_step)
    checks.check_jacobi_loop(make_decode())
    out = capsys.readouterr().out
    assert "✓ jacobi_step passed" in out and "✓ jacobi_decode passed" in out


@pytest.mark.parametrize("broken, hint", [
    (lambda lm, p, g: reference_step(lm, p, g, shift=True), "shifted by one"),
    (lambda lm, p, g: reference_step(lm, p, g, all_matches=True), "*leading* run"),
    (lambda lm, p, g: (reference_step(lm, p, g)[0], 0), "at least 1"),
])
def test_jacobi_step_mistakes(broken, hint):
    expect_failure(checks.check_jacobi_step, broken, hint)


def test_jacobi_step_one_forward_per_position_is_caught():
    def slow_step(lm, prefix, guesses):
        refreshed = [int(lm.logits(prefix + guesses[:i], keep=1)[0, -1].argmax())
                     for i in range(len(guesses))]
        return refreshed, count_converged(guesses, refreshed)
    expect_failure(checks.check_jacobi_step, slow_step, "one call")


@pytest.mark.parametrize("kwargs, hint", [
    (dict(trim=False), "too many tokens"),
    (dict(emit_all=True), "first wrong token"),
    (dict(fresh_guesses=True), "start each block from the unconverged refreshed guesses"),
])
def test_jacobi_loop_mistakes(kwargs, hint):
    expect_failure(checks.check_jacobi_loop, make_decode(**kwargs), hint)


def test_plain_greedy_loop_is_not_jacobi():
    def one_token_at_a_time(lm, prompt, block, max_new_tokens):
        tokens = []
        for _ in range(max_new_tokens):
            tokens.append(int(lm.logits(prompt + tokens, keep=1)[0, -1].argmax()))
        return tokens
    expect_failure(checks.check_jacobi_loop, one_token_at_a_time, "forwards")


@pytest.mark.slow  # every Jacobi check case, step and loop: ~35 s on 2 cores
def test_reference_loop_over_the_library_step_passes():
    from specnb.core import jacobi_step

    def library_step(lm, prefix, guesses):
        step = jacobi_step(lm, prefix, guesses)
        return step  # a JacobiStep is accepted as well as a tuple
    checks.check_jacobi_step(library_step)
    checks.check_jacobi_loop(make_decode(step=lambda lm, p, g: tuple(
        vars(jacobi_step(lm, p, g)).values())))


# ----------------------------------------------------------------------------------------------
# Exercise 5: α̂, ĉ, the speedup formula and γ*
# ----------------------------------------------------------------------------------------------

def alpha_from_trace(result):
    overlaps = [d.overlap for it in result.trace for d in it.drafted if d.status != "unverified"]
    return sum(overlaps) / len(overlaps) if overlaps else float("nan")


def cost_ratio(spec, ar):
    return (spec.stats.draft_s / spec.stats.draft_forwards) / (
        ar.stats.target_s / ar.stats.target_forwards)


def speedup(alpha, gamma, c):
    tokens = gamma + 1 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return tokens / (gamma * c + 1)


def best_gamma(alpha, c, max_gamma):
    return max(range(max_gamma + 1), key=lambda g: speedup(alpha, g, c))


def step_mean(run):
    return sum(it.target_s for it in run.trace) / len(run.trace)


def checking_cost(spec, ar):
    return step_mean(spec) / step_mean(ar)


def speedup_checked(alpha, gamma, c, b):
    return speedup(alpha, gamma, c) * (gamma * c + 1) / (gamma * c + b)


def test_exercise_5_reference_passes(capsys):
    checks.check_estimate_alpha(alpha_from_trace)
    checks.check_cost_ratio(cost_ratio)
    checks.check_predicted_speedup(speedup)
    checks.check_best_gamma(best_gamma)
    checks.check_checking_cost(checking_cost)
    checks.check_speedup_checked(speedup_checked)
    assert capsys.readouterr().out.count("✓") == 6


@pytest.mark.parametrize("check, broken, hint", [
    (checks.check_estimate_alpha, lambda r: sum(d.overlap for it in r.trace for d in it.drafted)
     / sum(len(it.drafted) for it in r.trace), "skip the unverified drafts"),
    (checks.check_estimate_alpha, lambda r: r.stats.accepted / r.stats.drafted,
     "not accepted / drafted"),
    (checks.check_cost_ratio, lambda s, a: cost_ratio(s, s), "autoregressive run's mean target"),
    (checks.check_cost_ratio, lambda s, a: s.stats.draft_s / a.stats.target_s, "mean times"),
    (checks.check_predicted_speedup, lambda a, g, c: (1 - a ** (g + 1)) / (1 - a) / (g * c + 1),
     "0/0"),
    (checks.check_predicted_speedup, lambda a, g, c: speedup(a, g - 1, c) * (g * c) /
     (g * c) if g else speedup(a, g, c), "input:"),
    (checks.check_best_gamma, lambda a, c, m: max(range(1, m + 1), key=lambda g: speedup(a, g, c)),
     "γ = 0"),
    (checks.check_best_gamma, lambda a, c, m: max(range(m), key=lambda g: speedup(a, g, c)),
     "range(max_gamma + 1)"),
    (checks.check_checking_cost, lambda s, a: (s.stats.target_s / s.stats.target_forwards) / (
        a.stats.target_s / a.stats.target_forwards), "prompt's forward"),
    (checks.check_checking_cost, lambda s, a: sum(it.target_s for it in s.trace) / sum(
        it.target_s for it in a.trace), "not the totals"),
    (checks.check_checking_cost, lambda s, a: checking_cost(a, s), "upside down"),
    (checks.check_speedup_checked, lambda a, g, c, b: speedup(a, g, c), "γc + b"),
    (checks.check_speedup_checked, lambda a, g, c, b: speedup(a, g, c) / b, "replaces the 1"),
])
def test_exercise_5_mistakes(check, broken, hint):
    expect_failure(check, broken, hint)


def test_measurements_and_timing_table_check_consistency_only(capsys):
    spec = checks.gamma._fake_run(torch.Generator().manual_seed(0), 6)
    spec.stats.draft_forwards, spec.stats.draft_s = 10, 0.2
    ar = GenerationResult("autoregressive", [[]], Stats(), [])
    ar.stats.target_forwards, ar.stats.target_s = 8, 0.8
    alpha_hat, c_hat = alpha_from_trace(spec), cost_ratio(spec, ar)
    best = best_gamma(alpha_hat, c_hat, 16)
    checks.check_measurements(alpha_hat, c_hat, best, spec, ar)
    with pytest.raises(CheckFailed, match="best_gamma"):
        checks.check_measurements(alpha_hat, c_hat, best + 1, spec, ar)
    with pytest.raises(CheckFailed, match="alpha_from_trace"):
        checks.check_measurements(spec.stats.draft_yield + 0.1, c_hat, best, spec, ar)

    rows = [{"gamma": g, "ar_seconds": 1.0, "spec_seconds": s, "measured": 1.0 / s,
             "predicted": speedup(alpha_hat, g, c_hat), "checking_cost": b,
             "predicted_checked": speedup_checked(alpha_hat, g, c_hat, b)}
            for g, s, b in ((1, 1.3, 1.1), (4, 0.7, 1.6))]
    checks.check_timing_table(rows, alpha_hat, c_hat)  # slower with γ = 1 is fine: noisy clocks
    inverted = [dict(row, measured=row["spec_seconds"] / row["ar_seconds"]) for row in rows]
    with pytest.raises(CheckFailed, match="upside down"):
        checks.check_timing_table(inverted, alpha_hat, c_hat)
    with pytest.raises(CheckFailed, match="at least two different"):
        checks.check_timing_table(rows[:1], alpha_hat, c_hat)
    assert math.isfinite(c_hat) and "✓ timing table passed" in capsys.readouterr().out


def test_alpha_from_a_run_without_verified_drafts_must_be_nan():
    def no_nan(result):
        overlaps = [d.overlap for it in result.trace for d in it.drafted
                    if d.status != "unverified"]
        return sum(overlaps) / max(len(overlaps), 1)
    expect_failure(checks.check_estimate_alpha, no_nan, "float('nan')")


# ----------------------------------------------------------------------------------------------
# Reasoning items: E[tokens], the bootstrap (5), laws of broken variants, χ², find the bug (6)
# ----------------------------------------------------------------------------------------------

def expected_tokens(alpha, gamma):
    return gamma + 1.0 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def bootstrap_alpha(overlaps, num_resamples, level, generator, *, replace=True, of_means=True):
    overlaps = torch.as_tensor(overlaps, dtype=torch.float64)
    if replace:
        indices = torch.randint(0, len(overlaps), (num_resamples, len(overlaps)),
                                generator=generator)
    else:
        indices = torch.stack([torch.randperm(len(overlaps), generator=generator)
                               for _ in range(num_resamples)])
    values = overlaps[indices].mean(dim=1) if of_means else overlaps
    return (float(values.quantile((1 - level) / 2)), float(values.quantile((1 + level) / 2)))


def law_resample_from_p(p, q):
    overlap = torch.minimum(p, q)
    return overlap + (1 - overlap.sum()) * p


def law_greedy_draft(p, q):
    best = int(q.argmax())
    keep = min(1.0, float(p[best] / q[best]))
    law = (1 - keep) * residual_distribution(p, q)
    law[best] += keep
    return law


def chi2_pvalue(counts, probs, *, drop_zero=True):
    from scipy.stats import chi2
    counts, probs = (torch.tensor(x, dtype=torch.float64) for x in (counts, probs))
    expected = probs / probs.sum() * counts.sum()
    if (counts[expected == 0] > 0).any():
        return 0.0
    kept = expected > 0 if drop_zero else torch.ones_like(expected, dtype=torch.bool)
    statistic = float(((counts[kept] - expected[kept]) ** 2 / expected[kept]).nan_to_num().sum())
    return float(chi2.sf(statistic, int(kept.sum()) - 1))


def make_find_broken(num_draws=20_000, level=1e-3):
    def find_broken(samplers, target_probs, generator):
        return {name for name, sampler in samplers.items()
                if chi2_pvalue(torch.bincount(sampler(num_draws, generator),
                                              minlength=len(target_probs)).tolist(),
                               target_probs.tolist()) < level}
    return find_broken


def test_reasoning_references_pass(capsys):
    checks.check_expected_tokens(expected_tokens)
    checks.check_bootstrap(bootstrap_alpha)
    checks.check_broken_law(law_resample_from_p, "resample_from_p")
    checks.check_broken_law(law_greedy_draft, "greedy_draft")
    checks.check_chi2_pvalue(chi2_pvalue)
    checks.check_find_broken(make_find_broken())
    checks.check_overlap_prediction(0.5)
    checks.check_prediction("why", "B ", "b", "hint")
    assert capsys.readouterr().out.count("✓") == 8


def test_suspect_samplers_follow_their_enumerated_laws():
    """Each suspect's samples match the law `exact_law` gives its variant (so the truth the
    check holds is right), and the broken ones are far from p."""
    from specnb.course.checks import laws
    from specnb.stats import chi2_pvalue as library_pvalue
    p, q = laws.SUSPECT_TARGET, laws.SUSPECT_DRAFT
    for label, sampler in laws.suspects(0).items():
        variant = laws._truth(0)[label]
        tokens = sampler(20_000, torch.Generator().manual_seed(1))
        assert library_pvalue(tokens, laws.VARIANTS[variant](p, q)) > 1e-3, variant
        distance = 0.5 * float((laws.VARIANTS[variant](p, q) - p).abs().sum())
        assert (distance > 0.05) == (variant != "exact"), variant


@pytest.mark.parametrize("check, broken, hint", [
    (checks.check_expected_tokens, lambda a, g: (1 - a ** g) / (1 - a) if a < 1 else g,
     "you forgot the token the target adds"),
    (checks.check_expected_tokens, lambda a, g: (1 - a ** (g + 1)) / (1 - a), "0/0"),
    (checks.check_bootstrap, lambda *args: bootstrap_alpha(*args, of_means=False), "too wide"),
    (checks.check_bootstrap, lambda *args: bootstrap_alpha(*args, replace=False), "too narrow"),
    (checks.check_bootstrap, lambda o, b, l, g: bootstrap_alpha(o, b, l, None),
     "`generator` argument"),
    (lambda fn: checks.check_broken_law(fn, "resample_from_p"), lambda p, q: p.clone(),
     "this variant is biased"),
    (lambda fn: checks.check_broken_law(fn, "greedy_draft"), law_resample_from_p, "argmax q"),
    (checks.check_chi2_pvalue, lambda c, p: chi2_pvalue(c, p, drop_zero=False),
     "drop the cells of probability 0"),
    (checks.check_find_broken, make_find_broken(num_draws=300), "draw more samples"),
    (checks.check_find_broken, make_find_broken(level=0.9), "level too lax"),
])
def test_reasoning_mistakes(check, broken, hint):
    expect_failure(check, broken, hint)


def test_a_prediction_left_at_none_says_so():
    expect_failure(lambda value: checks.check_prediction("gamma_star_guess", value, 5, "h"),
                   None, "still None")


def test_check_failures_show_as_a_short_message_in_ipython():
    """`short_tracebacks` makes IPython show a CheckFailed as one line, not the check's source."""
    from IPython.core.interactiveshell import InteractiveShell
    from specnb.course.checks.report import short_tracebacks

    shown = []
    shell = InteractiveShell.instance()
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    try:
        assert short_tracebacks(shell)
        shell.run_cell("from specnb.course.checks import CheckFailed\n"
                       "raise CheckFailed('verify gave a wrong answer.')")
    finally:
        shell.set_custom_exc((), None)
        InteractiveShell.clear_instance()
    assert shown == [["CheckFailed: verify gave a wrong answer."]]


# ----------------------------------------------------------------------------------------------
# Exercise 7: a batched cache rolled back by mask, acceptance by draft position
# ----------------------------------------------------------------------------------------------

def make_rollback(*, skip_holes=True, shift=0, refill=False):
    def rollback_mask(valid, num_tokens):
        out = valid.clone()
        for row in range(valid.shape[0]):
            left = int(num_tokens[row]) + shift
            for slot in range(valid.shape[1] - 1, -1, -1):
                if left <= 0:
                    break
                if valid[row, slot] or not skip_holes:
                    out[row, slot] = False
                    left -= 1
        if refill:
            out[:, 0] = True
            out[:, -1] |= ~valid[:, -1]
        return out
    return rollback_mask


def test_exercise_7_rollback_reference_passes(capsys):
    checks.check_rollback_mask(make_rollback())
    assert "rollback_mask passed" in capsys.readouterr().out


@pytest.mark.parametrize("broken, hint", [
    (make_rollback(skip_holes=False), "*real* slots"),
    (make_rollback(shift=1), "one slot too many"),
    (make_rollback(shift=-1), "one slot too few"),
    (make_rollback(refill=True), "never fills holes"),
    (lambda valid, num_tokens: valid[:, 1:], "the same shape as valid"),
])
def test_rollback_mistakes(broken, hint):
    expect_failure(checks.check_rollback_mask, broken, hint)


def test_a_wrong_mask_shows_in_the_next_logits():
    """The cache half on its own: a mask that keeps the rolled-back slots visible changes the
    next forward's logits (the mask half would have caught it first)."""
    from specnb.course.checks import rollback

    message = expect_failure(rollback._check_cache, lambda valid, num_tokens: valid,
                             "fresh forward", seed=0)
    assert "largest difference" in message


def by_position(result, gamma, *, all_iterations=False, count_unverified=False, zero=False):
    reached, accepted, beyond, drafts = [0] * gamma, [0] * gamma, [0] * gamma, 0
    for iteration in result.trace:
        if not iteration.drafted and not all_iterations:
            continue
        drafts += 1
        statuses = [d.status for d in iteration.drafted]
        for i, status in enumerate(statuses):
            if status != "unverified" or count_unverified:
                reached[i] += 1
                accepted[i] += status == "accepted"
        for i in range(statuses.count("accepted")):
            beyond[i] += 1
    conditional = [a / r if r else (0.0 if zero else math.nan) for a, r in zip(accepted, reached)]
    return conditional, [b / drafts for b in beyond]


def test_exercise_7_positions_reference_passes(capsys):
    checks.check_acceptance_by_position(by_position)
    checks.check_mean_acceptance_length(lambda per_draft: 1 + sum(per_draft))
    out = capsys.readouterr().out
    assert "acceptance_by_position passed" in out and "mean_acceptance_length passed" in out


@pytest.mark.parametrize("check, broken, hint", [
    (checks.check_acceptance_by_position,
     lambda r, g: by_position(r, g, all_iterations=True), "not a draft"),
    (checks.check_acceptance_by_position,
     lambda r, g: by_position(r, g, count_unverified=True), "'unverified'"),
    (checks.check_acceptance_by_position, lambda r, g: by_position(r, g, zero=True),
     "float('nan')"),
    (checks.check_acceptance_by_position, lambda r, g: by_position(r, g)[::-1], "swapped"),
    (checks.check_acceptance_by_position, lambda r, g: (r.stats.per_position_acceptance,) * 2,
     "conditional"),
    (checks.check_mean_acceptance_length, lambda per_draft: sum(per_draft), "vLLM adds"),
])
def test_exercise_7_positions_mistakes(check, broken, hint):
    expect_failure(check, broken, hint)


# ----------------------------------------------------------------------------------------------
# Exercise 8: typical acceptance's law, trying siblings
# ----------------------------------------------------------------------------------------------

def typical_law(p, q, threshold, alpha, *, log=torch.log, keep=None, fallback=None,
                entropy=True):
    h = -(p * log(p.clamp_min(1e-300))).sum()
    bar = min(threshold, alpha * float(torch.exp(-h))) if entropy else threshold
    passes = p > bar
    law = torch.where(passes, q if keep is None else keep(p, q), torch.zeros_like(q))
    law[(p if fallback is None else q).argmax()] += q[~passes].sum()
    return law


def try_siblings(p, candidates, generator, *, remove=True, renormalize=True):
    r = p.clone()
    for x in candidates:
        if torch.rand((), generator=generator, dtype=torch.float64) < r[x]:
            return x
        if remove:
            r[x] = 0.0
            if renormalize:
                r = r / r.sum()
    return int(torch.multinomial(r, 1, generator=generator))


def make_detector(num_draws=20_000, level=1e-3):
    from scipy.stats import chi2

    def siblings_are_exact(sampler, p, candidates, generator):
        counts = torch.bincount(sampler(num_draws, generator), minlength=len(p)).double()
        expected = p * num_draws
        statistic = float(((counts - expected) ** 2 / expected)[expected > 0].sum())
        return chi2.sf(statistic, int((expected > 0).sum()) - 1) >= level
    return siblings_are_exact


def test_exercise_8_references_pass(capsys):
    checks.check_law_prediction([0.5, 0.2, 0.3, 0.0], reveal=True)
    checks.check_typical_law(typical_law)
    checks.check_try_siblings(try_siblings)
    checks.check_siblings_are_exact(make_detector())
    assert capsys.readouterr().out.count("✓") == 4


@pytest.mark.parametrize("check, broken, hint", [
    (checks.check_typical_law, lambda p, q, t, a: typical_law(p, q, t, a, entropy=False),
     "a flat target"),
    (checks.check_typical_law, lambda p, q, t, a: typical_law(p, q, t, a, log=torch.log2),
     "in nats"),
    (checks.check_typical_law, lambda p, q, t, a: typical_law(p, q, t, a, keep=lambda p, q: p),
     "not p(x)"),
    (checks.check_typical_law, lambda p, q, t, a: typical_law(p, q, t, a, fallback="q"),
     "argmax p"),
    (lambda law: checks.check_law_prediction(law, reveal=True), [0.8, 0.2, 0.0, 0.0],
     "a flat target"),
    (lambda law: checks.check_law_prediction(law), [0.5, 0.2], "sum to 1"),
    (checks.check_try_siblings, lambda p, c, g: try_siblings(p, c, g, remove=False),
     "stays in r"),
    (checks.check_try_siblings, lambda p, c, g: try_siblings(p, c, g, renormalize=False),
     "renormalise"),
    (checks.check_siblings_are_exact, make_detector(num_draws=50), "draw more samples"),
    (checks.check_siblings_are_exact, make_detector(level=0.9999), "level too strict"),
])
def test_exercise_8_mistakes(check, broken, hint):
    expect_failure(check, broken, hint)


def test_the_detectors_samplers_follow_their_enumerated_laws():
    """The grader's samplers (the library's tree verification of a star, exact or not) emit
    the laws `sibling_law` enumerates: the exact one p, the broken one the 'kept' mistake's."""
    from specnb.course.checks import siblings
    from specnb.stats import chi2_pvalue

    generator = torch.Generator().manual_seed(0)
    for p, candidates in siblings.DETECT_CASES:
        p = torch.tensor(p, dtype=torch.float64)
        for exact in (True, False):
            tokens = siblings._star_sampler(p, candidates, exact)(40_000, generator)
            law = siblings.sibling_law(p, candidates, remove=exact)
            assert chi2_pvalue(tokens, law) > 1e-4
            assert exact or 0.5 * float((law - p).abs().sum()) > 0.1


def test_the_recorded_head_run_agrees_with_its_own_counters():
    """Assignment 7's recorded run (data/head/run-gamma5.json): its trace and the loop's counters
    tell the same story, so the checks can hold a learner's counts against either."""
    from specnb.course import head_run
    from specnb.course.checks.positions import reference_by_position

    data = json.loads(head_run.PATH.read_text())
    assert {"command", "machine", "date"} <= set(data) and data["gamma"] == head_run.GAMMA
    run = head_run.load()
    statuses = [d.status for it in run.trace for d in it.drafted]
    assert run.stats.accepted == statuses.count("accepted") > 0
    assert run.stats.drafted == len(statuses) and len(run.tokens[0]) == run.stats.new_tokens
    assert run.stats.drafting_steps == sum(1 for it in run.trace if it.drafted)
    _, per_draft = reference_by_position(run, head_run.GAMMA)
    assert per_draft == pytest.approx(run.stats.per_position_acceptance)
    assert 1 + sum(per_draft) == pytest.approx(run.stats.mean_acceptance_length)


@pytest.mark.embedded
def test_recording_the_head_run_again_writes_a_record_that_loads(tmp_path):
    from specnb.course import head_run

    data = head_run.record(tmp_path / "run.json")
    run = head_run.load(tmp_path / "run.json")
    assert run.tokens[0] == data["tokens"] and len(run.trace) == data["stats"]["iterations"]
    assert run.stats.drafting_steps > 0
