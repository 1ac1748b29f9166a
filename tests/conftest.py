"""Fixtures: the tiny random models of tiny_models.py, and the embedded model and draft.

torch, transformers and specnb are imported inside the fixtures: pytest-xdist's controller
loads this file too, before it starts the workers, and runs no test (the workers import them
with the test modules anyway)."""

import functools
import hashlib
import json
import os

import pytest

# The χ² tests hand specnb `torch.Generator()`s; specnb samples where the model is, so under
# SPECNB_TEST_DEVICE (scripts/gpu_check.py) a generator made there without a device is made on
# the test device. Unset, nothing changes.
SAMPLING_MODULES = {"test_speculative_exact"}


@functools.cache
def _test_device_generator():
    import torch
    from tiny_models import TEST_DEVICE

    generator = torch.Generator

    class TestDeviceGenerator(generator):
        def __new__(cls, device=None):
            return generator.__new__(cls, device=device or TEST_DEVICE)

    return TestDeviceGenerator


@pytest.fixture(autouse=True)
def _generators_on_test_device(request, monkeypatch):
    module = getattr(getattr(request, "module", None), "__name__", "")
    if module in SAMPLING_MODULES:
        import torch
        from tiny_models import TEST_DEVICE

        if TEST_DEVICE is not None:
            monkeypatch.setattr(torch, "Generator", _test_device_generator())


# `make test-portability` sets SPECNB_PVALUE_LOG: every χ² p-value a test computes is appended
# there (test id, p-value), so scripts/pvalue_margins.py can show how far each verdict is from
# flipping on another CPU.
PVALUE_LOG = os.environ.get("SPECNB_PVALUE_LOG")


@pytest.fixture(autouse=True)
def _record_pvalues(request, monkeypatch):
    if not PVALUE_LOG:
        return
    import scipy.stats  # specnb.stats imports chisquare from it at each call

    chisquare = scipy.stats.chisquare

    def recording(*args, **kwargs):
        result = chisquare(*args, **kwargs)
        with open(PVALUE_LOG, "a") as log:
            log.write(json.dumps([request.node.nodeid, float(result.pvalue)]) + "\n")
        return result

    monkeypatch.setattr(scipy.stats, "chisquare", recording)


@pytest.fixture(scope="session")
def _head_records_base(tmp_path_factory):
    return tmp_path_factory.mktemp("head-records")


@pytest.fixture(autouse=True)
def _head_records_outside_the_repo(request, monkeypatch, _head_records_base):
    """Token records and kept replies (specnb.training.head_records) go to a folder of each
    test's own (made only if written), never into the repository's data/head-data."""
    monkeypatch.setenv("SPECNB_HEAD_RECORDS", str(_head_records_base / hashlib.sha256(
        request.node.nodeid.encode()).hexdigest()[:16]))


@pytest.fixture(scope="session")
def target():
    from tiny_models import tiny_llama

    return tiny_llama(1)


@pytest.fixture(scope="session")
def drafts(target):
    """Drafts sharing the target's vocabulary: unrelated, close, and the target itself."""
    from tiny_models import perturbed, tiny_llama

    return {"random": tiny_llama(2, hidden=16, layers=1), "perturbed": perturbed(target, 3, 0.15),
            "same": target}


@pytest.fixture(scope="session")
def prompts():
    import torch
    from tiny_models import VOCAB

    generator = torch.Generator().manual_seed(4)
    return [torch.randint(1, VOCAB, (1, length), generator=generator) for length in (5, 11, 17)]


@pytest.fixture(scope="session")
def embedded():
    """The embedded SmolLM2-135M-Instruct and its tokenizer (prepared by `make`)."""
    from specnb.models.loading import load_model

    return load_model(device="cpu")



@pytest.fixture(scope="session")
def embedded_draft():
    """The distilled draft shipped in data/draft, as float32 on the CPU."""
    import torch
    from specnb.models.pairs import load_embedded_draft

    return load_embedded_draft(device="cpu", dtype=torch.float32)


@pytest.fixture
def offline_hub(monkeypatch):
    """The Hub as CI sees it, without waiting for network timeouts.

    huggingface_hub reads HF_HUB_OFFLINE once at import, so the environment variable alone
    comes too late; the module constant is patched as well.
    """
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
