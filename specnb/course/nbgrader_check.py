"""`grade`'s judgement inside nbgrader's autograde: two nbgrader preprocessors.

A course enables them in nbgrader_config.py, where `python -m specnb.course.assignments
nbgrader-course` writes nbgrader's list of autograde steps with `JudgedExecute` in place of
nbgrader's `Execute` and `LibraryUseCheck` added (`specnb.course.nbgrader_course.autograde_steps`):

    c.Autograde.autograde_preprocessors = [
        "specnb.course.nbgrader_check.JudgedExecute", ...,
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
an error output or a stderr stream gives 0, else full points), and nbgrader's own Execute writes
those outputs from what the student's kernel sends: code in an earlier cell decides them.

- `JudgedExecute` runs the notebook as `grade` does (`assignments.execute`, specnb.course.judge):
  in a confined kernel without the assignment's answers, in an empty throw-away folder, with the
  auto-graded test cells run by the judge outside that kernel, which writes their outputs (the
  checks' lines, or one error output with the check's message). SaveAutoGrades then scores
  what the judge found, not what the kernel claimed.
- `LibraryUseCheck` reads the code (`library_use_messages`, the function `grade` uses): the
  exercises answered by importing the library's implementation score 0 (`LibraryUse`), with that
  reason in the feedback. It runs just before SaveAutoGrades, on the sanitized notebook, so the
  code it judges is the student's solution cells and added cells.

Both take their rules from the course's source notebook (metadata `specnb.write_yourself`,
`specnb.judge`), never from the submission, which a student can edit. The source is found from
the ids nbgrader puts in `resources["nbgrader"]` (converters/base.py, lines 207-210) and the
course's CourseDirectory.
"""

import pathlib

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Integer

from .assignments import execute, grading, library_use_messages, test_cells

ENAME = "LibraryUse"  # the error name a voided test cell shows in nbgrader's feedback


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


class JudgedExecute(NbGraderPreprocessor):
    """Execute the notebook as `grade` does: a confined, answer-free kernel for the student's
    cells, the judge outside it for the auto-graded test cells (whose outputs it writes)."""

    timeout = Integer(600, help="Seconds a cell (or a test's calls) may run before it is "
                                "stopped, as `grade --timeout`").tag(config=True)
    notebook_timeout = Integer(1800, help="Seconds a whole notebook may run, as `grade "
                                          "--notebook-timeout`").tag(config=True)
    threads = Integer(1, help="torch/OpenMP threads in the kernel").tag(config=True)
    confined = Bool(True, help="Start the kernel confined (Landlock and seccomp, "
                               "judge/confine.py); False where the machine has neither"
                    ).tag(config=True)

    def preprocess(self, nb, resources):
        path = source_notebook(self.config, resources)
        source = nbformat.read(path, as_version=4)
        notes, _ = execute(nb, source, path, self.timeout, self.notebook_timeout,
                           test_cells(source, nb), self.threads, confined=self.confined)
        for note in notes:
            self.log.info(note)
        return nb, resources
