"""Grading that holds by construction: the judge outside the student's kernel.

- `judge.py`: runs a submission, the student's cells in a confined kernel, the test cells in the
  grader's own process (`Judge`, used by `python -m specnb.course.assignments grade` and by
  nbgrader's `JudgedExecute` step);
- `wire.py`: the plain data that crosses between them, both ways;
- `room.py`: the errand-runner the judge loads into the kernel (look up, call, send back);
- `confine.py`: the kernel's walls (Landlock, seccomp, a memory limit);
- `build.py`, `withheld.py`: the kernel's copy of specnb without the assignment's answers.
"""
