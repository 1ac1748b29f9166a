"""Prompt-lookup drafts: copy what followed an earlier occurrence of the current tail n-gram.

Input-grounded tasks (editing code, summarizing, answering from a passage) repeat long spans of
the prompt, so the tokens that followed the last n tokens the previous time are a free draft:
no draft model, no forward. This module only finds the draft; verifying it is `verify`'s job.
"""

from dataclasses import dataclass

from .args import check_int, token_ids


@dataclass
class NgramDraft:
    """A draft and where it was copied from (`source_start` indexes `tokens`)."""

    draft: list  # up to k token ids
    ngram_size: int  # n of the matching tail n-gram, 0 when nothing matched
    match_start: int  # where the earlier occurrence of the n-gram starts, -1 when none
    source_start: int  # where the copied continuation starts, -1 when none


def ngram_lookup(tokens, *, n_max: int, n_min: int, k: int) -> NgramDraft:
    """Draft up to `k` tokens by matching the longest tail n-gram (n from n_max down to n_min).

    Among earlier occurrences of that n-gram, prefer the one with the longest continuation
    (capped at k), then the most recent one.

    Example: [5, 6, 7, 5, 6] with n_max=n_min=2, k=2 -> draft [7, 5] copied from position 2.
    """
    n_min = check_int("n_min", n_min, 1)
    n_max = check_int("n_max", n_max, n_min)
    k = check_int("k (number of tokens to draft)", k, 0)
    tokens = token_ids("tokens", tokens)
    length = len(tokens)
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        tail = tokens[length - n:]
        best = None  # (continuation length, start)
        # Occurrences must end before the tail starts its last token, so something follows them.
        for start in range(length - n - 1, -1, -1):
            if tokens[start:start + n] == tail:
                continuation = min(k, length - (start + n))
                if best is None or continuation > best[0]:
                    best = (continuation, start)
        if best is not None and k > 0:
            continuation, start = best
            source = start + n
            return NgramDraft(tokens[source:source + continuation], n, start, source)
    return NgramDraft([], 0, -1, -1)


def ngram_continuations(tokens, *, n_max: int, n_min: int, k: int, limit: int) -> list:
    """Up to `limit` different drafts (`NgramDraft`s), best first: the tail n-grams from n_max
    down to n_min, and for each n its earlier occurrences by `ngram_lookup`'s preference
    (longest continuation, then most recent). A draft equal to the start of one already kept
    adds nothing and is skipped. The first is `ngram_lookup`'s draft; the others become the
    branches of a token tree (`NgramDrafter(branches=...)`).

    Example: [1, 2, 9, 1, 2, 8, 1, 2] with n_max=n_min=2, k=1, limit=2 -> drafts [8], [9].
    """
    n_min = check_int("n_min", n_min, 1)
    n_max = check_int("n_max", n_max, n_min)
    k = check_int("k (number of tokens to draft)", k, 0)
    limit = check_int("limit (number of drafts)", limit, 1)
    tokens = token_ids("tokens", tokens)
    length, kept = len(tokens), []
    if k == 0:
        return kept
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        tail = tokens[length - n:]
        found = [(min(k, length - (start + n)), start) for start in range(length - n - 1, -1, -1)
                 if tokens[start:start + n] == tail]
        for continuation, start in sorted(found, key=lambda c: (-c[0], -c[1])):
            source = start + n
            draft = tokens[source:source + continuation]
            if any(d.draft[:len(draft)] == draft for d in kept):
                continue
            kept.append(NgramDraft(draft, n, start, source))
            if len(kept) == limit:
                return kept
    return kept
