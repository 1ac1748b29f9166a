"""`grade`'s library-use check inside nbgrader's autograde: an nbgrader preprocessor.

A course enables it in nbgrader_config.py, where `python -m specnb.course.assignments
nbgrader-course` writes nbgrader's list of autograde steps with this one added
(`specnb.course.nbgrader_course.autograde_steps`):

    c.Autograde.autograde_preprocessors = [..., "nbgrader.preprocessors.limitoutput.LimitOutput",
        "specnb.course.nbgrader_check.LibraryUseCheck",
        "nbgrader.preprocessors.saveautogrades.SaveAutoGrades", ...]

By name, so nbgrader imports specnb (and torch) only when it autogrades.

Where it goes, from nbgrader 0.9.6's source. `Autograde` (converters/autograde.py, lines 55-70)
runs two passes over each submitted notebook, each a configurable list of preprocessors:
`sanitize_preprocessors` (ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells, which
puts back every grade and locked cell from the gradebook's copy of the source, hidden tests
included, CheckCellMetadata), then `autograde_preprocessors` (Execute, IgnorePattern,
ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata).
SaveAutoGrades scores a test cell from its outputs alone (utils.py `determine_grade`, line 149:
an error output or a stderr stream gives 0, else full points). `LibraryUseCheck` therefore goes
into the second list just before SaveAutoGrades: after Execute, which replaces every output, and
after every step that edits outputs, so nothing undoes it before the scores are saved. It
replaces the outputs of each voided test cell by one error output carrying the line `grade`
prints. It reads the sanitized notebook, so the code it judges is the student's solution cells
and added cells, as in `grade` (`library_use_messages`, the same function); the rules come from
the course's source notebook (metadata `specnb.write_yourself`), never from the submission,
which a student can edit. The source is found from the ids nbgrader puts in
`resources["nbgrader"]` (converters/base.py, lines 207-210) and the course's CourseDirectory.

Swallowed exceptions are already covered by nbgrader: when the kernel replies "error" to a cell
that shows no error output (the student installed `get_ipython().set_custom_exc(...)` or replaced
`showtraceback`), `Execute.on_cell_executed` (preprocessors/execute.py, lines 76-94) adds one, so
the test cell scores 0. Not covered here: code that changes what the kernel runs (an IPython AST
transformer wrapping each cell in `try`/`except`), after which the kernel itself replies "ok",
and uses of the library that the code reader cannot see (it is the reader `grade` uses:
specnb/course/checks/solution_code.py says what it sees). It changes nothing else in nbgrader's
scoring.
"""

import pathlib

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from .assignments import grading, library_use_messages

ENAME = "LibraryUse"  # the error name a voided test cell shows in nbgrader's feedback


class LibraryUseCheck(NbGraderPreprocessor):
    """Give each test cell voided by a use of the library's own answer an error output."""

    def source_notebook(self, resources) -> pathlib.Path:
        """source/<assignment>/<notebook>.ipynb of the course being graded (nbgrader runs
        preprocessors from the course root, so a CourseDirectory on this config finds it)."""
        ids = resources["nbgrader"]
        course = CourseDirectory(config=self.config)
        return pathlib.Path(course.format_path(course.source_directory, ".", ids["assignment"]),
                            f"{ids['notebook']}.ipynb")

    def preprocess(self, nb, resources):
        path = self.source_notebook(resources)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the source notebook is missing; LibraryUseCheck "
                                    f"reads its metadata `specnb.write_yourself`")
        messages = library_use_messages(nb, nbformat.read(path, as_version=4))
        for cell in nb.cells:
            message = messages.get(grading(cell).get("grade_id"))
            if message and cell.cell_type == "code" and grading(cell).get("grade"):
                self.log.info("%s: %s", grading(cell)["grade_id"], message)
                cell.outputs = [nbformat.v4.new_output("error", ename=ENAME, evalue=message,
                                                       traceback=[f"{ENAME}: {message}"])]
        return nb, resources
