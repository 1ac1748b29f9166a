"""Fixtures: the tiny random models of tiny_models.py, and the embedded model and draft."""

import pytest
import torch

import specnb.models
import specnb.pairs
from tiny_models import VOCAB, perturbed, tiny_llama


@pytest.fixture(scope="session")
def target():
    return tiny_llama(1)


@pytest.fixture(scope="session")
def drafts(target):
    """Drafts sharing the target's vocabulary: unrelated, close, and the target itself."""
    return {"random": tiny_llama(2, hidden=16, layers=1), "perturbed": perturbed(target, 3, 0.15),
            "same": target}


@pytest.fixture(scope="session")
def prompts():
    generator = torch.Generator().manual_seed(4)
    return [torch.randint(1, VOCAB, (1, length), generator=generator) for length in (5, 11, 17)]


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct and its tokenizer (prepared by `make`)."""
    return specnb.models.load_model(device="cpu")



@pytest.fixture(scope="session")
def embedded_draft():
    """The distilled draft shipped in data/draft, as float32 on the CPU."""
    return specnb.pairs.load_embedded_draft(device="cpu", dtype=torch.float32)
