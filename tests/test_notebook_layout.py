"""Static checks on the committed notebooks: what nbval cannot see because it re-runs them.

nbval compares a fresh run against the marked cells; these tests read the committed files and
check what a learner opening them without a kernel sees: figures present as images, outputs from
one clean run, no frozen progress bars, and the shape every notebook shares (predict prompts with
hidden answers; a summary, exercises and references at the end).
"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A code cell that draws: it makes or shows a figure, or calls one of specnb.viz's plot functions.
DRAWS = re.compile(r"plt\.(subplots|figure|show)\(|display\(fig|\bplot_\w+\(")
ARXIV = re.compile(r"arXiv:\d{4}\.\d{4,5}")


def load(path):
    return json.loads(path.read_text())


def code_cells(notebook):
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def text_of(output):
    text = output.get("text", output.get("data", {}).get("text/plain", ""))
    return "".join(text) if isinstance(text, list) else text


def source_of(cell):
    return "".join(cell["source"])


ids = [path.stem for path in NOTEBOOKS]


def test_every_notebook_is_found():
    assert len(NOTEBOOKS) >= 11, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_outputs_come_from_one_clean_run(path):
    notebook = load(path)
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    assert "widgets" not in notebook["metadata"], "saved widget state: delete metadata.widgets"
    counts = [cell["execution_count"] for cell in code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}"
    for number, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", f"cell {number} holds an error"
            text = text_of(output)
            assert "Loading weights" not in text and "it/s]" not in text, (
                f"cell {number} keeps a frozen progress bar: {text[:80]!r}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_figure_cells_hold_their_image(path):
    """A cell that draws has a PNG in its committed output (a bare Figure needs display(fig)).

    Exempt: widget cells (the image lives in the widget) and cells that draw only a GPU record
    and print, on a CPU, that there is none.
    """
    missing = []
    for number, cell in enumerate(load(path)["cells"]):
        source = source_of(cell)
        if cell["cell_type"] != "code" or not DRAWS.search(source) or "interact" in source:
            continue
        outputs = cell["outputs"]
        if any("image/png" in output.get("data", {}) for output in outputs):
            continue
        if any("GPU" in text_of(output) for output in outputs):
            continue
        missing.append(number)
    assert not missing, f"cells {missing} draw but their committed outputs hold no PNG"


def markdown_headings(notebook):
    headings = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            headings += re.findall(r"^## (.+?)\s*$", source_of(cell), flags=re.M)
    return headings


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_ends_with_summary_exercises_and_references(path):
    notebook = load(path)
    assert markdown_headings(notebook)[-3:] == ["Summary", "Exercises", "References"]
    tail = "".join(source_of(cell) for cell in notebook["cells"][-3:])
    references = tail.split("## References", 1)[1]
    assert ARXIV.search(references), "references name papers with their arXiv ids"
    exercises = tail.split("## Exercises", 1)[1].split("## References", 1)[0]
    assert len(re.findall(r"^\s*\d+\.\s", exercises, flags=re.M)) >= 2, "two or three exercises"


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=ids[1:])
def test_asks_the_learner_to_predict(path):
    """Before a key output: a prompt to predict and an answer hidden until opened."""
    markdown = [source_of(cell) for cell in load(path)["cells"] if cell["cell_type"] == "markdown"]
    assert any("**Predict" in text for text in markdown), "a markdown prompt: **Predict.** ..."
    assert any("<details>" in text for text in markdown), "an answer inside <details>"


# A line that is one bare upper-case word (ANSWER1, SUMMARY02): a placeholder, not prose.
PLACEHOLDER = re.compile(r"^\s*[A-Z][A-Z0-9_]{3,}\s*$", flags=re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_markdown_holds_no_placeholder(path):
    found = [(number, match.group().strip())
             for number, cell in enumerate(load(path)["cells"]) if cell["cell_type"] == "markdown"
             for match in PLACEHOLDER.finditer(source_of(cell))]
    assert not found, f"placeholders where prose belongs (cell, text): {found}"


def test_the_placeholder_rule_catches_a_placeholder():
    assert PLACEHOLDER.search("Some prose.\n\nANSWER02\n</details>")
    assert not PLACEHOLDER.search("## Summary\n\n* TV: a bound, not a NOTE")
