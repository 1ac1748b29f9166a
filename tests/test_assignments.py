"""Tests of the course assignments: the markup, `release`, and `grade` on both versions.

The source notebooks (assignments/source, with solutions) must score full marks when graded;
their student versions (written by `python -m specnb.assignments release`) must score zero,
every test cell failing with a message that tells the student what to do, not a bare
assertion. Executing exercise 5 loads the embedded pair, hence the `embedded` marker;
grading executes notebooks in a Jupyter kernel, hence `slow`.
Deliberately wrong solutions are tested against the checks directly, in test_checks.py.
"""

import json
import pathlib
import subprocess
import sys

import nbformat
import pytest

from specnb import assignments

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "assignments" / "source"
NOTEBOOKS = sorted(p.name for p in SOURCE.glob("*.ipynb"))
EMBEDDED = "05_alpha_c_and_gamma.ipynb"


def params():
    return [pytest.param(name, marks=pytest.mark.embedded) if name == EMBEDDED else name
            for name in NOTEBOOKS]


def test_five_exercises():
    assert NOTEBOOKS == ["01_acceptance_test.ipynb", "02_batched_verify.ipynb",
                         "03_ngram_lookup.ipynb", "04_jacobi.ipynb", "05_alpha_c_and_gamma.ipynb"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_source_markup_is_nbgrader_compatible_and_outputs_are_clean(name):
    notebook = nbformat.read(SOURCE / name, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    assert "widgets" not in notebook.metadata
    ids = [assignments.grading(c).get("grade_id") for c in notebook.cells]
    assert None not in ids and len(set(ids)) == len(ids), "every cell needs a unique grade_id"
    for cell in notebook.cells:
        meta = assignments.grading(cell)
        assert meta["schema_version"] == 3
        has_solution = assignments.BEGIN_SOLUTION in cell.source
        assert has_solution == (cell.source.count(assignments.END_SOLUTION) > 0)
        if has_solution or (meta["solution"] and cell.cell_type == "code"):
            assert meta["solution"] and has_solution, cell.source[:80]
        if assignments.BEGIN_HIDDEN in cell.source:
            assert meta["grade"] and assignments.END_HIDDEN in cell.source
        if meta["grade"]:
            assert meta["points"] > 0
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not any(o.output_type == "error" for c in code for o in c.outputs)


def test_release_strips_solutions_and_hidden_tests(tmp_path):
    out = subprocess.run([sys.executable, "-m", "specnb.assignments", "release", "--out",
                          str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert out.count("wrote") == len(NOTEBOOKS)
    for name in NOTEBOOKS:
        source = nbformat.read(SOURCE / name, as_version=4)
        student = nbformat.read(tmp_path / name, as_version=4)
        assert len(student.cells) == len(source.cells)
        text = json.dumps([c.source for c in student.cells])
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "seed=2024"):
            assert marker not in text, (name, marker)
        for before, after in zip(source.cells, student.cells):
            meta = assignments.grading(before)
            if meta["solution"] and before.cell_type == "code":
                assert "    # YOUR CODE HERE\n    raise NotImplementedError()" in after.source \
                    or "# YOUR CODE HERE\nraise NotImplementedError()" in after.source
            elif meta["solution"]:
                assert after.source == assignments.TEXT_STUB
            elif not meta["grade"]:
                assert after.source == before.source  # instructions travel unchanged
            if after.cell_type == "code":
                assert after.outputs == [] and after.execution_count is None
            if meta["locked"]:
                assert after.metadata["editable"] is False


def test_region_replacement_follows_nbgrader():
    source = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\ny = 1"
    stubbed, replaced = assignments.replace_solution_regions(source, assignments.CODE_STUB)
    assert replaced and stubbed == ("def f(x):\n    # YOUR CODE HERE\n    raise "
                                    "NotImplementedError()\ny = 1")
    kept, removed = assignments.remove_hidden_tests("a\n### BEGIN HIDDEN TESTS\nb\n"
                                                    "### END HIDDEN TESTS\nc")
    assert removed and kept == "a\nc"
    with pytest.raises(ValueError, match="without END"):
        assignments.replace_solution_regions("### BEGIN SOLUTION\nx", assignments.CODE_STUB)


def auto_rows(rows):
    return [row for row in rows if row[1] is not None]


@pytest.mark.slow  # executes notebooks in a Jupyter kernel
@pytest.mark.parametrize("name", params())
def test_source_version_scores_full_marks(name, tmp_path):
    rows = assignments.grade_notebook(SOURCE / name, SOURCE / name, timeout=300)
    assert auto_rows(rows) and all(got == points for _, got, points, _ in auto_rows(rows)), rows


@pytest.mark.slow  # executes notebooks in a Jupyter kernel
@pytest.mark.parametrize("name", params())
def test_student_version_fails_with_actionable_messages(name, tmp_path):
    assignments.release(SOURCE, tmp_path)
    report = tmp_path / "report.txt"
    with report.open("w") as stream:
        results = assignments.grade([tmp_path / name], SOURCE, timeout=300, stream=stream)
    (rows,) = results.values()
    for grade_id, got, points, error in auto_rows(rows):
        assert got == 0, grade_id
        assert error.startswith("CheckFailed"), (grade_id, error)
        assert "not implemented yet" in error or "still None" in error or \
            "rows is empty" in error, (grade_id, error)
    table = report.read_text()
    assert f"0/{sum(r[2] for r in auto_rows(rows)):g}" in table and "✗" in table


@pytest.mark.slow  # executes notebooks in a Jupyter kernel
def test_grade_restores_tampered_test_cells(tmp_path):
    """A student who deletes the check from a test cell still gets it run."""
    notebook = nbformat.read(SOURCE / "03_ngram_lookup.ipynb", as_version=4)
    for cell in notebook.cells:
        meta = assignments.grading(cell)
        if meta["grade"]:
            cell.source = "pass"
        if meta["solution"]:
            cell.source = "def ngram_lookup(tokens, n_max, n_min, k):\n    return []"
    path = tmp_path / "03_ngram_lookup.ipynb"
    nbformat.write(notebook, path)
    rows = assignments.grade_notebook(path, SOURCE / path.name, timeout=120)
    assert [(got, error.split(":")[0]) for _, got, _, error in rows] == [(0.0, "CheckFailed")]
