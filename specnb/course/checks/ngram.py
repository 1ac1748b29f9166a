"""Checks for exercise 3: `ngram_lookup`, the prompt-lookup draft.

The student's `ngram_lookup(tokens, n_max, n_min, k)` returns the draft (a list of ids, or an
`NgramDraft` whose `.draft` is used) and must agree with `specnb.core.ngram_lookup` on hand-made
and random token lists. When it does not, the check recomputes the answer under each classic
mistake (shortest n first, earliest occurrence, copying the n-gram itself, matching the tail
against itself, not capping at k) and names the one the student's answer matches.
"""

import torch

from ...core import ngram_lookup as library_lookup
from .report import call_each, failure, passed

NAME = "ngram_lookup"

HAND_CASES = [  # (tokens, n_max, n_min, k)
    ([5, 6, 7, 5, 6], 2, 2, 2),  # the docstring example -> [7, 5]
    ([3, 1, 4, 1, 5, 9, 2, 6, 1, 5], 2, 1, 3),
    ([1, 2, 3, 9, 3, 8, 1, 2, 3], 3, 1, 2),  # the longest n wins over a more recent short match
    ([1, 2, 3, 9, 3, 8, 1, 2, 3], 1, 1, 2),  # same n: the most recent occurrence
    ([7, 4, 5, 0, 4, 5], 3, 1, 2),  # fall back to a shorter n
    ([7, 4, 5, 0, 4, 5], 3, 3, 2),  # ... unless n_min forbids it -> []
    ([8, 2, 5, 6, 8, 2, 8, 2], 2, 2, 3),  # the longest continuation (capped at k) first
    ([8, 2, 5, 6, 8, 2, 8, 2], 2, 2, 2),  # ... then the most recent
    ([3, 3, 3, 3], 2, 2, 1),  # overlapping occurrences
    ([1, 2, 3, 1, 2], 2, 2, 10),  # k capped by what follows
    ([1, 2, 3, 4], 3, 1, 4), ([7], 3, 1, 4), ([], 3, 1, 4),  # nothing to match -> []
    ([1, 2, 1, 2], 2, 1, 0),  # k = 0 -> []
]


def _lookup(tokens, n_max, n_min, k, *, longest_first=True, prefer_recent=True,
            prefer_long_continuation=True, offset=None, allow_self=False, cap=True):
    """The library's rule with one switch per classic mistake (all defaults: the right rule)."""
    length = len(tokens)
    sizes = range(min(n_max, length - 1 + allow_self), n_min - 1, -1)
    for n in (sizes if longest_first else reversed(sizes)):
        tail = tokens[length - n:]
        starts = range(length - n - (0 if allow_self else 1), -1, -1)
        best = None
        for start in (starts if prefer_recent else reversed(starts)):
            if tokens[start:start + n] == tail:
                continuation = min(k, length - (start + n)) if cap else length - (start + n)
                if best is None or (prefer_long_continuation and continuation > best[0]):
                    best = (continuation, start)
        if best is not None and k > 0:
            source = best[1] + (n if offset is None else offset)
            return tokens[source:source + best[0]]
    return []


MISTAKES = [
    (dict(cap=False), "the draft is longer than k: copy at most k tokens"),
    (dict(offset=0), "off by one: the draft is what *follows* the matched n-gram, so it starts "
                     "at match_start + n, not at match_start"),
    (dict(offset=1), "off by one: the draft starts right after the matched n-gram, at "
                     "match_start + n"),
    (dict(allow_self=True), "the tail matched itself: only occurrences that start before "
                            "len(tokens) − n count (some token must follow them)"),
    (dict(longest_first=False), "try the longest n first: n from n_max down to n_min, and stop "
                                "at the first n that matches"),
    (dict(prefer_recent=False), "among equally good occurrences take the most recent one "
                                "(scan from the end)"),
    (dict(prefer_long_continuation=False), "among occurrences of the n-gram prefer the one with "
                                           "the longest continuation (capped at k), then the "
                                           "most recent"),
]


def _hint(tokens, n_max, n_min, k, got) -> str:
    for switches, hint in MISTAKES:
        if _lookup(tokens, n_max, n_min, k, **switches) == got:
            return hint
    return ("match the last n tokens (n = n_max .. n_min) against earlier positions and copy "
            "up to k tokens that followed the best occurrence")


def _random_cases(generator, count):
    for _ in range(count):
        alphabet = int(torch.randint(2, 6, (), generator=generator))
        length = int(torch.randint(0, 20, (), generator=generator))
        tokens = torch.randint(0, alphabet, (length,), generator=generator).tolist()
        n_min = int(torch.randint(1, 4, (), generator=generator))
        n_max = n_min + int(torch.randint(0, 3, (), generator=generator))
        yield tokens, n_max, n_min, int(torch.randint(0, 6, (), generator=generator))


def check_ngram_lookup(ngram_lookup, seed: int = 0, num_random: int = 300) -> None:
    generator = torch.Generator().manual_seed(seed)
    num_cases = 0
    cases = HAND_CASES + list(_random_cases(generator, num_random))

    def given(index):
        tokens, n_max, n_min, k = cases[index]
        return f"tokens = {tokens}, n_max = {n_max}, n_min = {n_min}, k = {k}"
    answers = call_each(ngram_lookup, [(list(t), n_max, n_min, k) for t, n_max, n_min, k in cases],
                        given=given, name=NAME)
    for index, ((tokens, n_max, n_min, k), got) in enumerate(zip(cases, answers)):
        given_here = given(index)
        expected = library_lookup(tokens, n_max=n_max, n_min=n_min, k=k)
        got = getattr(got, "draft", got)
        try:
            got = [int(t) for t in got]
        except (TypeError, ValueError):
            raise failure(NAME, given=given_here, expected=expected.draft, got=repr(got),
                          hint="return the draft as a list of token ids ([] when nothing "
                               "matches)") from None
        if got != expected.draft:
            where = (f" (the {expected.ngram_size}-gram {tokens[len(tokens) - expected.ngram_size:]}"
                     f" occurred at {expected.match_start}; copy from {expected.source_start})"
                     if expected.ngram_size else " (no earlier occurrence of any tail n-gram)")
            raise failure(NAME, given=given_here, expected=f"{expected.draft}{where}", got=got,
                          hint=_hint(tokens, n_max, n_min, k, got))
        num_cases += 1
    passed(NAME, num_cases)
