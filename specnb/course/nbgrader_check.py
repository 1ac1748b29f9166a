"""`grade`'s judgement inside nbgrader's autograde: two nbgrader preprocessors.

A course enables them in nbgrader_config.py, where `python -m specnb.course.assignments
nbgrader-course` writes nbgrader's list of autograde steps with `GuardedExecute` in place of
nbgrader's `Execute` and `LibraryUseCheck` added (`specnb.course.nbgrader_course.autograde_steps`):

    c.Autograde.autograde_preprocessors = [
        "specnb.course.nbgrader_check.GuardedExecute", ...,
        "nbgrader.preprocessors.limitoutput.LimitOutput",
        "specnb.course.nbgrader_check.LibraryUseCheck",
        "nbgrader.preprocessors.saveautogrades.SaveAutoGrades", ...]

By name, so nbgrader imports specnb (and torch) only when it autogrades.

Where they go, from nbgrader 0.9.6's source. `Autograde` (converters/autograde.py, lines 55-70)
runs two passes over each submitted notebook, each a configurable list of preprocessors:
`sanitize_preprocessors` (ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, which
puts back every grade and locked cell from the gradebook's copy of the source, hidden tests
included, CheckCellMetadata), then `autograde_preprocessors` (Execute, IgnorePattern,
ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata).
SaveAutoGrades scores a test cell from its outputs alone (utils.py `determine_grade`, line 149:
an error output or a stderr stream gives 0, else full points). So both steps judge by replacing
the outputs of a voided test cell with one error output carrying the line `grade` prints, and
the other steps between them and SaveAutoGrades edit no error output.

- `GuardedExecute` is nbgrader's Execute (an nbclient NotebookClient) with `grade`'s guard hooks
  (`guarded_client.GuardHooks`, `grading_guard`): before each auto-graded test cell the
  student's input/AST transformers, exception handlers, event callbacks and edits of the shell
  or the checks are undone, so the cell runs as written and a wrong answer fails; a call into
  the library's own answer or a copy of it (or of the reference solution) while it runs voids
  it (`GradingGuard`). A kernel reply "error" that shows no error output (a student's
  `set_custom_exc`) already gets one from nbgrader's `Execute.on_cell_executed`
  (preprocessors/execute.py, lines 76-94).
- `LibraryUseCheck` reads the code (`library_use_messages`, the function `grade` uses): the
  exercises answered by importing the library's implementation score 0 (`LibraryUse`). It runs
  just before SaveAutoGrades, on the sanitized notebook, so the code it judges is the student's
  solution cells and added cells.

Both take their rules from the course's source notebook (metadata `specnb.write_yourself`, the
reference solution), never from the submission, which a student can edit. The source is found
from the ids nbgrader puts in `resources["nbgrader"]` (converters/base.py, lines 207-210) and the
course's CourseDirectory. `GuardedExecute` also starts each kernel in an empty throw-away folder
(nbgrader's Execute starts it in the autograded copy of the student's folder, where files shipped
beside the notebook are). What still differs from `grade` is listed in assignments/README.md
("With nbgrader").
"""

import pathlib
import tempfile

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool

from .assignments import grading, guard_for, library_use_messages, violation_message
from .guarded_client import GuardHooks

ENAME = "LibraryUse"  # the error name a voided test cell shows in nbgrader's feedback
GUARD_ENAME = "GradingGuard"  # ... and one the call guard voided


def source_notebook(config, resources) -> pathlib.Path:
    """source/<assignment>/<notebook>.ipynb of the course being graded (nbgrader runs
    preprocessors from the course root, so a CourseDirectory on this config finds it). Raises
    FileNotFoundError if it is not there: the rules come from it, never from the submission."""
    ids = resources["nbgrader"]
    course = CourseDirectory(config=config)
    path = pathlib.Path(course.format_path(course.source_directory, ".", ids["assignment"]),
                        f"{ids['notebook']}.ipynb")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the source notebook is missing; specnb's autograde "
                                f"steps read its metadata `specnb.write_yourself`")
    return path


def void(cell, ename: str, message: str) -> None:
    """Replace a test cell's outputs by one error output: SaveAutoGrades then scores it 0."""
    cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=message,
                                           traceback=[f"{ename}: {message}"])]


class LibraryUseCheck(NbGraderPreprocessor):
    """Give each test cell voided by a use of the library's own answer an error output."""

    def preprocess(self, nb, resources):
        path = source_notebook(self.config, resources)
        messages = library_use_messages(nb, nbformat.read(path, as_version=4))
        for cell in nb.cells:
            message = messages.get(grading(cell).get("grade_id"))
            if message and cell.cell_type == "code" and grading(cell).get("grade"):
                self.log.info("%s: %s", grading(cell)["grade_id"], message)
                void(cell, ENAME, message)
        return nb, resources


class GuardedExecute(GuardHooks, Execute):
    """nbgrader's Execute with `grade`'s guard around the auto-graded test cells
    (specnb/course/grading_guard.py): before each, the student's input and AST transformers,
    exception handlers, event callbacks and edits of the shell or the checks are undone; while
    it runs, a call into the library's own answer, into a copy of it or of the reference
    solution is recorded, and the cell's outputs are replaced by a `GradingGuard` error naming
    it. A kernel reply "error" with no error output already scores 0 (nbgrader's Execute adds
    one)."""

    reference_copies = Bool(True, help=(
        "Count functions that are copies of the source notebook's reference solution as "
        "copies (0 points on the test cells that call them), as `grade` does. False to "
        "autograde the reference solution itself.")).tag(config=True)

    def preprocess(self, nb, resources, km=None):
        source = nbformat.read(source_notebook(self.config, resources), as_version=4)
        self.guard_notebook(*guard_for(source, nb, self.reference_copies))
        # The kernel starts in an empty throw-away folder, as under `grade`: not in the
        # autograded copy of the student's folder, where files shipped beside the notebook are.
        metadata = resources.setdefault("metadata", {})
        path = metadata.get("path")
        with tempfile.TemporaryDirectory(prefix="specnb-autograde-") as folder:
            metadata["path"] = folder
            try:
                nb, resources = super().preprocess(nb, resources, km=km)
            finally:
                if path is None:
                    del metadata["path"]
                else:
                    metadata["path"] = path
        for index, (status, violations) in sorted(self.verdicts.items()):
            if violations:
                message = violation_message(violations)
                self.log.info("%s: %s", grading(nb.cells[index]).get("grade_id"), message)
                void(nb.cells[index], GUARD_ENAME, message)
        return nb, resources

    def on_cell_execute(self, cell, cell_index):
        return self.guard_before(cell, cell_index)

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)  # nbgrader's error output for a swallowed error
        return self.guard_after(kwargs["cell"], kwargs["cell_index"], kwargs["execute_reply"])
