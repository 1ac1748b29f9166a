"""Tests of the course assignments: the markup, `release`, and `grade` on both versions.

The source notebooks (assignments/source, with solutions) must score full marks when graded
(exercise 5's under nbgrader, tests/test_nbgrader.py, and with its timing forged, in
tests/test_judge.py); their student versions (written by `python -m specnb.course.assignments
release`) must score zero, every test cell failing with a message that tells the student what
to do, not a bare assertion. Executing exercise 5 loads the embedded pair, hence the `embedded` marker;
grading executes notebooks in a Jupyter kernel, hence `slow`.
Deliberately wrong solutions are tested against the checks directly, in test_checks.py.
"""

import copy
import io
import json
import re
import pathlib
import shutil
import subprocess
import sys

import nbformat
import pytest

from specnb.course import assignments, points

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "assignments" / "source"
NOTEBOOKS = sorted(p.name for p in SOURCE.glob("*.ipynb"))
EMBEDDED = "05_alpha_c_and_gamma.ipynb"


def params():
    return [pytest.param(name, marks=pytest.mark.embedded) if name == EMBEDDED else name
            for name in NOTEBOOKS]


def test_eight_exercises():
    assert NOTEBOOKS == ["01_acceptance_test.ipynb", "02_batched_verify.ipynb",
                         "03_ngram_lookup.ipynb", "04_jacobi.ipynb", "05_alpha_c_and_gamma.ipynb",
                         "06_testing_a_sampler.ipynb", "07_batches_and_heads.ipynb",
                         "08_relaxing_and_branching.ipynb"]


def points_table():
    """{notebook: {grade_id: points}} of the auto-graded and hand-graded cells."""
    return {name: {assignments.grading(c)["grade_id"]: assignments.grading(c)["points"]
                   for c in nbformat.read(SOURCE / name, as_version=4).cells
                   if assignments.grading(c).get("grade")} for name in NOTEBOOKS}


def test_batched_verify_is_worth_the_most_and_the_readme_states_every_weight():
    table = points_table()
    weights = {grade_id: value for cells in table.values() for grade_id, value in cells.items()}
    assert max(weights, key=weights.get) == "ex2-verify-tests"
    assert weights["ex2-verify-tests"] >= 2 * max(w for g, w in weights.items()
                                                  if g != "ex2-verify-tests")
    # The instructors' tables are generated from the same metadata, and are current.
    readme = (SOURCE.parent / "README.md").read_text()
    generated = points.tables(SOURCE)
    assert points.stale_blocks(readme, generated) == [], \
        "assignments/README.md is stale: run python -m specnb.course.points --write"
    for grade_id, value in weights.items():
        assert f"| `{grade_id}` | {value:g} |" in generated["points"], grade_id
    total = sum(p for g, p in weights.items() if g != "ex5-reflection")
    assert f"In all {total:g} points are graded automatically" in generated["assignments"]


def test_points_tables_follow_the_metadata(tmp_path):
    """Change a cell's points in a copy of the sources: the tables change, the README's block
    is then stale, and `rewrite` brings it back; a source without its descriptions is refused."""
    for name in NOTEBOOKS[:2]:
        shutil.copy(SOURCE / name, tmp_path / name)
    notebook = nbformat.read(tmp_path / NOTEBOOKS[1], as_version=4)
    (cell,) = [c for c in notebook.cells if assignments.grading(c).get("grade")]
    cell.metadata["nbgrader"]["points"] = 12
    nbformat.write(notebook, tmp_path / NOTEBOOKS[1])
    generated = points.tables(tmp_path)
    assert "| `ex2-verify-tests` | 12 |" in generated["points"]
    assert "In all 17 points are graded automatically." in generated["assignments"]
    readme = (SOURCE.parent / "README.md").read_text()
    assert points.stale_blocks(readme, generated) == ["assignments", "points"]
    assert points.stale_blocks(points.rewrite(readme, generated), generated) == []
    del cell.metadata["specnb"]
    nbformat.write(notebook, tmp_path / NOTEBOOKS[1])
    with pytest.raises(ValueError, match="ex2-verify-tests.*specnb.grades"):
        points.tables(tmp_path)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_student_versions_import_no_library_implementation(name, tmp_path):
    """The released notebook never hands the student the library's own answer: no cell imports
    one (ex4's last cell compares with `specnb.jacobi` after the exercise, by attribute)."""
    from specnb.course.checks.solution_code import find_library_uses, names_of

    source = nbformat.read(SOURCE / name, as_version=4)
    rules = assignments.write_yourself(source)
    assert rules, "every assignment says which library implementations are off limits"
    for test_ids in rules.values():
        assert set(test_ids) <= set(points_table()[name])
    names = names_of(list(rules))
    student = assignments.student_version(source)
    for cell in student.cells:
        if cell.cell_type != "code" or assignments.grading(cell)["grade_id"] == "ex4-forwards-code":
            continue
        assert find_library_uses(cell.source, names) == [], cell.source[:80]
    assert "library_" not in json.dumps([c.source for c in student.cells])


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
    out = subprocess.run([sys.executable, "-m", "specnb.course.assignments", "release", "--out",
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


# Exercise 5's reference times real decodes (half a minute a run), so it runs once: under
# nbgrader (tests/test_nbgrader.py), whose JudgedExecute is `grade`'s own `execute`, with full
# marks expected on every test cell. `grade` itself scores it in tests/test_judge.py: the
# "typed-timings" submission is the reference with its timing cell forged, and every other
# test cell of it must earn its points.
@pytest.mark.slow  # executes notebooks in a Jupyter kernel
@pytest.mark.parametrize("name", [name for name in NOTEBOOKS if name != EMBEDDED])
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


# ----------------------------------------------------------------------------------------------
# `grade` on a tiny assignment: wrappers, and submissions that cannot be graded normally
# ----------------------------------------------------------------------------------------------

def tiny_cell(kind, grade_id, source, **flags):
    cell = (nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell)(source)
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True,
                                 "schema_version": 3, "grade_id": grade_id, "task": False,
                                 **flags}
    return cell


def tiny_assignment(solution):
    """One solution cell (`double(x)`) and one 2-point test cell, which forbids the library's
    `verify` (standing in for the function an exercise asks for). `solution` is the solution
    cell's code, or a list: the solution cell, then cells the student added."""
    solution, *added = [solution] if isinstance(solution, str) else solution
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata["specnb"] = {"write_yourself": {"specnb.core.verify:verify": ["tiny-tests"]}}
    notebook.cells = [
        tiny_cell("code", "tiny-solution", solution, solution=True, locked=False),
        *[nbformat.v4.new_code_cell(code) for code in added],
        tiny_cell("code", "tiny-tests", "assert double(3) == 6, 'double(3) should be 6'",
                  grade=True, points=2),
    ]
    return notebook


HONEST = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
SUBMISSIONS = [  # (student, solution cell or raw file text, points, message fragment)
    ("honest", "import torch\ndef double(x):\n    return int(torch.tensor(x) * 2)", 2, None),
    ("wrapper", "from specnb.core import verify\ndef double(x):\n    return 2 * x", 0,
     "uses the library's own specnb.core.verify.verify (cell 'tiny-solution', line 1"),
    ("importlib", "import importlib\ncore = importlib.import_module('specnb.core')\n"
                  "def double(x):\n    return 2 * x", 0, "dynamic import"),
    ("raises", "raise RuntimeError('oops')\ndef double(x):\n    return 2 * x", 0,
     "NameError: name 'double' is not defined"),
    ("cell-hangs", "import time\ntime.sleep(60)\ndef double(x):\n    return 2 * x", 0,
     "ran over 3 s and was interrupted"),
    # Each cell under the 3 s cell limit, together over the notebook's 12 s (which also covers
    # the kernel's start: several seconds on a loaded 2-core machine, hence the margin).
    ("notebook-hangs", ["import time\ntime.sleep(2.5)", *["time.sleep(2.5)"] * 5,
                        "def double(x):\n    return 2 * x"], 0, "the notebook ran over 12 s"),
    ("wrapper-in-an-added-cell", ["def double(x):\n    return 2 * x", "import specnb\n"
                                  "specnb.core.verify"], 0, "your cell 1, line 2"),
    ("kernel-dies", "import os\nos._exit(1)", 0, "grading stopped: DeadKernelError"),
    ("not-json", "{this is not json", 0, "not a notebook: invalid JSON"),
    ("not-a-notebook", '{"cells": 3}', 0, "not a notebook"),
]


@pytest.mark.slow  # one Jupyter kernel per submission, two of them wait for timeouts: ~30 s
def test_grade_scores_each_submission_and_carries_on(tmp_path, capfd):
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    nbformat.write(tiny_assignment(HONEST), source_dir / "tiny.ipynb")
    for student, solution, _, _ in SUBMISSIONS:
        folder = tmp_path / "submitted" / student
        folder.mkdir(parents=True)
        if isinstance(solution, str) and solution.startswith("{"):
            (folder / "tiny.ipynb").write_text(solution)
        else:
            nbformat.write(tiny_assignment(solution), folder / "tiny.ipynb")
    report = tmp_path / "report.txt"
    with report.open("w") as stream:
        results = assignments.grade([tmp_path / "submitted"], source_dir, timeout=3,
                                    stream=stream, notebook_timeout=12)
    by_student = {pathlib.Path(path).parent.name: rows for path, rows in results.items()}
    for student, _, points, fragment in SUBMISSIONS:
        ((grade_id, got, possible, message),) = by_student[student]
        assert (grade_id, got, possible) == ("tiny-tests", points, 2.0), (student, message)
        assert fragment is None and message is None or fragment in message, (student, message)
    text = report.read_text()
    assert "Traceback" not in text and "WARNING" not in text and "ERROR" not in text
    assert text.count("total ") == len(SUBMISSIONS)
    assert f"total {tmp_path / 'submitted' / 'honest'}: 2/2 auto-graded points" in text
    assert capfd.readouterr().err == ""  # no kernel warnings, no nbclient timeout logs


@pytest.mark.parametrize("argv, fragment", [
    (["grade", "/no/such/submission.ipynb"], "no such file or folder"),
    (["grade", "--timeout", "0", "."], "--timeout must be >= 1"),
    (["grade", "--notebook-timeout", "0", "."], "--notebook-timeout must be >= 1"),
    (["--source", "/no/such/folder", "release"], "no folder of source notebooks"),
    (["--source", "/no/such/folder", "grade", "."], "no folder of source notebooks"),
])
def test_missing_paths_and_bad_timeouts_exit_non_zero_with_a_message(argv, fragment, capsys):
    with pytest.raises(SystemExit) as info:
        assignments.main(argv)
    assert info.value.code != 0 and fragment in capsys.readouterr().err


def test_grade_refuses_a_missing_submission_when_called_from_python(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        assignments.grade([tmp_path / "absent"], SOURCE)


def test_grading_keeps_the_numbers_the_written_answer_quotes():
    """grade re-runs exercise 5's summary (new timings); what the student's run printed stays
    beside it for whoever marks the written answer."""
    source = nbformat.read(SOURCE / "05_alpha_c_and_gamma.ipynb", as_version=4)
    submitted = copy.deepcopy(source)
    summary = next(c for c in submitted.cells if assignments.grading(c).get("grade_id") == "ex5-summary")
    summary.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                              text="alpha_hat = 0.123, c_hat = 0.456\n")]
    graded = assignments.graded_notebook(submitted, source)
    position = next(i for i, c in enumerate(graded.cells)
                    if assignments.grading(c).get("grade_id") == "ex5-summary")
    original = next(c for c in source.cells if assignments.grading(c).get("grade_id") == "ex5-summary")
    assert graded.cells[position] == original  # restored from the source, to be run again
    kept = graded.cells[position + 1]
    assert kept.cell_type == "markdown" and "alpha_hat = 0.123, c_hat = 0.456" in kept.source
    assert "As submitted" in kept.source
    # Nothing is added when the student's run printed nothing (or for other cells).
    summary.outputs = []
    assert len(assignments.graded_notebook(submitted, source).cells) == len(source.cells)


# The report, the options, the timing table and the written answer's numbers (no kernel)
# ----------------------------------------------------------------------------------------------

def test_a_student_folder_is_totalled_out_of_the_course_and_missing_notebooks_named(
        tmp_path, monkeypatch):
    folder = tmp_path / "student"
    folder.mkdir()
    for name in ("01_acceptance_test.ipynb", "02_batched_verify.ipynb"):
        (folder / name).write_text("{}")

    def full_marks(path, source, *args, **kwargs):
        cells = nbformat.read(source, as_version=4).cells
        return [(m["grade_id"], None if m.get("solution") else float(m["points"]),
                 float(m["points"]), None) for m in map(assignments.grading, cells)
                if m.get("grade")]
    monkeypatch.setattr(assignments, "grade_notebook", full_marks)
    stream = io.StringIO()
    assignments.grade([folder], SOURCE, stream=stream, jobs=2)
    text = stream.getvalue()
    points = assignments.course_points(SOURCE)
    assert sum(auto for auto, _ in points.values()) == 64  # the README's table
    assert f"total {folder}: 15/64 auto-graded points (+ up to 2 graded by hand)" in text
    assert "not submitted (49 points): 03_ngram_lookup.ipynb, 04_jacobi.ipynb, " \
           "05_alpha_c_and_gamma.ipynb, 06_testing_a_sampler.ipynb, 07_batches_and_heads.ipynb, " \
           "08_relaxing_and_branching.ipynb" in text


def test_grade_help_lists_source_jobs_and_threads(capsys):
    with pytest.raises(SystemExit):
        assignments.main(["grade", "--help"])
    text = capsys.readouterr().out
    assert "--source" in text and "--jobs" in text and "--threads" in text


def test_kernels_start_with_the_threads_asked_for(tmp_path):
    from specnb.course.judge.judge import confined_env

    env = confined_env(tmp_path / "package", tmp_path, 1)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["PYTHONPATH"] == str(tmp_path / "package")  # the answer-free copy of specnb
    assert env["HOME"].startswith(str(tmp_path))  # nothing written outside its folder


def stepped_run(step_s, steps=10):
    """A result whose decoding steps take `step_s` seconds each."""
    from specnb.methods.results import GenerationResult, Iteration, Stats

    trace = [Iteration(step=i + 1, target_s=step_s) for i in range(steps)]
    return GenerationResult("speculative", [[]], Stats(), trace)


class FakeClock:
    """Seconds per decode, and the run's step times, as the check's own clock would measure;
    `first_ar` replaces the first autoregressive decode's seconds (a burst of other work)."""

    def __init__(self, ar, spec, steps=None, first_ar=None):
        self.ar, self.spec, self.asked, self.first_ar = ar, spec, [], first_ar
        self.steps = steps or {None: 0.03, 1: 0.036, 4: 0.054}  # checking 1.2 and 1.8

    def run(self, gamma=None):
        self.asked.append(gamma)
        seconds = self.ar if gamma is None else self.spec[gamma]
        if gamma is None and self.first_ar is not None and self.asked.count(None) == 1:
            seconds = self.first_ar
        return stepped_run(self.steps[gamma]), seconds


def timing_rows(ar, spec, checking, alpha=0.3, c=0.1):
    from specnb.theory import predicted_speedup, predicted_with_block_cost
    return [{"gamma": g, "ar_seconds": ar, "spec_seconds": s, "measured": ar / s,
             "predicted": predicted_speedup(alpha, g, c), "checking_cost": checking[g],
             "predicted_checked": predicted_with_block_cost(alpha, g, c, checking[g])}
            for g, s in spec.items()]


def test_a_timing_table_must_be_measured_in_this_run(monkeypatch, capsys):
    from specnb.core import timed as compare  # where timed() keeps what it measured
    from specnb.course import checks

    def measured(seconds):  # what timed() returned here
        monkeypatch.setattr(compare, "MEASURED", list(seconds))

    # Eq. (2) at α 0.3, c 0.1: 1.3 / 1.3 = 1.0 at γ = 1 (checking 1.2), 1.425 / 2.2 = 0.65 at
    # γ = 4 (checking 1.8); the clocks below measure 1.0 and 0.67. The theorem: 1.18, 1.02.
    spec, checking = {1: 2.0, 4: 3.0}, {1: 0.036 / 0.03, 4: 0.054 / 0.03}
    rows = timing_rows(2.0, spec, checking)
    measured([2.0, 2.0, 3.0])
    clock = FakeClock(1.9, {1: 2.1, 4: 2.8})
    checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=clock)
    assert clock.asked == [None, 1, 4]  # agreed at once: one set of the check's own runs
    # A burst of other work slowed the check's first run ten times: it runs its clock again.
    clock = FakeClock(1.9, {1: 2.1, 4: 2.8}, first_ar=19.0)
    checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=clock)
    assert clock.asked == [None, 1, 4] * 2
    # Typed in: the same table, but no timed() call returned those numbers.
    measured([2.01, 2.01, 3.01])
    with pytest.raises(checks.CheckFailed, match="not measured in this run"):
        checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(1.9, spec))
    # Graded, the judge timed the timing cell from outside the kernel: the rows report 7 s of
    # decoding, so a cell that ran 0.5 s typed them (what the kernel's records say is not asked).
    token = checks.gamma.JUDGED_CELL_SECONDS.set(0.5)
    try:
        with pytest.raises(checks.CheckFailed, match="timed by the grader"):
            checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(1.9, spec))
        checks.gamma.JUDGED_CELL_SECONDS.set(8.0)
        checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(1.9, spec))
    finally:
        checks.gamma.JUDGED_CELL_SECONDS.reset(token)
    measured([2.0, 2.0, 3.0])
    # A ratio of the wrong runs (a run over itself: the theorem's 1) against the check's 1.8.
    same = timing_rows(2.0, spec, {1: 1.0, 4: 1.0})
    with pytest.raises(checks.CheckFailed, match="the check's own runs"):
        checks.check_timing_table(same, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(1.9, spec))
    # The theorem's prediction in eq. (2)'s column.
    theorem = [dict(row, predicted_checked=row["predicted"]) for row in rows]
    with pytest.raises(checks.CheckFailed, match="predicted_checked = speedup_checked"):
        checks.check_timing_table(theorem, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(1.9, spec))
    # A row that eq. (2) does not predict (γ = 4 measured at 0.33x against 0.65x) while the
    # check's own clock agrees with eq. (2) (1.04 of it), three times over.
    slow = {1: 2.0, 4: 6.0}
    measured([2.0, 2.0, 6.0])
    clock = FakeClock(1.9, spec)
    with pytest.raises(checks.CheckFailed, match="within 1.3x of the clock"):
        checks.check_timing_table(timing_rows(2.0, slow, checking), 0.3, 0.1, gammas=[1, 4],
                                  clock=clock)
    assert clock.asked == [None, 1, 4] * checks.gamma.CLOCK_ATTEMPTS
    # The same row on a machine busy with other work, where the check's own clock strays from
    # eq. (2) as far: the student is not charged for the machine.
    checks.check_timing_table(timing_rows(2.0, slow, checking), 0.3, 0.1, gammas=[1, 4],
                              clock=FakeClock(1.9, slow))
    assert "γ = 4: the machine was busy" in capsys.readouterr().out
    # Measured, but not the decode the row is about (ten times off the check's own clock).
    measured([2.0, 2.0, 3.0])
    with pytest.raises(checks.CheckFailed, match="the check's own run"):
        checks.check_timing_table(rows, 0.3, 0.1, gammas=[1, 4], clock=FakeClock(0.2, spec))
    # A duplicate γ = 1 row.
    with pytest.raises(checks.CheckFailed, match="each γ once"):
        checks.check_timing_table(rows[:1] + rows, 0.3, 0.1, gammas=[1, 4, 4],
                                  clock=FakeClock(1.9, spec))


def test_visible_prediction_tests_check_the_form_and_show_no_answer():
    from specnb.course import checks

    for name, cell_id in (("01_acceptance_test.ipynb", "ex1-overlap-tests"),
                          ("05_alpha_c_and_gamma.ipynb", "ex5-gamma-guess-tests"),
                          ("06_testing_a_sampler.ipynb", "ex6-no-min-tests"),
                          ("08_relaxing_and_branching.ipynb", "ex8-predict-tests")):
        notebook = nbformat.read(SOURCE / name, as_version=4)
        student = assignments.student_version(notebook)
        visible = next(c.source for c in student.cells
                       if assignments.grading(c).get("grade_id") == cell_id)
        assert "check_answer_form" in visible or "check_law_prediction(predicted_law)" in visible
        assert "check_prediction" not in visible and "reveal" not in visible, visible
        for answer in (", 5,", '"b", "one more', '"true", "compare'):  # the hidden test's
            assert answer not in visible
    checks.check_answer_form("p", 0.5, float)
    with pytest.raises(checks.CheckFailed):
        checks.check_answer_form("p", 1.5, float)
    checks.check_answer_form("g", 6, int)
    for got, choices in ((None, int), (2.5, int), ("d", ("a", "b"))):
        with pytest.raises(checks.CheckFailed):
            checks.check_answer_form("g", got, choices)


def test_an_edited_summary_is_flagged_for_the_marker():
    cell = nbformat.v4.new_code_cell("summary()")
    cell.metadata["nbgrader"] = {"grade_id": "ex5-summary"}
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="alpha_hat = 0.174, c_hat = 0.124\n"
                                                "gamma 1: measured 0.613x\n")]
    kept = nbformat.v4.new_markdown_cell("**As submitted** (...):\n\n```\nalpha_hat = 0.912, "
                                         "c_hat = 0.140\ngamma 1: measured 0.580x\n```")
    notebook = nbformat.v4.new_notebook(cells=[cell, kept])
    assert assignments.frozen_mismatches(notebook) == [
        "alpha_hat = 0.912 as submitted, 0.174 on re-run"]  # the clock's noise passes
    kept.source = kept.source.replace("0.912", "0.174")
    assert assignments.frozen_mismatches(notebook) == []
