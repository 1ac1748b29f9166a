"""Measuring: the side-by-side benchmark, batched throughput, CPU paths, one-prompt live races.

    python -m specnb.bench          compare: every method beside transformers' peers (JSON + PNG)
    python -m specnb.bench.batch    batch: throughput against batch size
    python -m specnb.bench.cpu_path cpu_path: checking cost t(k)/t(1) of both CPU paths
    python -m specnb.bench.overhead overhead: the loop's own work per iteration, host syncs
    from specnb.bench import live   live: one prompt, for notebooks 01, 05, 06 and 10

What goes here: code that runs models to time them and writes records (data/results/). What
does not: the loops being timed (`specnb.methods`), the forward-latency curve the γ schedule
also needs (`specnb.core.latency`), and any drawing (`specnb.viz` reads the records; a command
imports viz only inside a function, to write its PNG).
"""
