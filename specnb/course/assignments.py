"""Release and grade the course assignments in assignments/source/ (nbgrader markup, no nbgrader).

    python -m specnb.course.assignments release [--out assignments/release]
    python -m specnb.course.assignments grade SUBMISSION... [--executed DIR]

`release` writes the student versions the way nbgrader's `generate_assignment` does: in
solution cells each `### BEGIN SOLUTION` ... `### END SOLUTION` region becomes
`# YOUR CODE HERE` + `raise NotImplementedError()` (a solution cell without markers is replaced
whole), `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` regions are deleted from grade
cells, outputs and execution counts are cleared and grade cells are made read-only.

`grade` takes submitted notebooks (files, or folders searched for the source file names),
puts back every test cell from the source (hidden tests included, so editing a test changes
nothing), executes the notebook with errors allowed and prints per grade cell its points: full
when the cell ran without an error, else 0 and the first line of the error. Cells graded by
hand (nbgrader `solution` and `grade`) are listed as "manual"; a total closes the report.

Before running anything, `grade` parses the code the student wrote (`specnb.course.checks.solution_code`):
a test cell whose exercise reaches the library's own implementation of the answer (the source
notebook's metadata `specnb.write_yourself`) scores 0, with the line that does it. A submission
that is not a notebook, whose kernel dies, or that runs over `--notebook-timeout` scores 0 with a
message and the other submissions are graded; a cell that runs over `--timeout` is interrupted.
It does not keep a database, collect files or write feedback: nbgrader does that for
instructors who want it.
"""

import argparse
import asyncio
import copy
import json
import logging
import pathlib
import re
import subprocess
import sys
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


def execute(notebook, path: pathlib.Path, timeout: int, notebook_timeout: float) -> list:
    """Run `notebook` in place in a fresh kernel (its stderr discarded: kernel warnings stay
    out of the report); return notes on cells interrupted after `timeout` seconds.

    Raises TimeoutError past `notebook_timeout` seconds (the kernel is shut down)."""
    from nbclient import NotebookClient

    quiet = logging.getLogger("specnb.course.assignments.kernel")  # nbclient's timeout/death logs:
    quiet.setLevel(logging.CRITICAL)  # the report says it in one line instead
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, log=quiet,
                            resources={"metadata": {"path": str(path.parent)}})

    async def run():
        await asyncio.wait_for(client.async_execute(stderr=subprocess.DEVNULL,
                                                    stdout=subprocess.DEVNULL),
                               notebook_timeout)
    try:
        asyncio.get_running_loop()
        nested = True  # called from a running loop (a notebook): nbclient nests, no wall limit
    except RuntimeError:
        nested = False  # the usual case
    if nested:
        client.execute(stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    else:
        started = time.monotonic()
        try:
            asyncio.run(run())
        except Exception as error:  # noqa: BLE001 - sorted out below
            # Cancelling at the deadline may surface as nbclient's DeadKernelError (the kernel
            # is shut down under a running cell) instead of the timeout itself.
            if isinstance(error, asyncio.TimeoutError) or \
                    time.monotonic() - started >= notebook_timeout:
                raise TimeoutError(f"the notebook ran over {notebook_timeout:g} s (a cell that "
                                   f"never ends?) and was stopped") from None
            raise
    return [f"cell {grading(c).get('grade_id') or i} ran over {timeout} s and was interrupted"
            for i, c in enumerate(notebook.cells)
            if (error_text(c) or "").startswith("KeyboardInterrupt")]


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
                   notebook_timeout: float = 1800) -> list:
    """Execute one submission; return [(grade_id, points earned or None, points, message)].

    Never raises for a bad submission: an unreadable file, a dead kernel or a notebook over
    `notebook_timeout` seconds gives every test cell 0 with the reason as its message."""
    source = nbformat.read(source_path, as_version=4)
    try:
        submitted = read_submission(path)
        voided = library_use_messages(submitted, source)
        notebook = graded_notebook(submitted, source)
        auto = {grading(c)["grade_id"] for c in source.cells
                if grading(c).get("grade") and not grading(c).get("solution")}
        notes = [] if auto <= set(voided) else execute(notebook, path, timeout, notebook_timeout)
    except Exception as error:  # noqa: BLE001 - one bad submission must not stop the rest
        reason = str(error) if isinstance(error, (ValueError, TimeoutError)) else \
            f"grading stopped: {type(error).__name__}: {first_line(str(error))}"
        return zero_rows(source, reason)
    if executed_path is not None:
        executed_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, executed_path)
    present = {grading(c).get("grade_id"): c for c in notebook.cells}
    rows = []
    for cell in source.cells:
        meta = grading(cell)
        if not meta.get("grade"):
            continue
        points = float(meta.get("points", 0))
        graded = present.get(meta["grade_id"])
        if meta.get("solution"):
            rows.append((meta["grade_id"], None, points, "graded by hand"))
        elif graded is None:
            rows.append((meta["grade_id"], 0.0, points, "test cell missing from the submission"))
        elif meta["grade_id"] in voided:
            rows.append((meta["grade_id"], 0.0, points, voided[meta["grade_id"]]))
        else:
            error = error_text(graded)
            if error and notes:
                error = f"{error} ({notes[0]})"
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


def grade(paths, source_dir=SOURCE_DIR, timeout=600, executed_dir=None, stream=sys.stdout,
          notebook_timeout: float = 1800) -> dict:
    """Grade each submission, print its rows, then the total; return {submission: rows}."""
    results = {}
    for submission, source in find_submissions(paths, source_dir):
        executed = None if executed_dir is None else pathlib.Path(executed_dir) / (
            f"{submission.parent.name}-{submission.name}")
        rows = grade_notebook(submission, source, timeout, executed, notebook_timeout)
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
    folders = {}
    for submission, rows in results.items():
        folders.setdefault(str(pathlib.Path(submission).parent), []).extend(rows)
    for folder, rows in folders.items():
        earned = sum(r[1] for r in rows if r[1] is not None)
        possible = sum(r[2] for r in rows if r[1] is not None)
        manual = sum(r[2] for r in rows if r[1] is None)
        print(f"total {folder}: {earned:g}/{possible:g} auto-graded points"
              + (f" (+ {manual:g} graded by hand)" if manual else ""), file=stream)
    return results


def check_args(parser, args) -> None:
    """Refuse a missing source, submission or timeout, or an unwritable output folder, with an
    argparse message (exit 2) before any notebook is written or executed."""
    if not args.source.is_dir() or not any(args.source.glob("*.ipynb")):
        parser.error(f"--source {args.source}: no folder of source notebooks (*.ipynb) there")
    if args.command == "release":
        check_out_folder(parser, "--out", args.out)
        return
    for option, value in (("--timeout", args.timeout),
                          ("--notebook-timeout", args.notebook_timeout)):
        if value < 1:
            parser.error(f"{option} must be >= 1 second, got {value}")
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
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.command == "release":
        for path in release(args.source, args.out):
            print(f"wrote {path}")
    else:
        grade(args.submissions, args.source, args.timeout, args.executed,
              notebook_timeout=args.notebook_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
