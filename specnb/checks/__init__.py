"""Automatic checks for the course assignments (assignments/source/*.ipynb).

Each `check_*` runs a student's function against the library on hand-made, edge and random
inputs (and in law, for the samplers), prints one "✓ ... passed" line, or raises `CheckFailed`
with the input, the expected and the returned value and a hint. Random inputs come from a
generator seeded inside the check (`seed=` picks another set, e.g. for hidden tests).

    from specnb import checks
    checks.check_accept_probability(accept_probability)

Exercises: 1 `acceptance`, 2 `verify`, 3 `ngram`, 4 `jacobi`, 5 `gamma`. The checks never
look at how a function is written, only at what it returns.
"""

from .acceptance import check_accept_probability, check_residual, check_verify_one
from .gamma import check_best_gamma, check_cost_ratio, check_estimate_alpha, \
    check_measurements, check_predicted_speedup, check_timing_table
from .jacobi import check_jacobi_loop, check_jacobi_step, tiny_model
from .ngram import check_ngram_lookup
from .report import CheckFailed
from .verify import check_verify

__all__ = ["CheckFailed", "check_accept_probability", "check_best_gamma", "check_cost_ratio",
           "check_estimate_alpha", "check_jacobi_loop", "check_jacobi_step",
           "check_measurements", "check_ngram_lookup", "check_predicted_speedup",
           "check_residual", "check_timing_table", "check_verify", "check_verify_one",
           "tiny_model"]
