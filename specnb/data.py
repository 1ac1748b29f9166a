"""The prompts shipped in `data/prompts/`, as plain dicts (see data/README.md)."""

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
GROUPS = ("open-ended", "input-grounded")


def load_prompts(split: str = "eval", group: str | None = None) -> list:
    """Prompts of `data/prompts/{split}.jsonl`, optionally only one group."""
    path = DATA_DIR / "prompts" / f"{split}.jsonl"
    if not path.exists():
        raise ValueError(f"no prompt split {split!r}: {path} does not exist")
    if group is not None and group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS} or None, got {group!r}")
    with open(path, encoding="utf-8") as f:
        prompts = [json.loads(line) for line in f if line.strip()]
    return [p for p in prompts if group is None or p["group"] == group]
