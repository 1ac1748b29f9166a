"""Docstrings and comments say what the code does and why, not what it measured on which CPU.

A measured figure is data: it lives in a record under `data/results/` and reaches readers through
code (CONVENTIONS.md, "Prose and records"). This test scans the docstrings (found with `ast`) and
comments (found with `tokenize`) of specnb/**/*.py and scripts/*.py, so string literals that code
prints or computes with (a CPU tag, a record's file name) are not scanned. It flags a machine name
or instruction set, a speedup figure (`1.36×`, `2.1x`) and a date (`2026-01-31`).
"""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("specnb/**/*.py"), *ROOT.glob("scripts/*.py")])

# Case-sensitive, so a record's file name (`latency-cpu-amd-epyc-avx2.json`) or an ATen setting
# (`ATEN_CPU_CAPABILITY=avx2`) is not a machine name.
MACHINE = re.compile(
    r"\b(?:Xeon|EPYC|Epyc|Ryzen|Threadripper|Sapphire|AVX(?:-?512|2)?|AMX|H100|H200|A100|Intel|AMD)\b"
)
# A decimal followed by a times sign (`1.36×`, `2.1 x`, `1.49× (1.46–1.53)`) unless a number
# follows, or a whole number followed by `×` when no second operand follows: `4 x 4`, `2x2`,
# `3 × V`, `2 × (γ + 1)` and hex (`0x1f`) are not figures.
SPEEDUP = re.compile(r"(?<![\w.])(?:\d+\.\d+\s?[×x](?!\s*\d)|\d+\s?×(?!\s*[\dA-Zα-ωΓ-Ω(\[]))"
                     r"(?![\w])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
PATTERNS = {"machine": MACHINE, "speedup": SPEEDUP, "date": DATE}


def prose_lines(source):
    """(line number, text) for each line of a docstring or comment in `source`.

    Docstrings are string expressions standing alone as statements (a module's, a class's or a
    function's first, or a note between statements): no code reads them.
    """
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for offset, text in enumerate(node.value.value.splitlines()):
                lines.append((node.lineno + offset, text))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string))
    return sorted(lines)


def offending(source):
    """(line number, kind, text) for each docstring or comment line that quotes a machine or figure.

    `'''On Xeon it is 1.4x faster.'''` -> [(1, "machine", ...), (1, "speedup", ...)].
    The line number of a docstring line counts from the string's first line, so it is exact
    for docstrings written without backslash continuations.
    """
    found = []
    for line_number, text in prose_lines(source):
        for kind, pattern in PATTERNS.items():
            if pattern.search(text):
                found.append((line_number, kind, text.strip()))
    return found


def test_docstrings_and_comments_quote_no_machine_or_figure():
    report = []
    for path in SOURCES:
        for line_number, kind, text in offending(path.read_text(encoding="utf-8")):
            report.append(f"{path.relative_to(ROOT)}:{line_number}: {kind}: {text}")
    assert not report, (
        "Say on what the choice depends and point to the record under data/results/, "
        "without one machine's figures:\n" + "\n".join(report)
    )


BROKEN = [
    ('def f():\n    """Faster on Xeon."""\n    return 1\n', "machine"),
    ('"""Module."""\nx = 1  # 1.36x faster than the dense path\n', "speedup"),
    ("class C:\n    '''Uses AVX-512 kernels.'''\n", "machine"),
    ("# measured 2026-03-14\nx = 1\n", "date"),
    ('def f():\n    """Was 2× before the cache."""\n', "speedup"),
]


@pytest.mark.parametrize("source, kind", BROKEN)
def test_scanner_flags_a_broken_variant(source, kind):
    assert kind in {found_kind for _, found_kind, _ in offending(source)}


CLEAN = [
    'TAG = "intel-xeon-avx512"\nNAME = "Xeon"\nprint("1.36x faster on AMD EPYC")\n',
    'def f():\n    """Tokens per step."""\n    return "Intel Xeon 2026-01-31 1.36x"\n',
    "# logits [B, γ, V]; a 4 x 4 mask; 2x2 blocks; mask 0x1f\nx = 0x1f\n",
    '"""α = 0.8 and γ = 4 -> E[tokens] = (1 - 0.8**5) / (1 - 0.8) = 3.36."""\n',
]


@pytest.mark.parametrize("source", CLEAN)
def test_scanner_leaves_code_strings_and_shapes_alone(source):
    assert offending(source) == []


# The front doors: what a newcomer and an instructor read first carries no dated run, no
# machine comparison and no measured figure (those are in RESULTS.md, generated from the
# records). The README stays about a screen and a half.
DOCUMENTS = ["README.md", "TESTING.md", "specnb/README.md", "assignments/README.md",
             "book/index.md"]
README_MAX_LINES = 160


def markdown_offending(text):
    """(line number, kind, text) for each line of a markdown text that quotes a machine, a
    speedup or a date. Example: "1.5× on an AMD EPYC" -> machine and speedup."""
    return [(number, kind, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            for kind, pattern in PATTERNS.items() if pattern.search(line)]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_front_door_documents_quote_no_machine_or_figure(name):
    report = [f"{name}:{number}: {kind}: {line}"
              for number, kind, line in markdown_offending((ROOT / name).read_text())]
    assert not report, "figures belong in RESULTS.md (records):\n" + "\n".join(report)


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    assert "make run" in readme and "make test" in readme and "RESULTS.md" in readme


def test_markdown_scanner_flags_a_typed_run():
    found = markdown_offending("ran 1.49× (1.46–1.53) on the AMD EPYC, 2026-12-05")
    assert {kind for _, kind, _ in found} == {"machine", "speedup", "date"}
