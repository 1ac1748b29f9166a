"""Automatic checks for the course assignments (assignments/source/*.ipynb).

Each `check_*` runs a student's function against the library on hand-made, edge and random
inputs (and in law, for the samplers), prints one "✓ ... passed" line, or raises `CheckFailed`
with the input, the expected and the returned value and a hint. Random inputs come from a
generator seeded inside the check (`seed=` picks another set, e.g. for hidden tests).

    from specnb.course import checks
    checks.check_accept_probability(accept_probability)

Exercises: 1 `acceptance`, 2 `verify`, 3 `ngram`, 4 `jacobi`, 5 `gamma` and `tokens`,
6 `laws`, 7 `rollback` and `positions`, 8 `typical` and `siblings`. The checks look only at what a function returns; `solution_code` is what `grade` uses
to read *how* it is written (no call of the library's own answer). Importing this package in
IPython shows a failed check as its message alone (`report.short_tracebacks`).
"""

from .acceptance import check_accept_probability, check_residual, check_verify_one
from .gamma import Clock, check_best_gamma, check_checking_cost, check_cost_ratio, \
    check_estimate_alpha, check_measurements, check_predicted_speedup, check_speedup_checked, \
    check_timing_table
from .laws import SUSPECT_DRAFT, SUSPECT_TARGET, check_answer_form, check_broken_law, \
    check_chi2_pvalue, check_find_broken, check_overlap_prediction, check_prediction, suspects
from .jacobi import check_jacobi_loop, check_jacobi_step, tiny_model
from .ngram import check_ngram_lookup
from .positions import check_acceptance_by_position, check_mean_acceptance_length
from .report import CheckFailed, short_tracebacks
from .rollback import check_rollback_mask
from .siblings import check_siblings_are_exact, check_try_siblings
from .tokens import check_bootstrap, check_expected_tokens
from .typical import check_law_prediction, check_typical_law
from .verify import check_verify

short_tracebacks()

__all__ = ["CheckFailed", "Clock", "SUSPECT_DRAFT", "SUSPECT_TARGET", "check_accept_probability",
           "check_acceptance_by_position", "check_law_prediction",
           "check_mean_acceptance_length", "check_rollback_mask", "check_siblings_are_exact",
           "check_try_siblings", "check_typical_law",
           "check_answer_form", "check_best_gamma",
           "check_bootstrap", "check_broken_law", "check_checking_cost", "check_chi2_pvalue",
           "check_cost_ratio", "check_speedup_checked",
           "check_expected_tokens", "check_find_broken", "check_overlap_prediction",
           "check_prediction", "short_tracebacks", "suspects",
           "check_estimate_alpha", "check_jacobi_loop", "check_jacobi_step",
           "check_measurements", "check_ngram_lookup", "check_predicted_speedup",
           "check_residual", "check_timing_table", "check_verify", "check_verify_one",
           "tiny_model"]
