"""`python scripts/readme_figure.py`: the README's picture, book/_static/one-iteration.png.

One iteration of speculative decoding drawn by `specnb.viz.diagram` from hand-chosen tokens
(no model runs): four guesses, two kept, the target's own token at the first rejection.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from specnb.viz.diagram import draft_check_figure  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "book" / "_static" / "one-iteration.png"


def main(out: Path = OUT) -> Path:
    figure = draft_check_figure([" Sunlight", " is", " bent", " by"],
                                ["accepted", "accepted", "rejected", "unverified"],
                                " scattered", "resampled")
    figure.savefig(out, dpi=110, bbox_inches="tight")
    return out


if __name__ == "__main__":
    print(f"wrote {main()}")
