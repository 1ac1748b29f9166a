"""Re-execute the course's notebooks in place, in order, on this machine: `make notebooks`.

The committed outputs of all notebooks come from one machine in one run, so they never
contradict each other; each notebook's first cell prints `specnb.machine_line()`, the machine
and versions they came from. Saved widget state is dropped (the tests forbid it: a kernel, or
the book's static panels, draws the widgets). Each notebook should run within its budget on a
2-core CPU (two minutes: the tests run every notebook); one that does not is named at the end,
and the command fails.

    python -m specnb.course.execute                       # every notebooks/*.ipynb
    python -m specnb.course.execute notebooks/05_speculative_decoding.ipynb --budget 150
"""

import argparse
import sys
import time
from pathlib import Path

from tqdm.auto import tqdm

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
BUDGET_S = 120.0


def execute(path: Path, timeout: int = 900) -> float:
    """Run one notebook in a fresh kernel of this Python, in its folder, and save it; seconds."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)  # no saved widget state (tests/test_notebook_layout.py)
    nbformat.write(notebook, path)
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specnb.course.execute", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to run (default: every notebooks/*.ipynb, in order)")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help="seconds a notebook may take (default %(default)s)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file() or p.suffix != ".ipynb"]
    if missing:
        parser.error(f"not a notebook: {', '.join(missing)}")
    if args.budget <= 0:
        parser.error(f"--budget must be > 0 seconds, got {args.budget}")
    from ..models.machine import machine_line

    print(f"executing {len(paths)} notebook(s) on {machine_line()}")
    seconds = {}
    for path in tqdm(paths, desc="notebooks", unit="notebook"):
        seconds[path] = execute(path)
        tqdm.write(f"{seconds[path]:7.1f} s  {path.name}")
    over = [p.name for p, s in seconds.items() if s > args.budget]
    print(f"{sum(seconds.values()):7.1f} s  all {len(paths)}")
    if over:
        print(f"over the {args.budget:.0f} s budget: {', '.join(over)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
