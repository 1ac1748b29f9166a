"""Lay out an nbgrader course of the assignments: `python -m specnb.course.assignments
nbgrader-course DIR [--force]`.

Writes DIR/nbgrader_config.py and DIR/source/<assignment>/<notebook>.ipynb, one assignment per
source notebook, named after it (01_acceptance_test/01_acceptance_test.ipynb). The notebooks need no
file beside them (they import `specnb`, which finds its own data), so nbgrader has nothing else to
copy. The config names the course and its folders, lists nbgrader's autograde steps with specnb's
`JudgedExecute` in place of `Execute` and `LibraryUseCheck` added
(specnb/course/nbgrader_check.py), gives cells `grade`'s time limit and one torch thread per kernel,
and puts the bin folder of the Python that runs nbgrader first on PATH: nbgrader runs `alembic` from
PATH when it creates gradebook.db, so `.venv/bin/nbgrader` works without activating the environment.

It refuses a DIR that exists and is not empty (unless `force`, which overwrites the config and
the source notebooks and leaves everything else: gradebook, releases, submissions), and a source
notebook that is not a notebook or has no nbgrader test cell, before writing anything. It does
not run nbgrader: `nbgrader generate_assignment` and `nbgrader autograde` do the rest
(assignments/README.md, "With nbgrader").
"""

import pathlib
import shutil

import nbformat

COURSE_ID = "specnb"
# The autograde steps, by name: nbgrader imports them (and specnb, torch) only when it
# autogrades. JUDGED takes the place of nbgrader's Execute, CHECK goes before SaveAutoGrades.
CHECK = "specnb.course.nbgrader_check.LibraryUseCheck"
JUDGED = "specnb.course.nbgrader_check.JudgedExecute"
CONFIG = '''\
"""nbgrader's configuration of the specnb course (written by `python -m specnb.course.assignments
nbgrader-course`). nbgrader reads it from the folder it runs in: run nbgrader commands here."""
import os
import sys

c = get_config()  # noqa: F821 - defined by the config loader

# nbgrader runs `alembic` from PATH when it creates gradebook.db: look first beside the Python
# running nbgrader (the environment specnb is installed in), even if it is not activated.
bin_folder = os.path.dirname(sys.executable)
os.environ["PATH"] = os.pathsep.join([bin_folder, os.environ.get("PATH", os.defpath)])
# The kernels nbgrader starts inherit this environment: one torch (OpenMP) thread each unless set
# before. Where cores are shared, spinning threads slow runs down: exercise 5 took four times as
# long with torch's default on a 2-core CPU next to a background job.
for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(name, "1")

# The course's name in the gradebook (gradebook.db, in this folder).
c.CourseDirectory.course_id = "{course_id}"
# Notebooks with solutions and hidden tests: source/<assignment>/<notebook>.ipynb.
c.CourseDirectory.source_directory = "source"
# Student versions, written by `nbgrader generate_assignment <assignment>`.
c.CourseDirectory.release_directory = "release"
# Collected work, one folder per student: submitted/<student>/<assignment>/<notebook>.ipynb.
c.CourseDirectory.submitted_directory = "submitted"
# Executed and scored submissions, written by `nbgrader autograde <assignment>`.
c.CourseDirectory.autograded_directory = "autograded"

# nbgrader's autograde steps with specnb's two (specnb/course/nbgrader_check.py), so that a test
# cell scores as under `python -m specnb.course.assignments grade`: JudgedExecute runs the
# student's cells in a confined kernel without the assignment's answers and the test cells in
# the grader's own process, on what the student's functions return, and writes their outputs;
# LibraryUseCheck, just before scores are saved, voids the cells of an exercise answered by
# importing the library's implementation.
c.Autograde.autograde_preprocessors = [
{steps}
]
# Seconds a cell may run before it is stopped: nbgrader's default (30) is short for exercise
# 5's runs of the embedded model on a CPU; `grade --timeout` defaults to the same 600.
c.JudgedExecute.timeout = 600
# Where the grading machine has no Landlock (Linux 5.13 or newer), set this to False: the judge
# still runs the tests outside the kernel, but the kernel can read the disk and start processes.
c.JudgedExecute.confined = True
'''


def assignment_names(source_dir: pathlib.Path) -> dict:
    """{assignment name: source notebook}: `01_acceptance_test` for 01_acceptance_test.ipynb.

    Raises ValueError for a file that is not a notebook or has no nbgrader test cell."""
    names = {}
    for path in sorted(pathlib.Path(source_dir).glob("*.ipynb")):
        try:
            notebook = nbformat.read(path, as_version=4)
        except Exception as error:  # noqa: BLE001 - nbformat raises several kinds
            raise ValueError(f"{path}: not a notebook ({type(error).__name__}: "
                             f"{str(error).splitlines()[0] if str(error) else ''})") from None
        if not any(c.get("metadata", {}).get("nbgrader", {}).get("grade") for c in notebook.cells):
            raise ValueError(f"{path}: no nbgrader test cell (metadata nbgrader.grade); not an "
                             f"assignment source")
        names[path.stem] = path
    if not names:
        raise ValueError(f"{source_dir}: no source notebooks (*.ipynb) there")
    return names


def autograde_steps() -> list:
    """The dotted names of nbgrader's own `Autograde.autograde_preprocessors` with JUDGED in
    place of Execute and CHECK just before SaveAutoGrades (read from the installed nbgrader: its
    other steps stay as they are)."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute, SaveAutoGrades

    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    if SaveAutoGrades not in steps or Execute not in steps:
        raise RuntimeError(f"this nbgrader's autograde has no Execute or SaveAutoGrades step "
                           f"({steps}); specnb's steps need nbgrader 0.9")
    names = [f"{step.__module__}.{step.__qualname__}" for step in steps]
    names[steps.index(Execute)] = JUDGED
    names.insert(steps.index(SaveAutoGrades), CHECK)
    return names


def make_course(course_dir, source_dir, force: bool = False) -> list:
    """Write the config and each source notebook into `course_dir`; return the paths written."""
    course_dir = pathlib.Path(course_dir)
    if course_dir.exists() and not course_dir.is_dir():
        raise ValueError(f"DIR {course_dir} exists and is not a folder")
    if course_dir.is_dir() and any(course_dir.iterdir()) and not force:
        raise ValueError(f"DIR {course_dir} exists and is not empty: give a new folder, or "
                         f"--force to overwrite its nbgrader_config.py and source notebooks")
    names = assignment_names(source_dir)
    steps = "\n".join(f'    "{step}",' for step in autograde_steps())  # imports nbgrader
    course_dir.mkdir(parents=True, exist_ok=True)
    config = course_dir / "nbgrader_config.py"
    config.write_text(CONFIG.format(course_id=COURSE_ID, steps=steps))
    written = [config]
    for name, path in names.items():
        target = course_dir / "source" / name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        written.append(target)
    return written
