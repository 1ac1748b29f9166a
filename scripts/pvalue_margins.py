"""How far each χ² verdict of the test suite is from flipping: `make test-portability` prints it.

Every statistical test in tests/ decides at 1e-3 (its own P_MIN) or at `specnb.stats.SIGNIFICANCE`
(1e-4) from samples drawn with a fixed seed.
On another CPU the float kernels round differently, a few samples can change, and the p-value
moves a little; a verdict is safe when its p-value is far from the level on either side. This
reads the log that tests/conftest.py writes under SPECNB_PVALUE_LOG (one `[test id, p-value]`
per line, from one or more runs) and prints, per test, the p-value closest to either level and
its distance in decades, closest first (a test's own level is not in the log, so this is the
cautious reading).

    python scripts/pvalue_margins.py build/pvalues-*.jsonl [--levels 1e-3 1e-4] [--top 10]
"""

import argparse
import json
import math


def margins(lines, levels) -> dict:
    """{test id: (closest p-value, decades from the nearest level)} over every logged p-value."""
    closest = {}
    for line in lines:
        test, pvalue = json.loads(line)
        decades = min(abs(math.log10(max(pvalue, 1e-300) / level)) for level in levels)
        if test not in closest or decades < closest[test][1]:
            closest[test] = (pvalue, decades)
    return closest


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--levels", type=float, nargs="+", default=[1e-3, 1e-4])
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    lines = [line for path in args.logs for line in open(path) if line.strip()]
    found = sorted(margins(lines, args.levels).items(), key=lambda item: item[1][1])
    levels = " or ".join(f"{level:g}" for level in args.levels)
    print(f"{len(lines)} χ² p-values in {len(found)} tests; closest to the level {levels}:")
    for test, (pvalue, decades) in found[:args.top]:
        print(f"  {decades:5.2f} decades  p = {pvalue:.3g}  {test}")


if __name__ == "__main__":
    main()
