"""scripts/gpu_head.py, the head's data and training on a lent GPU: the head's weights come
back in parts that re-join exactly (or not at all), new token records join data/ without
replacing a record that differs, and the data goal fits the machine's disk."""

import json
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_head  # noqa: E402


def test_the_token_goal_fits_the_disk():
    gib = 2**30
    assert gpu_head.token_goal(9_000_000, 0, 400 * gib) == 9_000_000
    assert gpu_head.token_goal(9_000_000, 0, 40 * gib, bytes_per_token=6_500,
                               reserve=0.25) == int(40 * gib * 0.75 / 6_500)
    # Shards already cached count towards the goal and already hold their disk.
    assert gpu_head.token_goal(9_000_000, 2_000_000, 13 * gib, bytes_per_token=6_500,
                               reserve=0.25) == 2_000_000 + int(13 * gib * 0.75 / 6_500)
    assert gpu_head.token_goal(5, 0, 0) == 1


def test_split_then_join_restores_the_weights(tmp_path):
    source = tmp_path / "model.safetensors"
    source.write_bytes(bytes(range(256)) * 100)
    parts = tmp_path / "parts"
    parts.mkdir()
    manifest = gpu_head.split_file(source, parts, part_bytes=10_000)
    assert [p["name"] for p in manifest["parts"]] == [f"model.safetensors.part-0{i}"
                                                      for i in range(3)]
    joined = gpu_head.join_file(parts, manifest, tmp_path / "joined.safetensors")
    assert joined.read_bytes() == source.read_bytes()


@pytest.mark.parametrize("damage", ["missing", "flipped"])
def test_a_damaged_part_joins_to_nothing(tmp_path, damage):
    source = tmp_path / "model.safetensors"
    source.write_bytes(bytes(range(256)) * 100)
    parts = tmp_path / "parts"
    parts.mkdir()
    manifest = gpu_head.split_file(source, parts, part_bytes=10_000)
    part = parts / manifest["parts"][1]["name"]
    if damage == "missing":
        part.unlink()
    else:
        part.write_bytes(b"\x00" + part.read_bytes()[1:])
    with pytest.raises(ValueError, match="part-01: missing or corrupted"):
        gpu_head.join_file(parts, manifest, tmp_path / "joined.safetensors")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "parts"]


def sent_back(folder: Path, records: dict, head: bytes | None = None) -> Path:
    """A folder as a GPU run returns it: summary, records archive, head parts."""
    folder.mkdir()
    (folder / "gpu-head-summary.json").write_text(json.dumps(
        {"device": "cuda", "wall_s": 1.0, "steps": [], "training": {"answer_tokens": 7}}))
    staged = folder / "staged"
    staged.mkdir()
    with tarfile.open(folder / "gpu-head-records.tar.gz", "w:gz") as archive:
        for name, data in records.items():
            (staged / name).write_bytes(data)
            archive.add(staged / name, arcname=name)
    if head is not None:
        (staged / "model.safetensors").write_bytes(head)
        manifest = gpu_head.split_file(staged / "model.safetensors", folder, part_bytes=100)
        manifest["config"] = {"hidden_size": 4}
        (folder / "head.json").write_text(json.dumps(manifest))
    return folder


def test_receive_adds_the_head_and_the_new_records(tmp_path, monkeypatch):
    records = tmp_path / "answers"
    records.mkdir()
    (records / "old.json.gz").write_bytes(b"kept")
    monkeypatch.setattr(gpu_head, "RECORDS", records)
    folder = sent_back(tmp_path / "back", {"old.json.gz": b"kept", "new.json.gz": b"added"},
                       head=b"weights" * 50)
    assert gpu_head.main(["receive", str(folder), "--head-out", str(tmp_path / "head")]) == 0
    assert (records / "new.json.gz").read_bytes() == b"added"
    assert (tmp_path / "head" / "model.safetensors").read_bytes() == b"weights" * 50
    assert json.loads((tmp_path / "head" / "config.json").read_text()) == {"hidden_size": 4}
    assert json.loads((tmp_path / "head" / "training.json").read_text()) == {"answer_tokens": 7}


def test_receive_never_replaces_a_record_that_differs(tmp_path, monkeypatch):
    records = tmp_path / "answers"
    records.mkdir()
    (records / "same-name.json.gz").write_bytes(b"ours")
    monkeypatch.setattr(gpu_head, "RECORDS", records)
    folder = sent_back(tmp_path / "back", {"same-name.json.gz": b"theirs"})
    with pytest.raises(ValueError, match="exists here with other content"):
        gpu_head.main(["receive", str(folder)])
    assert (records / "same-name.json.gz").read_bytes() == b"ours"
