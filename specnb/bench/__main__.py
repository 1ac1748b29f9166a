"""`python -m specnb.bench`: the side-by-side benchmark (`specnb.bench.compare`)."""

from .compare import main

main()
