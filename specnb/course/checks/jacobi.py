"""Checks for exercise 4: one Jacobi step, and the decoding loop around it.

    jacobi_step(lm, prefix, guesses) -> (refreshed_guesses, num_converged)   (or a JacobiStep)
    jacobi_decode(lm, prompt, block, max_new_tokens) -> list of new token ids

`lm` is a `specnb.core.CachedLM`. Both run on a tiny random Llama built here in memory (seeded
weights, no files), so the checks take a second. The step is compared with
`specnb.core.jacobi_step` on random, half-right and fully right guesses; the loop must reproduce
greedy decoding (`specnb.autoregressive`) exactly and use at most one forward per new token.
"""

import torch

from ...core import CachedLM
from ...core import jacobi_step as library_step
from .report import call, failure, passed

VOCAB = 64
_MODELS = {}


def tiny_model(seed: int = 0):
    """A 2-layer random Llama over 64 tokens; wide weights make greedy argmaxes clear-cut."""
    if seed not in _MODELS:
        # Here, not at the top: the other exercises' kernels import the checks without
        # transformers (seconds per kernel).
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=128, bos_token_id=0, pad_token_id=0,
                             eos_token_id=None, tie_word_embeddings=False)
        model = LlamaForCausalLM(config).eval()
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "norm" not in name:
                    param.normal_(0.0, 0.5, generator=generator)
        model.generation_config.eos_token_id = None
        _MODELS[seed] = model
    return _MODELS[seed]


def _greedy(model, prefix, count):
    from ...methods import autoregressive  # the decoding loops import transformers

    ids = torch.tensor([prefix], dtype=torch.long)
    return autoregressive(model, ids, max_new_tokens=count).tokens[0]


def _unpack(result, name, given):
    if hasattr(result, "guesses"):
        return list(result.guesses), result.num_converged
    try:
        refreshed, num_converged = result
        return [int(t) for t in refreshed], int(num_converged)
    except (TypeError, ValueError):
        raise failure(name, given=given, got=repr(result),
                      hint="return (refreshed_guesses, num_converged): a list of k ids and an "
                           "int") from None


def _step_hint(guesses, expected, got_refreshed, got_converged) -> str:
    if len(got_refreshed) != len(expected.guesses):
        return f"return one refreshed guess per block position ({len(guesses)} of them)"
    if got_refreshed != expected.guesses:
        if got_refreshed[:-1] == expected.guesses[1:]:
            return ("shifted by one: the logits at position i predict token i+1, so run "
                    "prefix + guesses[:-1] and keep the last k positions")
        return ("refresh every guess at once: argmax of the logits at the last k positions of "
                "one forward over prefix + guesses[:-1]")
    leading = 0
    while leading < len(guesses) and guesses[leading] == got_refreshed[leading]:
        leading += 1
    if got_converged == 0:
        return "num_converged is at least 1: the first refreshed guess is always final"
    if got_converged == sum(a == b for a, b in zip(guesses, got_refreshed)):
        return ("count only the *leading* run: new[i] is final when old[j] == new[j] for every "
                "j < i; a later match after a mismatch proves nothing")
    if got_converged == leading and leading < len(guesses):
        return ("new[i] is final when all guesses *before* i were right, so the count is one "
                "more than the number of leading matches (at most k)")
    return "num_converged = 1 + number of leading positions j < k−1 where old[j] == new[j]"


def check_jacobi_step(jacobi_step, seed: int = 0) -> None:
    name = "jacobi_step"
    model, generator = tiny_model(), torch.Generator().manual_seed(seed)
    num_cases = 0
    for case in range(16):
        prefix = torch.randint(1, VOCAB, (int(torch.randint(2, 9, (), generator=generator)),),
                               generator=generator).tolist()
        k = [1, 2, 4, 6][case % 4]
        right = _greedy(model, prefix, k)
        num_right = [0, k // 2, k, 1][(case // 4) % 4]  # random, half right, all right, one
        guesses = right[:num_right] + torch.randint(
            1, VOCAB, (k - num_right,), generator=generator).tolist()
        given = f"prefix = {prefix}, guesses = {guesses} (greedy continuation: {right})"
        expected = library_step(CachedLM(model), prefix, guesses)
        lm = CachedLM(model)
        got = _unpack(call(jacobi_step, lm, list(prefix), list(guesses), given=given, name=name),
                      name, given)
        if lm.num_forwards != 1:
            raise failure(name, given=given, expected="1 forward", got=f"{lm.num_forwards} "
                          f"forwards", hint="score the whole block in one call: "
                          "lm.logits(prefix + guesses[:-1], keep=len(guesses))")
        if got != (expected.guesses, expected.num_converged):
            raise failure(name, given=given, expected=(expected.guesses, expected.num_converged),
                          got=got, hint=_step_hint(guesses, expected, *got))
        num_cases += 1
    passed(name, num_cases)


class ConstantLM:
    """Stands in for a `CachedLM` whose model always predicts `token`: greedy is [token] * n."""

    def __init__(self, token: int = 7):
        self.token, self.num_forwards = token, 0

    def logits(self, sequence, keep: int = 1) -> torch.Tensor:
        if not 1 <= keep <= len(sequence):
            raise ValueError(f"keep must be in [1, len(sequence)={len(sequence)}], got {keep}")
        self.num_forwards += 1
        return torch.nn.functional.one_hot(torch.full((1, keep), self.token), VOCAB).float()


def _check_constant_model(jacobi_decode, name) -> int:
    """After one step every refreshed guess is right, so a Jacobi loop then takes whole blocks."""
    num_cases = 0
    for block, max_new_tokens in ((4, 3), (4, 9), (5, 16)):
        lm = ConstantLM()
        given = (f"a model that always predicts 7, prompt = [3, 5], block = {block}, "
                 f"max_new_tokens = {max_new_tokens}")
        got = [int(t) for t in call(jacobi_decode, lm, [3, 5], block, max_new_tokens,
                                    given=given, name=name)]
        if got != [7] * max_new_tokens:
            hint = ("too many tokens: shrink the block to what is still wanted, min(block, "
                    "max_new_tokens − len(new_tokens))") if len(got) > max_new_tokens \
                else "emit the num_converged leading refreshed guesses until max_new_tokens"
            raise failure(name, given=given, expected=[7] * max_new_tokens, got=got, hint=hint)
        most = 1 + -(-(max_new_tokens - 1) // block)  # step 1, then whole blocks
        if lm.num_forwards > most:
            raise failure(name, given=given, expected=f"at most {most} forwards",
                          got=f"{lm.num_forwards} forwards", hint=(
                              "after the first step every refreshed guess is 7, so the next "
                              "block should converge whole: start each block from the "
                              "unconverged refreshed guesses of the last step (padded), not "
                              "from fresh guesses"))
        num_cases += 1
    return num_cases


def check_jacobi_loop(jacobi_decode, seed: int = 0) -> None:
    name = "jacobi_decode"
    model, generator = tiny_model(), torch.Generator().manual_seed(seed)
    num_cases = 0
    for block in (1, 3, 5):
        for max_new_tokens in (1, 7, 12):
            prompt = torch.randint(1, VOCAB, (int(torch.randint(2, 9, (), generator=generator)),),
                                   generator=generator).tolist()
            given = f"prompt = {prompt}, block = {block}, max_new_tokens = {max_new_tokens}"
            expected = _greedy(model, prompt, max_new_tokens)
            lm = CachedLM(model)
            got = call(jacobi_decode, lm, list(prompt), block, max_new_tokens, given=given,
                       name=name)
            got = [int(t) for t in got]
            if got != expected:
                if len(got) > len(expected) and got[:len(expected)] == expected:
                    hint = ("too many tokens: shrink the block to what is still wanted, "
                            "min(block, max_new_tokens − len(new_tokens))")
                elif len(got) < len(expected) and expected[:len(got)] == got:
                    hint = "too few tokens: loop until max_new_tokens new tokens are emitted"
                else:
                    first = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
                    hint = (f"first wrong token at index {first}: emit only the num_converged "
                            f"leading refreshed guesses of each step, and feed the emitted "
                            f"tokens back into the prefix")
                raise failure(name, given=given, expected=f"{expected} (greedy decoding)",
                              got=got, hint=hint)
            if lm.num_forwards > max_new_tokens:
                raise failure(name, given=given, expected=f"at most {max_new_tokens} forwards",
                              got=f"{lm.num_forwards} forwards",
                              hint="every step fixes at least one token: emit all "
                                   "num_converged tokens of a step before the next step")
            num_cases += 1
    num_cases += _check_constant_model(jacobi_decode, name)
    passed(name, num_cases, "each equal to greedy decoding")
