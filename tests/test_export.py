"""`specnb.export`: a feature head as an EAGLE-3 checkpoint, checked by code we did not write.

- The flat layout passes the name and shape rules of vLLM's and SGLang's EAGLE-3 loaders
  (tests/eagle3_loaders.py, ported from their source): every tensor loads, none is dropped,
  draft ids map to the head's target ids, and the engines read the head's target layers.
  Broken exports (a transposed fc, d2t as ids, layer ids off by one, the decoder layer under a
  name SGLang drops, an unknown key, tied embeddings) fail those rules.
- The speculators layout loads in speculators' own Eagle3 model (installed for the tests only,
  `--no-deps`, in its own folder: the Makefile's SPECULATORS, run in a fresh interpreter), whose
  draft logits on the same target hidden states equal specnb's head's.
- The embedded engines-layout head (data/engines_head), the one the command exports by default,
  passes the same rules for the real 30-layer target, and speculators' model reproduces its
  draft logits on the target's own hidden states.
- Bad input gets a clear error and leaves nothing behind.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import DynamicCache

from specnb import export
from specnb.drafters.head import FeatureHead, HeadConfig
from specnb.models.pairs import EMBEDDED_ENGINES_HEAD, EMBEDDED_HEAD

from eagle3_loaders import LoadError, sglang_load, vllm_load

ROOT = Path(__file__).resolve().parents[1]
SPECULATORS = "0.9.0"
TARGET = SimpleNamespace(num_hidden_layers=12, hidden_size=64, vocab_size=100,
                         architectures=["LlamaForCausalLM"])


def engine_head(seed: int = 0, **changes) -> FeatureHead:
    """A small head in the engines' layout (random weights: the format does not care)."""
    config = HeadConfig(**{"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 16, "rope_theta": 10000.0,
                           "rms_norm_eps": 1e-6, "feature_layers": (2, 6, 9),
                           "draft_vocab_size": 40, "max_position_embeddings": 256,
                           "target_vocab_size": 100, "feature_norms": False, **changes})
    generator = torch.Generator().manual_seed(seed)
    embed = torch.nn.Embedding(config.target_vocab_size, config.hidden_size)
    keep = torch.randperm(config.target_vocab_size, generator=generator)[:config.draft_vocab_size]
    head = FeatureHead(config, embed, keep.sort().values)
    with torch.no_grad():
        for parameter in [*head.parameters(), embed.weight]:
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1
                            + (1.0 if parameter.dim() == 1 else 0.0))
    return head.eval()


def exported(tmp_path, head=None, layout="engines", name="out"):
    out = export.export_eagle3(head or engine_head(), TARGET, tmp_path / name, layout)
    return load_file(out / "model.safetensors"), json.loads((out / "config.json").read_text())


def both_engines(tensors, config):
    vllm = vllm_load(tensors, config, TARGET.num_hidden_layers)
    sglang = sglang_load(tensors, config, TARGET.num_hidden_layers)
    return vllm, sglang


def test_one_folder_loads_in_vllm_and_sglang_as_the_head(tmp_path):
    head = engine_head()
    tensors, config = exported(tmp_path, head)
    vllm, sglang = both_engines(tensors, config)
    assert sglang["dropped"] == [] and sglang["missing"] == []
    for engine in (vllm, sglang):
        assert torch.equal(engine["draft_to_target"], head.draft_to_target)
        assert engine["hidden_states"] == list(head.config.feature_layers)
    assert vllm["norm_before_residual"] is False
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert not config["tie_word_embeddings"] and "embed_tokens.weight" not in tensors
    assert tensors["t2d"].sum() == head.config.draft_vocab_size
    assert torch.equal(tensors["fc.weight"], head.fc.weight.detach())


def _transposed_fc(tensors, config):
    tensors["fc.weight"] = tensors["fc.weight"].T.contiguous()


def _d2t_as_ids(tensors, config):
    tensors["d2t"] = tensors["d2t"] + torch.arange(len(tensors["d2t"]))


def _vllm_layers_off_by_one(tensors, config):
    config["eagle_aux_hidden_state_layer_ids"] = [k - 1 for k in
                                                  config["eagle_aux_hidden_state_layer_ids"]]


def _sglang_layers_off_by_one(tensors, config):
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = \
        config["eagle_aux_hidden_state_layer_ids"]  # HF indices where SGLang wants one less


def _layers_0_names(tensors, config):
    for name in [n for n in tensors if n.startswith("midlayer.")]:
        tensors[name.replace("midlayer.", "layers.0.")] = tensors.pop(name)


def _model_prefix(tensors, config):
    tensors["model.fc.weight"] = tensors.pop("fc.weight")


def _tied(tensors, config):
    config["tie_word_embeddings"] = True


@pytest.mark.parametrize("break_it", [_transposed_fc, _d2t_as_ids, _vllm_layers_off_by_one,
                                      _sglang_layers_off_by_one, _layers_0_names, _model_prefix,
                                      _tied])
def test_a_broken_export_fails_the_engines_rules(tmp_path, break_it):
    head = engine_head()
    tensors, config = exported(tmp_path, head)
    break_it(tensors, config)
    try:
        vllm, sglang = both_engines(tensors, config)
    except LoadError:
        return
    problems = [sglang["dropped"], sglang["missing"]] + [
        not torch.equal(engine["draft_to_target"], head.draft_to_target)
        or engine["hidden_states"] != list(head.config.feature_layers)
        for engine in (vllm, sglang)]
    assert any(problems), f"{break_it.__name__} passed the engines' rules"


def test_the_speculators_layout_names_the_verifier(tmp_path):
    head = engine_head()
    tensors, config = exported(tmp_path, head, "speculators")
    assert config["speculators_model_type"] == "eagle3"
    assert config["architectures"] == ["Eagle3Speculator"]
    assert config["speculators_config"]["verifier"] == {
        "name_or_path": export.VERIFIER, "architectures": ["LlamaForCausalLM"]}
    assert config["norm_before_residual"] is False
    assert config["transformer_layer_config"]["num_hidden_layers"] == 1
    assert "layers.0.hidden_norm.weight" in tensors and not any("midlayer" in n for n in tensors)
    assert torch.equal(tensors["embed_tokens.weight"], head.embed[0].weight.detach())


def specnb_logits(head, features, ids):
    """The head's draft logits for entries (F_t, x_{t+1}), all at once, positions 0..T-1."""
    width = ids.shape[1]
    with torch.no_grad():
        out = head(ids, torch.ones(1, width, dtype=torch.long), torch.arange(width)[None],
                   DynamicCache(), features=features)
    return out.logits


def speculators_logits(tmp_path, head, target_config, features, ids) -> dict:
    """speculators' own Eagle3 model on `head` exported in its layout: its logits and d2t."""
    folder = os.environ.get("SPECNB_SPECULATORS")
    if not folder:
        pytest.skip(f"run by `make test`, which installs speculators {SPECULATORS} (--no-deps) "
                    f"and names its folder in SPECNB_SPECULATORS")
    assert (Path(folder) / "speculators").is_dir(), f"no speculators in {folder}: `make setup`"
    out = export.export_eagle3(head, target_config, tmp_path / "spec", "speculators")
    torch.save({"hidden_states": features.flatten(-2), "input_ids": ids}, tmp_path / "in.pt")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(folder).resolve())] + [p for p in os.environ.get("PYTHONPATH", "").split(
            os.pathsep) if p])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "speculators_logits.py"),
                           str(out), str(tmp_path / "in.pt"), str(tmp_path / "out.pt")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return torch.load(tmp_path / "out.pt")


@pytest.mark.slow  # a fresh interpreter importing speculators and transformers: ~10 s
def test_speculators_own_model_loads_the_export_and_agrees(tmp_path):
    head = engine_head(seed=1)
    generator = torch.Generator().manual_seed(2)
    width = 9
    features = torch.randn(1, width, 3, TARGET.hidden_size, generator=generator) * 3
    ids = torch.randint(0, TARGET.vocab_size, (1, width), generator=generator)
    theirs = speculators_logits(tmp_path, head, TARGET, features, ids)
    ours = specnb_logits(head, features, ids)
    assert torch.equal(theirs["d2t"], head.draft_to_target - torch.arange(40))
    assert torch.allclose(theirs["logits"], ours, atol=1e-4, rtol=1e-4), \
        (theirs["logits"] - ours).abs().max()
    # The same check fails for a head that norms each layer first (specnb's default layout),
    # were it exported anyway: the exported math is the engines', not that head's.
    normed = engine_head(seed=1, feature_norms=True)
    normed.load_state_dict(head.state_dict(), strict=False)
    assert not torch.allclose(specnb_logits(normed, features, ids), ours, atol=1e-2)


@pytest.fixture(scope="module")
def embedded_engines_head():
    """The embedded target and the engines-layout head it ships (data/engines_head)."""
    from specnb.drafters import FeatureDrafter
    from specnb.models.loading import chat_ids, load_model

    target, tokenizer = load_model(device="cpu", cpu_path="dense")
    head = FeatureDrafter.from_pretrained(EMBEDDED_ENGINES_HEAD, target).head
    ids = chat_ids(tokenizer, "Name three uses of a paperclip.")
    with torch.no_grad():
        hidden = target(ids, output_hidden_states=True).hidden_states
    # Entry t = (F_t, x_{t+1}): the target's layers at t beside the token after it.
    features = torch.stack([hidden[k][:, :-1] for k in head.config.feature_layers], dim=2)
    return target, head, features, ids[:, 1:]


@pytest.mark.slow
@pytest.mark.embedded
def test_the_embedded_engines_head_is_what_speculators_computes(tmp_path, embedded_engines_head):
    """The exported checkpoint is the head specnb runs: speculators' model, given the target's
    own hidden states at layers 2, 15 and 27, returns specnb's draft logits."""
    target, head, features, ids = embedded_engines_head
    theirs = speculators_logits(tmp_path, head, target.config, features, ids)
    ours = specnb_logits(head, features, ids)
    offsets = head.draft_to_target - torch.arange(len(head.draft_to_target))
    assert torch.equal(theirs["d2t"], offsets)
    assert torch.allclose(theirs["logits"], ours, atol=1e-3, rtol=1e-3), \
        (theirs["logits"] - ours).abs().max()
    assert torch.equal(theirs["logits"].argmax(-1), ours.argmax(-1))


@pytest.mark.parametrize("changes, message", [
    (dict(feature_norms=True), "feature_norms=False"),
    (dict(feature_layers=(2, 6, 9, 11)), "exactly 3"),
    (dict(feature_layers=(2, 6, 12)), "1 <= k <= 11"),
    (dict(feature_layers=(9, 6, 2)), "ascending"),
    (dict(target_vocab_size=120, draft_vocab_size=40), "mismatched target"),
])
def test_a_head_the_engines_cannot_run_is_refused(tmp_path, changes, message):
    with pytest.raises(export.ExportError, match=message):
        export.export_eagle3(engine_head(**changes), TARGET, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_kept_and_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(export.ExportError, match="not an empty folder"):
        export.export_eagle3(engine_head(), TARGET, taken)
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]

    def full_disk(*args, **kwargs):
        raise OSError("No space left on device")
    monkeypatch.setattr("safetensors.torch.save_file", full_disk)
    with pytest.raises(OSError, match="No space"):
        export.export_eagle3(engine_head(), TARGET, tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


@pytest.mark.embedded
def test_the_command_exports_the_engines_head_and_refuses_the_default(tmp_path, capsys,
                                                                     embedded_engines_head):
    """`python -m specnb.export DIR` writes data/engines_head, which both engines' rules load
    for the real 30-layer target; the default head (normed layers, layer 30) is refused with
    the reason (exit 2), and nothing is written."""
    target, head, *_ = embedded_engines_head
    assert export.main([str(tmp_path / "out")]) == 0
    tensors = load_file(tmp_path / "out" / "model.safetensors")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    vllm = vllm_load(tensors, config, target.config.num_hidden_layers)
    sglang = sglang_load(tensors, config, target.config.num_hidden_layers)
    assert sglang["dropped"] == [] and sglang["missing"] == []
    for engine in (vllm, sglang):
        assert torch.equal(engine["draft_to_target"], head.draft_to_target)
        assert engine["hidden_states"] == [2, 15, 27] == list(head.config.feature_layers)
    assert torch.equal(tensors["fc.weight"], head.fc.weight.detach())
    with pytest.raises(SystemExit) as stop:
        export.main([str(tmp_path / "refused"), "--head", str(EMBEDDED_HEAD)])
    assert stop.value.code == 2 and "feature_norms=False" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()
