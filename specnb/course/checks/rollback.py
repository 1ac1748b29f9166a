"""Checks for assignment 7, part 1: rolling a batched KV cache back by its mask.

    rollback_mask(valid, num_tokens) -> valid after the rollback, [B, S] bool

A batch's rows share one cache of S slots (`specnb.core.BatchedCachedLM`, notebook 09); `valid
[B, S]` says which slots hold a real token of each row. Rolling row b back by `num_tokens[b]`
marks its last `num_tokens[b]` *real* slots invalid; earlier rollbacks left holes (False slots
between real ones), which do not count. The check compares the student's mask with the
library's (`specnb.core.batch_kv.drop_last_real`) on hand-made and random masks, then puts it to
work: a tiny random Llama decodes a ragged batch, rows roll back by different amounts with the
student's mask, and the next forward's logits of every row must equal a fresh forward over that
row's own tokens, with no cache at all.
"""

import torch

from ...core.batch_kv import drop_last_real as library_mask
from .jacobi import VOCAB, tiny_model
from .report import call, call_each, failure, passed, show

NAME = "rollback_mask"

HAND_CASES = [  # (valid rows, num_tokens)
    ([[1, 1, 1, 1, 1]], [2]),  # no holes: the last two slots
    ([[1, 1, 1, 0, 0, 1, 1]], [2]),  # the last two *real* slots: 5 and 6
    ([[1, 1, 1, 0, 0, 1, 1]], [3]),  # ... a hole in the middle is skipped: 2, 5 and 6
    ([[1, 1, 0, 0], [1, 1, 1, 1]], [0, 1]),  # rows roll back by their own amounts
    ([[1, 0, 1, 0, 1, 0]], [1]),  # trailing holes: the last real slot is 4
    ([[1, 1, 1], [1, 0, 1]], [3, 2]),  # a whole row
]


def _last_slots(valid, num_tokens):
    """The classic mistake: clear the last n slots, holes or not."""
    out = valid.clone()
    for row in range(valid.shape[0]):
        n = int(num_tokens[row])
        if n:
            out[row, valid.shape[1] - n:] = False
    return out


def _hint(valid, num_tokens, got) -> str:
    if (got & ~valid).any():
        return "a slot that was False became True: a rollback only clears slots, never fills holes"
    if torch.equal(got, _last_slots(valid, num_tokens)):
        return ("you cleared the last num_tokens[b] *slots*; clear the last num_tokens[b] *real* "
                "slots (True), skipping the holes earlier rollbacks left")
    for shift, words in ((-1, "one slot too few"), (1, "one slot too many")):
        if torch.equal(got, library_mask(valid, (num_tokens + shift).clamp(min=0))):
            return f"off by one: you cleared {words} per row"
    cleared = (valid & ~got).sum(1)
    if not torch.equal(cleared, num_tokens):
        return (f"row b must lose exactly num_tokens[b] real slots; yours lost "
                f"{cleared.tolist()}")
    return "row b must lose its *last* num_tokens[b] real slots, the most recent tokens"


def _random_case(generator):
    batch = int(torch.randint(1, 5, (), generator=generator))
    slots = int(torch.randint(1, 12, (), generator=generator))
    valid = torch.rand(batch, slots, generator=generator) < 0.7
    valid[:, 0] = True  # slot 0 is real in every row (prompts are right-padded)
    num_tokens = torch.stack([torch.randint(0, int(n) + 1, (), generator=generator)
                              for n in valid.sum(1)])
    return valid, num_tokens


def _as_mask(got, shape, given):
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(shape):
        raise failure(NAME, given=given, expected=f"a bool tensor of shape {list(shape)}",
                      got=f"{type(got).__name__} {list(getattr(got, 'shape', []))}",
                      hint="return the new mask, the same shape as valid")
    return got.bool()


def _check_masks(rollback_mask, seed: int, num_random: int) -> int:
    generator = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor(v, dtype=torch.bool), torch.tensor(n)) for v, n in HAND_CASES]
    cases += [_random_case(generator) for _ in range(num_random)]

    def given(index):
        valid, num_tokens = cases[index]
        return f"valid = {show(valid.int())}, num_tokens = {show(num_tokens)}"
    answers = call_each(rollback_mask, cases, given=given, name=NAME)
    for index, ((valid, num_tokens), got) in enumerate(zip(cases, answers)):
        got = _as_mask(got, valid.shape, given(index))
        expected = library_mask(valid, num_tokens)
        if not torch.equal(got, expected):
            raise failure(NAME, given=given(index), expected=show(expected.int()),
                          got=show(got.int()), hint=_hint(valid, num_tokens, got))
    return len(cases)


def _fresh_logits(model, ids: list) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0, -1].float()


def _check_cache(rollback_mask, seed: int, steps: int = 6) -> int:
    """Decode a ragged batch of 3 rows; after each block of 3 drafts, roll every row back by
    its own random amount with the student's mask, then compare the next token's logits."""
    from ...core import BatchedCachedLM  # imports transformers: only when this part runs

    model = tiny_model()
    generator = torch.Generator().manual_seed(seed + 1)
    sequences = [torch.randint(1, VOCAB, (length,), generator=generator).tolist()
                 for length in (5, 2, 8)]
    lm = BatchedCachedLM(model)
    lm.fill([list(s) for s in sequences])
    for step in range(steps):
        drafts = torch.randint(1, VOCAB, (3, 3), generator=generator)
        lm.forward(drafts)
        num_tokens = torch.randint(0, 4, (3,), generator=generator)
        before = lm.valid.clone()
        given = (f"step {step + 1} of a ragged batch of 3 rows decoded with a tiny model: "
                 f"valid = {show(before.int())}, num_tokens = {show(num_tokens)}")
        got = _as_mask(call(rollback_mask, before.clone(), num_tokens.clone(), given=given,
                            name=NAME), before.shape, given)
        lm.valid, lm.lengths, lm._host_lengths = got.clone(), got.sum(1), None
        for row in range(3):
            sequences[row] += drafts[row, :3 - int(num_tokens[row])].tolist()
        following = torch.randint(1, VOCAB, (3, 1), generator=generator)
        logits = lm.forward(following)[:, -1].float()  # [3, V]
        for row in range(3):
            sequences[row].append(int(following[row, 0]))
            fresh = _fresh_logits(model, sequences[row])
            if not torch.allclose(logits[row], fresh, atol=1e-4, rtol=1e-4):
                raise failure(NAME, given=given, expected=f"row {row}'s next logits equal to a "
                              f"fresh forward over its {len(sequences[row])} tokens",
                              got=f"a largest difference of "
                                  f"{float((logits[row] - fresh).abs().max()):.3g}",
                              hint=_hint(before, num_tokens, got) if not torch.equal(
                                  got, library_mask(before, num_tokens)) else
                              "the cache attends to exactly the slots your mask leaves True")
    return steps


def check_rollback_mask(rollback_mask, seed: int = 0, num_random: int = 200) -> None:
    num_cases = _check_masks(rollback_mask, seed, num_random)
    num_steps = _check_cache(rollback_mask, seed)
    passed(NAME, num_cases, f"and {num_steps} rollbacks of a cached batch whose next logits "
                            f"equal a fresh forward's")


__all__ = ["check_rollback_mask"]
