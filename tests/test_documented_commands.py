"""Every command the documentation shows still parses: a reader who copies one from a README,
TESTING.md, a record's `command` (how it was made) or a notebook's or assignment's markdown must
not meet an unknown flag or a renamed module.

Each command runs its module's `main` in this process until argparse has read the arguments,
then stops (no model is loaded, nothing runs). A bare `python -m module` names a tool in prose
and is left out; commands with an ellipsis are abbreviations.
"""

import argparse
import contextlib
import importlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Packages whose `python -m` runs a module that imports without running.
ENTRY = {"specnb": "specnb.__main__", "specnb.bench": "specnb.bench.compare"}


def documents() -> dict:
    """{where: markdown text} for the READMEs and every notebook's markdown cells."""
    texts = {name: (ROOT / name).read_text() for name in (
        "README.md", "data/README.md", "TESTING.md", "specnb/README.md", "assignments/README.md")}
    for path in sorted((ROOT / "data" / "results").glob("*.json")):  # each record's own command
        texts[f"data/results/{path.name}"] = f"`{json.loads(path.read_text()).get('command', '')}`"
    for folder in ("notebooks", "assignments/source"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for index, cell in enumerate(json.loads(path.read_text())["cells"]):
                if cell["cell_type"] == "markdown":
                    texts[f"{folder}/{path.name}, cell {index}"] = "".join(cell["source"])
    return texts


def commands(text: str):
    """The `python -m specnb...` command lines of a markdown text: inline code spans (which may
    wrap) and lines of fenced blocks (backslash continuations joined); `a && b` gives both."""
    fenced = re.compile(r"```[a-z]*\n(.*?)```", re.S)
    found = [line for block in fenced.findall(text)
             for line in block.replace("\\\n", " ").splitlines()
             if re.search(r"python3? -m specnb", line)]
    found += [m.group(1) for m in re.finditer(r"`([^`]*python3? -m specnb[^`]*)`",
                                                fenced.sub("", text))]
    for line in found:
        for part in re.split(r"\s*(?:&&|;)\s*", line):
            match = re.search(r"python3? -m (specnb[\w.]*)(.*)", part, re.S)
            if match and match.group(2).strip() and "…" not in part and "..." not in part:
                yield match.group(1), " ".join(match.group(2).split())


FIRST_SHOWN = {}  # one case per distinct command, named by the first place that shows it
for where, text in documents().items():
    for module, args in commands(text):
        FIRST_SHOWN.setdefault((module, args), (module, args, where))
CASES = list(FIRST_SHOWN.values())


class Parsed(Exception):
    """Raised right after argparse accepted the arguments."""


@pytest.fixture
def parse_only(monkeypatch):
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Parsed
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)


def test_the_documents_show_commands():
    modules = {module for module, _, _ in CASES}
    assert len(CASES) >= 50 and {"specnb.bench", "specnb.bench.batch", "specnb.bench.overhead",
                                 "specnb.training.train_head"} <= modules


@pytest.mark.parametrize("module, args, where", CASES,
                         ids=[f"{m} {a}"[:90] for m, a, _ in CASES])
def test_documented_command_parses(module, args, where, parse_only):
    argv = shlex.split(args, comments=True)
    argv = argv[:argv.index(">")] if ">" in argv else argv  # a redirected output
    try:
        entry = importlib.import_module(ENTRY.get(module, module))
    except ModuleNotFoundError:
        pytest.fail(f"{where}: `python -m {module}` names no module")
    errors = io.StringIO()
    with pytest.raises((Parsed, SystemExit)) as stopped, contextlib.redirect_stderr(errors), \
            contextlib.redirect_stdout(io.StringIO()):
        entry.main(argv)
    if stopped.type is SystemExit:
        assert stopped.value.code in (0, None), \
            f"{where}: python -m {module} {args}\n{errors.getvalue().strip()}"


def test_a_renamed_flag_is_caught(parse_only):
    """The check itself can fail: a flag the parser does not know stops it with exit code 2."""
    from specnb.bench import compare
    with pytest.raises(SystemExit) as stopped, contextlib.redirect_stderr(io.StringIO()):
        compare.main(["--temperture", "0.7"])  # misspelt: --temperature
    assert stopped.value.code == 2
