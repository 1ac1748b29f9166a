"""Tests of `specnb.core.ngram_lookup` (prompt-lookup drafts), all by hand."""

import pytest
import torch

from specnb.core import NgramDraft, ngram_lookup

NO_MATCH = NgramDraft([], 0, -1, -1)


def test_docstring_example():
    assert ngram_lookup([5, 6, 7, 5, 6], n_max=2, n_min=2, k=2) == NgramDraft([7, 5], 2, 0, 2)


def test_draft_is_copied_from_source_start():
    tokens = [3, 1, 4, 1, 5, 9, 2, 6, 1, 5]
    d = ngram_lookup(tokens, n_max=2, n_min=1, k=3)
    assert d == NgramDraft([9, 2, 6], 2, 3, 5)  # tail [1, 5] occurred at 3
    assert d.draft == tokens[d.source_start:d.source_start + len(d.draft)]
    assert tokens[d.match_start:d.match_start + d.ngram_size] == tokens[-d.ngram_size:]


def test_longest_n_preferred_over_shorter_more_recent_match():
    tokens = [1, 2, 3, 9, 3, 8, 1, 2, 3]
    # n = 3: [1, 2, 3] occurred at 0, followed by [9, 3].
    assert ngram_lookup(tokens, n_max=3, n_min=1, k=2) == NgramDraft([9, 3], 3, 0, 3)
    # n = 1 only: [3] occurred at 2 and (more recently) at 4; the most recent one wins.
    assert ngram_lookup(tokens, n_max=1, n_min=1, k=2) == NgramDraft([8, 1], 1, 4, 5)


def test_falls_back_to_shorter_n_when_longer_does_not_match():
    tokens = [7, 4, 5, 0, 4, 5]  # [0, 4, 5] never occurred before; [4, 5] did, at 1
    assert ngram_lookup(tokens, n_max=3, n_min=1, k=2) == NgramDraft([0, 4], 2, 1, 3)
    assert ngram_lookup(tokens, n_max=3, n_min=3, k=2) == NO_MATCH  # n_min forbids n = 2


def test_same_n_prefers_longest_capped_continuation_then_most_recent():
    tokens = [8, 2, 5, 6, 8, 2, 8, 2]  # tail [8, 2]; earlier at 0 (6 follow) and 4 (2 follow)
    # k = 3: the occurrence at 4 can only offer 2 tokens, the one at 0 offers 3.
    assert ngram_lookup(tokens, n_max=2, n_min=2, k=3) == NgramDraft([5, 6, 8], 2, 0, 2)
    # k = 2: both offer 2 once capped at k, so the most recent one wins.
    assert ngram_lookup(tokens, n_max=2, n_min=2, k=2) == NgramDraft([8, 2], 2, 4, 6)


def test_overlapping_occurrence():
    # [3, 3, 3, 3], tail [3, 3]: occurrences at 1 (1 token follows) and 0 (2 follow).
    assert ngram_lookup([3, 3, 3, 3], n_max=2, n_min=2, k=2) == NgramDraft([3, 3], 2, 0, 2)
    assert ngram_lookup([3, 3, 3, 3], n_max=2, n_min=2, k=1) == NgramDraft([3], 2, 1, 3)


def test_k_is_capped_by_what_follows():
    assert ngram_lookup([1, 2, 3, 1, 2], n_max=2, n_min=2, k=10) == NgramDraft([3, 1, 2], 2, 0, 2)


@pytest.mark.parametrize("tokens", [[1, 2, 3, 4], [], [7], [4, 5]])
def test_no_match_gives_empty_draft(tokens):
    assert ngram_lookup(tokens, n_max=3, n_min=1, k=4) == NO_MATCH


def test_k_zero_gives_empty_draft():
    d = ngram_lookup([5, 6, 7, 5, 6], n_max=2, n_min=1, k=0)
    assert d.draft == [] and d.ngram_size == 0


def test_tensor_input_gives_python_ints():
    d = ngram_lookup(torch.tensor([5, 6, 7, 5, 6]), n_max=2, n_min=2, k=2)
    assert d == NgramDraft([7, 5], 2, 0, 2)
    assert all(type(t) is int for t in d.draft)


@pytest.mark.parametrize("kwargs, word", [
    (dict(n_max=2, n_min=0, k=2), "n_min"),
    (dict(n_max=2, n_min=-1, k=2), "n_min"),
    (dict(n_max=1, n_min=2, k=2), "n_max"),
    (dict(n_max=2, n_min=1, k=-1), "k"),
])
def test_bad_arguments_raise(kwargs, word):
    with pytest.raises(ValueError, match=word):
        ngram_lookup([1, 2, 1, 2], **kwargs)


# ---- several continuations: the branches of an n-gram tree ----------------------------------

def test_continuations_docstring_example_and_prefix_skipping():
    from specnb.core.ngram import ngram_continuations

    found = ngram_continuations([1, 2, 9, 1, 2, 8, 1, 2], n_max=2, n_min=2, k=1, limit=2)
    assert [d.draft for d in found] == [[8], [9]]
    # [7, 1] follows the 2-gram [1, 5]; the 1-gram [5] finds [7, 1] twice more: nothing new.
    found = ngram_continuations([3, 5, 7, 1, 5, 7, 1, 5], n_max=2, n_min=1, k=2, limit=5)
    assert [d.draft for d in found] == [[7, 1]]
    assert ngram_continuations([1, 2, 3], n_max=2, n_min=1, k=0, limit=3) == []
    with pytest.raises(ValueError, match="limit"):
        ngram_continuations([1, 2, 1], n_max=2, n_min=1, k=2, limit=0)


@pytest.mark.parametrize("seed", range(20))
def test_the_first_continuation_is_ngram_lookups_draft(seed):
    from specnb.core.ngram import ngram_continuations

    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 4, (int(torch.randint(2, 30, (1,), generator=g)),),
                           generator=g).tolist()
    one = ngram_lookup(tokens, n_max=3, n_min=1, k=4)
    many = ngram_continuations(tokens, n_max=3, n_min=1, k=4, limit=4)
    assert (many[0].draft if many else []) == one.draft
    drafts = [d.draft for d in many]
    assert all(not a[:len(b)] == b for i, a in enumerate(drafts) for b in drafts[i + 1:])
