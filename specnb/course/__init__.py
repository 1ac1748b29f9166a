"""What exists only to teach: assignment checks and tooling, broken variants, a synthetic draft.

    checks            `from specnb.course import checks`: the assignments' automatic checks
    assignments       `python -m specnb.course.assignments release|grade`: student versions, grading
    judge             grading outside the student's kernel, which runs confined and answer-free
    broken_samplers   deliberately wrong verifiers that the statistical tests must reject
    synthetic_draft   a draft that meets the i.i.d. acceptance assumption exactly (notebook 05)

What does not go here: anything the library needs to decode (`specnb.core`, `specnb.drafters`,
`specnb.methods`) or to measure (`specnb.bench`). Nothing below course imports it.
"""
