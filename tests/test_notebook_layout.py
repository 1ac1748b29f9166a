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


MACHINE_LINE = re.compile(r"CPU .+ · torch \S+ · transformers \S+ · Python \S+")


def machine_of(notebook) -> str | None:
    """The machine line the first code cell printed (`specnb.machine_line()`), if it did."""
    first = code_cells(notebook)[0]
    if "specnb.machine_line()" not in "".join(first["source"]):
        return None
    found = MACHINE_LINE.search(" ".join(text_of(o) for o in first.get("outputs", [])))
    return found.group(0) if found else None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_names_the_machine_its_outputs_come_from(path):
    assert machine_of(load(path)), "the first cell prints specnb.machine_line(): make notebooks"


def test_all_outputs_come_from_one_machine():
    machines = {path.name: machine_of(load(path)) for path in NOTEBOOKS}
    assert len(set(machines.values())) == 1, (
        "re-execute every notebook on one machine (make notebooks): "
        + "; ".join(f"{name}: {line}" for name, line in machines.items()))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_figure_cells_hold_their_image(path):
    """A cell that draws has a PNG in its committed output (a bare Figure needs display(fig)).

    A slider panel (specnb.viz.panel) counts when its frames hold images. Exempt: interact
    widget cells (the image lives in the widget) and cells that draw only a GPU record and
    print, on a CPU, that there is none.
    """
    missing = []
    for number, cell in enumerate(load(path)["cells"]):
        source = source_of(cell)
        if cell["cell_type"] != "code" or not DRAWS.search(source) or "interact" in source:
            continue
        outputs = cell["outputs"]
        if any("image/png" in output.get("data", {}) for output in outputs):
            continue
        if any('class="specnb-frames"' in "".join(output.get("data", {}).get("text/html", ""))
               and "data:image/png;base64," in "".join(output["data"]["text/html"])
               for output in outputs):
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


# One lesson per notebook: past these bounds a notebook teaches two, and splits where its question
# changes (as 05, the loop and its law, and 06, its price on the clock).
MAX_CELLS, MAX_WORDS = 40, 4000


def lesson_size(notebook) -> tuple[int, int]:
    """(cells, words of markdown)."""
    words = sum(len(source_of(cell).split()) for cell in notebook["cells"]
                if cell["cell_type"] == "markdown")
    return len(notebook["cells"]), words


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_one_lesson_per_notebook(path):
    cells, words = lesson_size(load(path))
    assert cells <= MAX_CELLS and words <= MAX_WORDS, (
        f"{cells} cells, {words} words of prose: split it where its question changes")


def test_the_lesson_bound_catches_two_notebooks_in_one():
    first, second = (load(path) for path in NOTEBOOKS[4:6])  # 05 and 06, joined again
    joined = {"cells": first["cells"] + second["cells"]}
    cells, words = lesson_size(joined)
    assert cells > MAX_CELLS or words > MAX_WORDS


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


# ----------------------------------------------------------------------------------------------
# Names the prose mentions
# ----------------------------------------------------------------------------------------------

DOTTED = re.compile(r"\bspecnb(?:\.[A-Za-z_]\w*)+")  # specnb.core.verify, specnb.load_pair
TICKED = re.compile(r"`([A-Za-z_]\w*)(?:\(\))?`")  # `verify`, `num_pred`, `draft_tokens()`
# Settings of the peers the notebooks compare with, quoted by their own names.
FOREIGN = {
    "prompt_lookup_num_tokens": "transformers' generate()",
    "attention_mask": "transformers' model inputs",
    "posterior_threshold": "vLLM's typical acceptance",
    "posterior_alpha": "vLLM's typical acceptance",
    "speculative_disable_by_batch_size": "vLLM's speculative config",
    "speculative_max_model_len": "vLLM's speculative config",
    "generation_config": "a transformers model's generation settings",
    "num_assistant_tokens": "transformers' assisted generation",
    "assistant_confidence_threshold": "transformers' assisted generation",
    "hidden_states": "transformers' output_hidden_states",
    "eagle_aux_hidden_state_layer_ids": "vLLM's and SGLang's EAGLE-3 config",
    "norm_before_residual": "vLLM's and speculators' EAGLE-3 config",
    "speculative_token_tree": "vLLM's speculative config",
}


def resolves(dotted: str) -> bool:
    """Whether `specnb.a.b` names a module or an attribute reachable from one."""
    import importlib

    parts = dotted.split(".")
    found = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        if hasattr(found, part):
            found = getattr(found, part)
            continue
        try:
            found = importlib.import_module(".".join(parts[:i + 1]))
        except ImportError:
            return False
    return True


@pytest.fixture(scope="module")
def library_names() -> set:
    """Every name the library defines: modules, module attributes, class members, parameters."""
    import importlib
    import inspect
    import pkgutil

    import specnb

    names = set()
    for info in pkgutil.walk_packages(specnb.__path__, "specnb."):
        if info.name.endswith("__main__"):  # importing it would run the main job
            continue
        names.add(info.name.rsplit(".", 1)[1])
        for name, value in vars(importlib.import_module(info.name)).items():
            names.add(name)
            members = list(vars(value).values()) if inspect.isclass(value) else [value]
            names.update(vars(value) if inspect.isclass(value) else ())
            for member in members:
                if callable(member):
                    try:
                        names.update(inspect.signature(member).parameters)
                    except (TypeError, ValueError):
                        pass
    return names


def unknown_names(notebook: dict, library: set) -> set:
    """Names a notebook mentions that neither the library nor the notebook's own code defines."""
    import builtins

    code = "\n".join(source_of(cell) for cell in code_cells(notebook))
    known = library | set(re.findall(r"[A-Za-z_]\w*", code)) | set(FOREIGN)
    unknown = set()
    for cell in notebook["cells"]:
        text = source_of(cell)
        unknown.update(name for name in DOTTED.findall(text) if not resolves(name))
        if cell["cell_type"] == "markdown":
            unknown.update(name for name in TICKED.findall(text)
                           if "_" in name.strip("_") and name not in known
                           and not hasattr(builtins, name))
    return unknown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_every_name_the_notebook_mentions_exists(path, library_names):
    """A function renamed or removed in the library leaves no stale name in the prose."""
    unknown = unknown_names(load(path), library_names)
    assert not unknown, f"names that specnb does not define: {sorted(unknown)}"


def test_the_name_rule_catches_a_removed_function(library_names):
    notebook = {"cells": [
        {"cell_type": "markdown", "source": "`verify_detailed` decides a batch; so does `verify`."},
        {"cell_type": "code", "source": "x = specnb.core.verify_rows(p, q)", "outputs": []}]}
    assert unknown_names(notebook, library_names) == {"verify_detailed", "specnb.core.verify_rows"}
