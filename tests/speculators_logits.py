"""Draft logits of an exported speculators-format EAGLE-3 checkpoint, by speculators' own model.

    python tests/speculators_logits.py DIR INPUTS.pt OUT.pt

Run by tests/test_export.py in a fresh interpreter with speculators (installed `--no-deps` in
its own folder, the Makefile's SPECULATORS) first on the path. INPUTS.pt holds `hidden_states
[1, T, 3H]` (three target layers side by side) and `input_ids [1, T]`; OUT.pt receives the
logits `[1, T, draft vocabulary]` of `speculators.models.eagle3.Eagle3DraftModel` (one step,
eager attention, float32), read off its LM head, which `forward` itself reduces to an argmax.

speculators' package imports its training-data module on the way (speculators/train/data.py,
for `shift_batch`), which imports openai, datasets and hs_connectors at the top; the model never
calls them, so when they are not installed they are empty stand-ins here.
"""

import importlib.util
import sys
import types

import torch


def stand_ins(modules: dict) -> None:
    """{module: attributes}: an empty module for each whose top package is not installed."""
    absent = {name.split(".")[0] for name in modules
              if importlib.util.find_spec(name.split(".")[0]) is None}
    for name, attributes in modules.items():
        if name.split(".")[0] in absent:
            module = types.ModuleType(name)
            module.__dict__.update(attributes, __path__=[])
            sys.modules[name] = module


def main(folder: str, inputs: str, out: str) -> None:
    unused = type("Unused", (), {})
    openai = dict(OpenAI=unused, AsyncOpenAI=unused, Client=unused, AsyncClient=unused,
                  ChatCompletion=unused, ChatCompletionMessageParam=unused, Completion=unused)
    stand_ins({"openai": openai, "openai.types": {}, "openai.types.chat": openai,
               "openai.types.completion": openai,
               "datasets": dict(Dataset=unused, load_from_disk=None, load_dataset=None),
               "hs_connectors": dict(FileTransfer=unused, HiddenStatesTransfer=unused,
                                     HiddenStatesBackend=unused)})
    from safetensors.torch import load_file
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(folder)
    config.transformer_layer_config._attn_implementation = "eager"
    model = Eagle3DraftModel(config)
    missing, unexpected = model.load_state_dict(load_file(f"{folder}/model.safetensors"),
                                                strict=False)
    # Only the verifier's own head and norm (for training losses) are not in a draft checkpoint.
    assert not unexpected and set(missing) <= {"verifier_lm_head.weight",
                                               "verifier_norm.weight"}, (missing, unexpected)
    model = model.eval().float()
    data = torch.load(inputs)
    captured = []
    hook = model.lm_head.register_forward_hook(lambda module, args, output: captured.append(output))
    ids = data["input_ids"]
    with torch.no_grad():
        model(hidden_states=data["hidden_states"].float(), input_ids=ids,
              document_ids=torch.zeros_like(ids), ttt_steps=1)
    hook.remove()
    torch.save({"logits": captured[0].float(), "d2t": model.d2t.clone()}, out)


if __name__ == "__main__":
    main(*sys.argv[1:])
