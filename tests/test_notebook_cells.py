"""The cells the browser test runs (tests/notebook_cells.py): enough for the widgets, no more."""

from pathlib import Path

import pytest
from notebook_cells import cells_the_widgets_need, is_widget_cell, names_of, notebook_cells

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def code(source: str) -> dict:
    return {"cell_type": "code", "source": source}


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "source": source}


def test_the_docstring_example():
    cells = [code("%matplotlib inline\nimport math\nA = 1"), code("B = slow_race()"),
             markdown("# prose"), code("C = A + 1"), code("interact(f, c=C)")]
    assert cells_the_widgets_need(cells) == [0, 3, 4]


def test_a_cell_that_changes_an_earlier_object_is_run_and_so_is_the_object():
    cells = [code("import x"), code("grid = {}"), code("grid['a'] = 2"), code("other = 3"),
             code("widgets.interact(lambda: grid, a=1)")]
    assert cells_the_widgets_need(cells) == [0, 1, 2, 4]


def test_names_a_cell_binds_before_reading_are_its_own():
    binds, reads = names_of("fig = plot()\ndisplay(fig)\ndef show(alpha):\n    return alpha + BETA")
    assert binds == {"fig", "show"}
    assert reads == {"plot", "display", "BETA"}


def test_loop_variables_of_comprehensions_and_lambdas_are_not_the_cells():
    """`row` below belongs to the generator: a cell that binds a top-level `row` earlier (a for
    loop over a race's rows) is not needed for it."""
    binds, reads = names_of('c = mean(row["c"] for row in clock["rows"])\n'
                            'f = lambda t: t + K\nd = {k: v for k, v in pairs}')
    assert binds == {"c", "f", "d"} and reads == {"mean", "clock", "K", "pairs"}
    cells = [code("import x"), code("clock = race()"), code("for row in rows: print(row)"),
             code("c = mean(row['c'] for row in clock['rows'])"), code("interact(f, c=c)")]
    assert cells_the_widgets_need(cells) == [0, 1, 3, 4]


def test_cells_after_the_last_widget_are_not_run():
    cells = [code("A = 1"), code("interact(f, a=A)"), code("B = A")]
    assert cells_the_widgets_need(cells) == [0, 1]


def test_no_widget_no_cells():
    assert cells_the_widgets_need([code("A = 1")]) == []
    assert not is_widget_cell("interactive_plot = 1")


@pytest.mark.parametrize("name", ["03_deriving_the_acceptance_rule", "06_when_speculation_pays",
                                  "10_timing"])
def test_the_widget_notebooks_run_their_widget_cells_and_skip_some(name):
    cells = notebook_cells(NOTEBOOKS / f"{name}.ipynb")
    needed = cells_the_widgets_need(cells)
    code_cells = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"]
    widget_cells = [i for i in code_cells if is_widget_cell("".join(cells[i]["source"]))]
    assert widget_cells and set(widget_cells) <= set(needed) and code_cells[0] in needed
    assert len(needed) < len(code_cells)
