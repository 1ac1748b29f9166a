"""Release and grade the course assignments in assignments/source/ (nbgrader markup, no nbgrader).

    python -m specnb.course.assignments release [--out assignments/release]
    python -m specnb.course.assignments grade SUBMISSION... [--executed DIR]
    python -m specnb.course.assignments nbgrader-course DIR [--force]

`release` writes the student versions the way nbgrader's `generate_assignment` does: in
solution cells each `### BEGIN SOLUTION` ... `### END SOLUTION` region becomes
`# YOUR CODE HERE` + `raise NotImplementedError()` (a solution cell without markers is replaced
whole), `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` regions are deleted from grade
cells, outputs and execution counts are cleared and grade cells are made read-only.

`grade` takes submitted notebooks (files, or folders searched for the source file names),
puts back every test cell from the source (hidden tests included, so editing a test changes
nothing) and executes the notebook with errors allowed, `--jobs` at once, each in a kernel that
the judge confines (specnb.course.judge): an empty throw-away folder it may not write outside,
no other file it may read but Python's and a copy of specnb without the assignment's answers
(`Withheld`), no new processes, a memory limit, one torch thread. The auto-graded test cells do
not run in that kernel: the judge runs each in the grader's own process, calling the student's
functions in the kernel on inputs it generates and checking what comes back as plain data, and
prints per test cell its points (full when its checks raised nothing, else 0 and the first line
of the check's message). Cells graded by hand (nbgrader `solution` and `grade`) are listed as
"manual"; per student folder, a total out of the course's points and the notebooks not handed in
close the report.

Before running anything, `grade` parses the code the student wrote (`specnb.course.checks.solution_code`):
a test cell whose exercise imports the library's own implementation of the answer (the source
notebook's metadata `specnb.write_yourself`) scores 0, with the line that does it. A submission
that is not a notebook, whose kernel dies, or that runs over `--notebook-timeout` scores 0 with a
message and the other submissions are graded; a cell or a test that runs over `--timeout` is
stopped. It does not keep a database, collect files or write feedback: nbgrader does that for
instructors who want it, and `nbgrader-course` lays out an nbgrader course of these notebooks
whose autograde judges as `grade` does (specnb/course/nbgrader_course.py, nbgrader_check.py).
"""

import argparse
import asyncio
import atexit
import copy
import json
import logging
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import nbformat

from ..core.args import check_out_folder

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2] / "assignments" / "source"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
TEXT_STUB = "YOUR ANSWER HERE"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def grading(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def replace_regions(source: str, begin: str, end: str, stub: str | None) -> tuple[str, bool]:
    """Replace each `begin` … `end` region (marker lines included) by `stub`, indented like its
    begin line (nbgrader's rule), or drop it when `stub` is None; also say whether any was found."""
    lines, inside, found = [], False, False
    for line in source.split("\n"):
        if begin in line:
            if inside:
                raise ValueError(f"nested {begin.lstrip('# ')}")
            inside = found = True
            if stub is not None:
                indent = re.match(r"\s*", line).group(0)
                lines += [indent + stub_line for stub_line in stub.split("\n")]
        elif end in line:
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise ValueError(f"{begin.lstrip('# ')} without {end.lstrip('# ')}")
    return "\n".join(lines), found


def replace_solution_regions(source: str, stub: str) -> tuple[str, bool]:
    """Replace each solution region by the stub."""
    return replace_regions(source, BEGIN_SOLUTION, END_SOLUTION, stub)


def remove_hidden_tests(source: str) -> tuple[str, bool]:
    return replace_regions(source, BEGIN_HIDDEN, END_HIDDEN, None)


def student_version(notebook):
    """A copy of a source notebook with solutions stubbed, hidden tests removed, outputs cleared."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        meta = grading(cell)
        stub = CODE_STUB if cell.cell_type == "code" else TEXT_STUB
        cell.source, replaced = replace_solution_regions(cell.source, stub)
        if replaced and not meta.get("solution"):
            raise ValueError(f"solution region outside a solution cell: {cell.source[:60]!r}")
        if meta.get("solution") and not replaced:
            cell.source = stub
        cell.source, removed = remove_hidden_tests(cell.source)
        if removed and not meta.get("grade"):
            raise ValueError(f"hidden tests outside a grade cell: {cell.source[:60]!r}")
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if meta.get("grade") and not meta.get("solution") or meta.get("locked"):
            cell.metadata["deletable"] = cell.metadata["editable"] = False  # nbgrader LockCells
        cell.metadata.pop("execution", None)
    return notebook


def release(source_dir: pathlib.Path, out_dir: pathlib.Path) -> list:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source_dir.glob("*.ipynb")):
        target = out_dir / path.name
        nbformat.write(student_version(nbformat.read(path, as_version=4)), target)
        written.append(target)
    return written


def graded_notebook(submitted, source):
    """The submission with every non-solution grade/locked cell restored from the source.

    A restored cell listed in the source's metadata `specnb.frozen_outputs` (exercise 5's
    summary, the numbers the written answer quotes) is followed by a markdown cell holding the
    text it printed in the submitted run: grading re-runs it, and timings change from run to run.
    """
    notebook = copy.deepcopy(submitted)
    originals = {grading(c)["grade_id"]: c for c in source.cells if grading(c).get("grade_id")}
    frozen = set(source.metadata.get("specnb", {}).get("frozen_outputs", []))
    cells = []
    for cell in notebook.cells:
        grade_id = grading(cell).get("grade_id")
        original = originals.get(grade_id)
        if original is None or grading(original).get("solution"):
            cells.append(cell)
            continue
        cells.append(copy.deepcopy(original))
        printed = "".join(output_text(o) for o in cell.get("outputs", [])).strip()
        if grade_id in frozen and printed:
            cells.append(nbformat.v4.new_markdown_cell(
                f"**As submitted** (what `{grade_id}` printed in the student's own run; the "
                f"cell above was run again by `grade`):\n\n```\n{printed}\n```"))
    notebook.cells = cells
    return notebook


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def frozen_mismatches(notebook, factor: float = 2.0) -> list[str]:
    """Where a re-run frozen cell printed numbers more than `factor` apart from what the
    submission showed (the "As submitted" cell after it): an edited output, not clock noise."""
    found = []
    for cell, after in zip(notebook.cells, notebook.cells[1:]):
        if after.cell_type != "markdown" or not after.source.startswith("**As submitted**"):
            continue
        submitted = after.source.split("```")[1] if after.source.count("```") >= 2 else ""
        rerun = "".join(output_text(o) for o in cell.get("outputs", []))
        words = list(NUMBER.finditer(submitted))
        again = [float(m.group()) for m in NUMBER.finditer(rerun)]
        if len(words) != len(again):
            found.append(f"`{grading(cell).get('grade_id')}` printed {len(again)} numbers on "
                         f"re-run, {len(words)} as submitted")
            continue
        for match, value in zip(words, again):
            shown = float(match.group())
            if shown == value or (shown * value > 0 and max(abs(shown), abs(value)) <= factor *
                                  min(abs(shown), abs(value))):
                continue
            context = submitted[max(0, match.start() - 25):match.start()].split("\n")[-1]
            found.append(f"{context.strip()} {match.group()} as submitted, {value:g} on re-run")
    return found


def output_text(output) -> str:
    """The text of one stream or result output ("" for images and errors)."""
    text = output.get("text", output.get("data", {}).get("text/plain", ""))
    return "".join(text) if isinstance(text, list) else text


def error_text(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output['ename']}: {output['evalue']}"
    return None


def write_yourself(source) -> dict:
    """{"module:attr" of a library implementation: [grade ids its use voids]} of a source."""
    return dict(source.metadata.get("specnb", {}).get("write_yourself", {}))


def library_use_messages(submitted, source) -> dict:
    """{grade_id: message} for the test cells voided by a use of the library's own answer.

    Only cells the student wrote are read (solution cells and cells they added), not the cells
    `graded_notebook` restores from the source.
    """
    from .checks.solution_code import DYNAMIC, explain, find_library_uses, names_of

    rules = write_yourself(source)
    if not rules:
        return {}
    names = names_of(list(rules))
    restored = {grading(c)["grade_id"] for c in source.cells
                if grading(c).get("grade_id") and not grading(c).get("solution")}
    messages = {}
    for index, cell in enumerate(submitted.cells):
        grade_id = grading(cell).get("grade_id")
        if cell.cell_type != "code" or grade_id in restored:
            continue
        label = f"cell {grade_id!r}" if grade_id else f"your cell {index}"
        for use in find_library_uses(cell.source, names):
            voided = sorted({i for ids in rules.values() for i in ids}) \
                if use.target == DYNAMIC else rules[use.target]
            for test_id in voided:
                messages.setdefault(test_id, explain(use, label))
    return messages


_BUILDS: dict = {}  # source path -> the answer-free package built for it in this process
_BUILDS_LOCK = threading.Lock()


def answer_free(source_path: pathlib.Path, source) -> pathlib.Path:
    """The folder (for PYTHONPATH) of specnb without `source`'s answers, built once per process."""
    from .judge.build import answer_free_package

    key = str(pathlib.Path(source_path).resolve())
    with _BUILDS_LOCK:
        if key not in _BUILDS:
            folder = pathlib.Path(tempfile.mkdtemp(prefix="specnb-answer-free-"))
            atexit.register(shutil.rmtree, folder, True)
            _BUILDS[key] = answer_free_package(list(write_yourself(source)), folder)
        return _BUILDS[key]


def judge_settings(source) -> dict:
    """The source's metadata `specnb.judge`: set-up code the judge runs before the tests, and
    {test id: id of the cell whose duration it needs}."""
    from .judge.judge import DEFAULT_SETUP

    settings = source.metadata.get("specnb", {}).get("judge", {})
    setup = settings.get("setup", DEFAULT_SETUP)
    return {"setup": "".join(setup) if isinstance(setup, list) else setup,
            "timed_cells": dict(settings.get("timed_cells", {}))}


def execute(notebook, source, source_path, timeout: int, notebook_timeout: float,
            tests: dict, threads: int = 1, memory_bytes: int | None = None,
            confined: bool = True):
    """Run `notebook` in place in a confined kernel (specnb.course.judge): its working folder an
    empty throw-away one, its specnb without the source's answers, its stderr discarded; the
    auto-graded test cells `tests` ({cell index: grade id}) are graded by the judge, outside it.
    Returns (notes on cells interrupted after `timeout` seconds, {cell index: (passed,
    message)}). Raises TimeoutError past `notebook_timeout` seconds (the kernel is shut down).
    `confined=False` starts the kernel as it is (a machine without Landlock): it still lacks the
    answers, but may read the rest of the disk, start processes and write anywhere."""
    from .judge.judge import MEMORY_BYTES, Judge, readable_paths, confined_env

    quiet = logging.getLogger("specnb.course.assignments.kernel")  # nbclient's timeout/death logs:
    quiet.setLevel(logging.CRITICAL)  # the report says it in one line instead
    package = answer_free(source_path, source)
    with tempfile.TemporaryDirectory(prefix="specnb-grade-") as name:
        folder = pathlib.Path(name)
        # The kernel is killed at the end, not asked to stop: its folder goes anyway, and a
        # graceful stop costs about a second per notebook.
        options = dict(timeout=timeout, kernel_name="python3", allow_errors=True,
                       interrupt_on_timeout=True, log=quiet, shutdown_kernel="immediate",
                       resources={"metadata": {"path": name}})
        judge = Judge(notebook, tests, call_timeout=timeout, **judge_settings(source), **options)
        env = confined_env(package, folder, threads)
        judge.km = judge.create_kernel_manager()
        if confined:
            judge.km.confinement = {"read": readable_paths(package, folder),
                                    "write": [name, "/dev/null"],
                                    "memory_bytes": memory_bytes or MEMORY_BYTES}
        start = dict(stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=name, env=env)

        async def run():
            await asyncio.wait_for(judge.async_execute(**start), notebook_timeout)
        started = time.monotonic()
        try:
            asyncio.run(run())
        except Exception as error:  # noqa: BLE001 - sorted out below
            # Cancelling at the deadline may surface as nbclient's DeadKernelError (the
            # kernel is shut down under a running cell) instead of the timeout itself.
            if isinstance(error, asyncio.TimeoutError) or \
                    time.monotonic() - started >= notebook_timeout:
                raise TimeoutError(f"the notebook ran over {notebook_timeout:g} s (a cell "
                                   f"that never ends?) and was stopped") from None
            raise
    notes = [f"cell {grading(c).get('grade_id') or i} ran over {timeout} s and was interrupted"
             for i, c in enumerate(notebook.cells)
             if (error_text(c) or "").startswith("KeyboardInterrupt")]
    return notes, judge.verdicts


def auto_graded(source) -> dict:
    """{grade id: points} of a source notebook's auto-graded test cells, in order."""
    return {grading(c)["grade_id"]: float(grading(c).get("points", 0)) for c in source.cells
            if grading(c).get("grade") and not grading(c).get("solution")}


def test_cells(source, notebook) -> dict:
    """{cell index: grade id} of the graded notebook's auto-graded test cells."""
    auto = auto_graded(source)
    return {index: grading(cell)["grade_id"] for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and grading(cell).get("grade_id") in auto}


def read_submission(path: pathlib.Path):
    """The submitted notebook, or a ValueError that says in one line why it cannot be read."""
    try:
        json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as error:  # nbformat would wrap it in a message of its own
        raise ValueError(f"not a notebook: invalid JSON ({error.msg} at line {error.lineno}); "
                         f"hand in the .ipynb file Jupyter saves") from None
    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - nbformat raises several kinds
        raise ValueError(f"not a notebook: {type(error).__name__}: {first_line(str(error))}") \
            from None


def zero_rows(source, message: str) -> list:
    """Every test cell at 0 with one message (a submission that could not be graded)."""
    rows = []
    for cell in source.cells:
        meta = grading(cell)
        if meta.get("grade"):
            points = float(meta.get("points", 0))
            rows.append((meta["grade_id"], None if meta.get("solution") else 0.0, points,
                         "graded by hand" if meta.get("solution") else message))
    return rows


def grade_notebook(path: pathlib.Path, source_path: pathlib.Path, timeout: int = 600,
                   executed_path: pathlib.Path | None = None,
                   notebook_timeout: float = 1800, threads: int = 1,
                   confined: bool = True) -> list:
    """Execute one submission; return [(grade_id, points earned or None, points, message)].

    A test cell earns its points when its checks, run by the judge outside the student's kernel
    on what the student's functions returned (`execute`, specnb.course.judge), raised nothing;
    nothing the kernel says about itself counts. Never raises for a bad submission: an
    unreadable file, a dead kernel or a notebook over `notebook_timeout` seconds gives every test
    cell 0 with the reason as its message."""
    source = nbformat.read(source_path, as_version=4)
    try:
        submitted = read_submission(path)
        voided = library_use_messages(submitted, source)
        notebook = graded_notebook(submitted, source)
        notes, verdicts = ([], {}) if auto_graded(source).keys() <= set(voided) else execute(
            notebook, source, source_path, timeout, notebook_timeout,
            test_cells(source, notebook), threads, confined=confined)
    except Exception as error:  # noqa: BLE001 - one bad submission must not stop the rest
        reason = str(error) if isinstance(error, (ValueError, TimeoutError)) else \
            f"grading stopped: {type(error).__name__}: {first_line(str(error))}"
        return zero_rows(source, reason)
    edited = frozen_mismatches(notebook)
    if edited:  # tell the marker of the written answer, in the report and the notebook
        for cell in notebook.cells:
            if cell.cell_type == "markdown" and cell.source.startswith("**As submitted**"):
                cell.source += ("\n\n**Differs from the re-run by more than 2×** (an edited "
                                "output?): " + "; ".join(edited))
    if executed_path is not None:
        executed_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, executed_path)
    present = {grading(c).get("grade_id"): (i, c) for i, c in enumerate(notebook.cells)}
    rows = []
    for cell in source.cells:
        meta = grading(cell)
        if not meta.get("grade"):
            continue
        points = float(meta.get("points", 0))
        index, graded = present.get(meta["grade_id"], (None, None))
        if meta.get("solution"):
            rows.append((meta["grade_id"], None, points, "graded by hand" + (
                "; the numbers it quotes differ from the re-run: " + "; ".join(edited[:2])
                if edited else "")))
        elif graded is None:
            rows.append((meta["grade_id"], 0.0, points, "test cell missing from the submission"))
        elif meta["grade_id"] in voided:
            rows.append((meta["grade_id"], 0.0, points, voided[meta["grade_id"]]))
        else:
            passed, error = verdicts.get(index, (False, "the test cell was not run"))
            if not passed and notes:
                error = f"{error} ({notes[0]})"
            error = None if passed else error or "the test cell did not pass"
            rows.append((meta["grade_id"], 0.0 if error else points, points, error))
    return rows


def find_submissions(paths, source_dir: pathlib.Path) -> list:
    """(submission, source) pairs: each path is a notebook or a folder searched recursively."""
    names = {p.name: p for p in source_dir.glob("*.ipynb")}
    pairs = []
    for path in map(pathlib.Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"submission {path}: no such file or folder")
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*.ipynb")
                                                     if ".ipynb_checkpoints" not in p.parts)
        for notebook in found:
            if notebook.name not in names:
                if path.is_file():
                    raise SystemExit(f"{notebook}: no source notebook of that name in {source_dir}")
                continue
            pairs.append((notebook, names[notebook.name]))
    return pairs


def first_line(text: str | None, width: int = 90) -> str:
    if not text:
        return ""
    text = " ".join(line.strip() for line in text.splitlines()[:2])
    return text if len(text) <= width else text[:width - 1] + "…"


def course_points(source_dir: pathlib.Path) -> dict:
    """{source notebook name: (auto-graded points, points graded by hand)}."""
    points = {}
    for path in sorted(source_dir.glob("*.ipynb")):
        cells = [grading(c) for c in nbformat.read(path, as_version=4).cells]
        points[path.name] = (sum(float(m.get("points", 0)) for m in cells
                                 if m.get("grade") and not m.get("solution")),
                             sum(float(m.get("points", 0)) for m in cells
                                 if m.get("grade") and m.get("solution")))
    return points


def grade(paths, source_dir=SOURCE_DIR, timeout=600, executed_dir=None, stream=sys.stdout,
          notebook_timeout: float = 1800, jobs: int = 1, threads: int = 1,
          confined: bool = True) -> dict:
    """Grade each submission (`jobs` at a time, each kernel with `threads` threads), print its
    rows, then per student folder the total out of the course's points and the notebooks it
    lacks; return {submission: rows}. Refuses (RuntimeError) to grade unconfined unless told
    (`confined=False`) on a machine that cannot confine a kernel (judge/confine.py)."""
    from .judge.confine import available

    why = available() if confined else None
    if why:
        raise RuntimeError(f"cannot confine the grading kernels: {why}. Grade on Linux 5.13 or "
                           f"newer, or pass --unconfined (assignments/README.md says what that "
                           f"gives up)")
    from concurrent.futures import ThreadPoolExecutor

    source_dir = pathlib.Path(source_dir)
    pairs = find_submissions(paths, source_dir)

    def one(pair):
        submission, source = pair
        executed = None if executed_dir is None else pathlib.Path(executed_dir) / (
            f"{submission.parent.name}-{submission.name}")
        return grade_notebook(submission, source, timeout, executed, notebook_timeout, threads,
                              confined)

    results = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for (submission, _), rows in zip(pairs, pool.map(one, pairs)):  # in order, as they end
            results[str(submission)] = rows
            earned = sum(r[1] for r in rows if r[1] is not None)
            possible = sum(r[2] for r in rows if r[1] is not None)
            print(f"\n{submission}  {earned:g}/{possible:g}", file=stream, flush=True)
            for grade_id, got, points, error in rows:
                score = "manual" if got is None else f"{got:g}/{points:g}"
                mark = "" if got is None else "✓" if got == points else "✗"
                print(f"  {grade_id:<28} {score:>7} {mark} {first_line(error)}".rstrip(),
                      file=stream, flush=True)
    if not results:
        print("no submitted notebook matches a source notebook", file=stream)
        return results
    print(file=stream)
    course = course_points(source_dir)
    auto_total = sum(a for a, _ in course.values())
    manual_total = sum(m for _, m in course.values())
    folders = {}
    for submission, rows in results.items():
        folders.setdefault(str(pathlib.Path(submission).parent), {})[
            pathlib.Path(submission).name] = rows
    for folder, notebooks in folders.items():
        rows = [row for notebook_rows in notebooks.values() for row in notebook_rows]
        earned = sum(r[1] for r in rows if r[1] is not None)
        missing = [name for name in course if name not in notebooks]
        print(f"total {folder}: {earned:g}/{auto_total:g} auto-graded points"
              + (f" (+ up to {manual_total:g} graded by hand)" if manual_total else ""),
              file=stream)
        if missing:
            lost = sum(course[name][0] for name in missing)
            print(f"  not submitted ({lost:g} points): {', '.join(missing)}", file=stream)
    return results


def check_args(parser, args) -> None:
    """Refuse a missing source, submission or timeout, or an unwritable output folder, with an
    argparse message (exit 2) before any notebook is written or executed."""
    if not args.source.is_dir() or not any(args.source.glob("*.ipynb")):
        parser.error(f"--source {args.source}: no folder of source notebooks (*.ipynb) there")
    if args.command == "release":
        check_out_folder(parser, "--out", args.out)
        return
    if args.command == "nbgrader-course":
        check_out_folder(parser, "DIR", args.course_dir)
        return
    for option, value in (("--timeout", args.timeout),
                          ("--notebook-timeout", args.notebook_timeout),
                          ("--jobs", args.jobs), ("--threads", args.threads)):
        if value < 1:
            unit = " second" if "timeout" in option else ""
            parser.error(f"{option} must be >= 1{unit}, got {value}")
    names = {p.name for p in args.source.glob("*.ipynb")}
    for path in map(pathlib.Path, args.submissions):
        if not path.exists():
            parser.error(f"submission {path}: no such file or folder")
        if path.is_file() and path.name not in names:
            parser.error(f"submission {path}: no source notebook of that name in {args.source} "
                         f"(expected one of {sorted(names)})")
    if args.executed is not None:
        check_out_folder(parser, "--executed", args.executed)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specnb.course.assignments", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=pathlib.Path, default=SOURCE_DIR,
                        help="folder of source notebooks (default: %(default)s)")
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="write the student versions")
    release_parser.add_argument("--out", type=pathlib.Path,
                                default=SOURCE_DIR.parent / "release",
                                help="output folder (default: %(default)s)")
    grade_parser = commands.add_parser("grade", help="execute and score submitted notebooks")
    grade_parser.add_argument("submissions", nargs="+", help="notebooks or folders of them")
    grade_parser.add_argument("--timeout", type=int, default=600,
                              help="seconds per cell, then the cell is interrupted "
                                   "(default: %(default)s)")
    grade_parser.add_argument("--notebook-timeout", type=int, default=1800,
                              help="seconds per notebook, then it scores 0 "
                                   "(default: %(default)s)")
    grade_parser.add_argument("--executed", type=pathlib.Path, default=None,
                              help="also save each executed notebook here (full error messages)")
    grade_parser.add_argument("--jobs", type=int, default=1,
                              help="submissions graded at once, one kernel each (default: "
                                   "%(default)s; on a course server about one per core)")
    grade_parser.add_argument("--threads", type=int, default=1,
                              help="torch/OpenMP threads per kernel (default: %(default)s: "
                                   "kernels share the cores)")
    grade_parser.add_argument("--unconfined", action="store_true",
                              help="run kernels without Landlock/seccomp (a machine without "
                                   "them): they still lack the answers, but can read the disk")
    course_parser = commands.add_parser(
        "nbgrader-course", help="lay out an nbgrader course: DIR/nbgrader_config.py (with "
                                "grade's judge and library-use check) and "
                                "DIR/source/<assignment>/")
    course_parser.add_argument("course_dir", metavar="DIR", type=pathlib.Path,
                               help="the course folder: new, or empty")
    course_parser.add_argument("--force", action="store_true",
                               help="write into a non-empty DIR, overwriting its config and "
                                    "source notebooks")
    for sub in commands.choices.values():  # listed in each command's --help too
        sub.add_argument("--source", type=pathlib.Path, default=argparse.SUPPRESS,
                         help="folder of source notebooks (default: %s)" % SOURCE_DIR)
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.command == "release":
        for path in release(args.source, args.out):
            print(f"wrote {path}")
    elif args.command == "nbgrader-course":
        from .nbgrader_course import make_course

        try:
            written = make_course(args.course_dir, args.source, force=args.force)
        except ValueError as error:
            parser.error(str(error))
        print("\n".join(f"wrote {path}" for path in written))
        print(f"next: cd {args.course_dir} && nbgrader generate_assignment <assignment> "
              f"(assignments/README.md)")
    else:
        grade(args.submissions, args.source, args.timeout, args.executed,
              notebook_timeout=args.notebook_timeout, jobs=args.jobs, threads=args.threads,
              confined=not args.unconfined)
    return 0


if __name__ == "__main__":
    sys.exit(main())
