"""The shipped prompts: well-formed, the eval split held out from training, rebuildable."""

import subprocess
import sys

import pytest

from specnb.models.data import DATA_DIR, GROUPS, load_prompts

TASKS = {"chat", "qa", "code-edit", "summary", "rewrite", "extract"}


@pytest.mark.parametrize("split", ["eval", "train"])
def test_prompts_are_well_formed(split):
    prompts = load_prompts(split)
    assert prompts and all(p["group"] in GROUPS and p["task"] in TASKS and p["prompt"].strip()
                           for p in prompts)
    assert len({p["id"] for p in prompts}) == len(prompts)
    assert {p["group"] for p in prompts} == set(GROUPS)


def test_eval_is_held_out_from_training():
    def windows(text, size=12):
        words = text.split()
        return {" ".join(words[i:i + size]) for i in range(max(1, len(words) - size + 1))}

    train_windows = set().union(*(windows(p["prompt"]) for p in load_prompts("train")))
    for prompt in load_prompts("eval"):
        assert not windows(prompt["prompt"]) & train_windows, prompt["id"]
    assert not {p["id"] for p in load_prompts("eval")} & {p["id"] for p in load_prompts("train")}


def test_train_prompts_rebuild_exactly(tmp_path):
    out = tmp_path / "train.jsonl"
    subprocess.run([sys.executable, str(DATA_DIR / "prompts" / "make_train_prompts.py"), str(out)],
                   check=True, capture_output=True)
    assert out.read_bytes() == (DATA_DIR / "prompts" / "train.jsonl").read_bytes()


def test_group_filter_and_errors():
    assert all(p["group"] == "input-grounded" for p in load_prompts("eval", "input-grounded"))
    with pytest.raises(ValueError, match="group"):
        load_prompts("eval", "closed")
    with pytest.raises(ValueError, match="split"):
        load_prompts("nope")


def test_every_record_names_its_cpu():
    """A timing means little without its machine: every JSON record in data/results names the
    CPU it ran on (model and instruction set; beside a GPU, the host's), or the lent GPU."""
    import json

    unnamed = []
    for path in sorted((DATA_DIR / "results").glob("*.json")):
        record = json.loads(path.read_text())
        cpu = record.get("cpu")
        named = (isinstance(cpu, dict) and cpu.get("name") and cpu.get("isa")) or \
            "NVIDIA" in str(record.get("machine", ""))
        if not named:
            unnamed.append(path.name)
    assert not unnamed, f"records that name no CPU: {unnamed}"


def test_every_record_carries_its_date_versions_and_command():
    """A record must say how to reproduce it: when, with which torch (and transformers where it
    ran models through it), and the exact command that wrote it."""
    import json
    import re

    missing = []
    for path in sorted((DATA_DIR / "results").glob("*.json")):
        record = json.loads(path.read_text())
        versions = record.get("versions") or {"torch": record.get("torch") or
                                              record.get("training", {}).get("torch")}
        command = re.sub(r"^(\w+=\S+ )+", "", record.get("command", ""))  # SPECNB_CPU_PATH=… first
        if not record.get("date") or not versions.get("torch") or \
                not command.startswith(("python -m specnb", "python3 scripts/")):
            missing.append(path.name)
    assert not missing, f"records without a date, torch version or command: {missing}"
