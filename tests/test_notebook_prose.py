"""The course's prose cannot go stale: a figure typed in a notebook's markdown is one it prints.

A notebook's outputs change when it runs on another machine; its markdown does not. So a
measured figure reaches the reader through an output (a print, a table read from a record under
`data/results/`), and the prose may quote it only where the same notebook shows it (CONVENTIONS.md,
"Prose and records"). For every notebook this test reads each markdown cell and checks that

- every speedup (`1.36×`), millisecond (`31 ms`) or rate (`12.5 tok/s`) figure is shown by one of
  the notebook's outputs, within the figure's rounding (`1.4×` is shown by an output `1.36`);
- no machine (a CPU or GPU model, an instruction set) and no date is named: the outputs and
  records name their machine, the prose says on what a result depends.

A formula's value is theory, not a measurement: write it as the arithmetic that gives it
(`6.8 / 1.24 ≈ 5.5`) or let a cell print it.
"""

import json
import re
from pathlib import Path

import pytest

from test_prose_figures import DATE, MACHINE, SPEEDUP

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NUMBER = re.compile(r"\d+(?:\.\d+)?")
FIGURES = {
    "speedup": SPEEDUP,
    "milliseconds": re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?ms\b"),
    "rate": re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:tok/s|tokens/s|tokens per second)\b"),
}


def output_numbers(notebook: dict) -> list[float]:
    """Every number an output of the notebook shows: streams, plain text and HTML."""
    texts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            for kind in ("text/plain", "text/html", "text/markdown"):
                texts.append("".join(output.get("data", {}).get(kind, "")))
    return [float(n) for n in NUMBER.findall("\n".join(texts))]


def shown(figure: str, numbers: list[float]) -> bool:
    """Whether an output number rounds to the figure: `1.4` is shown by 1.36 or 1.44, `2` by 2.3."""
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    value, half = float(figure), 0.5 * 10 ** -decimals + 1e-9
    return any(abs(number - value) <= half for number in numbers)


def problems(notebook: dict) -> list[str]:
    """(cell: kind: text) for each unprinted figure, machine or date in the markdown."""
    numbers, found = output_numbers(notebook), []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for kind, pattern in FIGURES.items():
            for match in pattern.finditer(text):
                figure = NUMBER.match(match.group(0)).group(0)
                if not shown(figure, numbers):
                    context = text[max(0, match.start() - 50):match.end() + 10].replace("\n", " ")
                    found.append(f"cell {index}: {kind} {match.group(0)!r} is printed by no "
                                 f"output: ...{context}...")
        for kind, pattern in (("machine", MACHINE), ("date", DATE)):
            for match in pattern.finditer(text):
                found.append(f"cell {index}: {kind} {match.group(0)!r} in the prose")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_quotes_only_what_the_notebook_prints(path):
    report = problems(json.loads(path.read_text()))
    assert not report, (f"{path.name}: say it without the figure, or print it in a cell above:\n"
                        + "\n".join(report))


def notebook(markdown: str, output: str = "") -> dict:
    return {"cells": [{"cell_type": "code", "source": "", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": output}]},
        {"cell_type": "markdown", "source": markdown}]}


@pytest.mark.parametrize("markdown, output", [
    ("It ran at 1.36× autoregressive decoding.", "measured speedup 1.222×"),
    ("One forward costs 31 ms here.", "t(1) = 57.11 ms"),
    ("It wrote 12.5 tok/s.", "rate 11.8"),
    ("Checking cost 1.5×.", "checking cost 1.44 (1.40-1.61)"),  # 1.44 rounds to 1.4, not 1.5
    ("On the AMD EPYC it gains.", ""),
    ("Measured on 2026-12-04.", ""),
])
def test_a_stale_figure_or_a_machine_is_caught(markdown, output):
    assert problems(notebook(markdown, output))


@pytest.mark.parametrize("markdown, output", [
    ("It ran at 1.2× autoregressive decoding.", "measured speedup 1.222×"),
    ("Checking cost 1.4×, and 2× in theory.", "checking cost 1.44; bound 2.3"),
    ("One forward costs 57 ms.", "t(1) = 57.11 ms"),
    ("A 4 × 4 mask, a [B, 9] forward, 6.8 / 1.24 ≈ 5.5.", ""),
])
def test_a_printed_figure_or_a_shape_passes(markdown, output):
    assert problems(notebook(markdown, output)) == []
