"""The prompts shipped in `data/prompts/`, as plain dicts (see data/README.md)."""

import json
from pathlib import Path

# A wheel (`pip install .`) ships data/ inside the package as specnb/_data (pyproject.toml); a
# checkout, and an editable install of it, read data/ beside specnb/.
_PACKAGE = Path(__file__).resolve().parent.parent  # specnb/
DATA_DIR = _PACKAGE / "_data" if (_PACKAGE / "_data").is_dir() else _PACKAGE.parent / "data"
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
