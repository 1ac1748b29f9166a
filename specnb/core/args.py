"""Argument checks shared by every layer: integers, lists of token ids, and output paths.

Integers may be Python, NumPy or 0-d tensor integers; bools, floats, strings and None are
refused. Token ids come as a list of such integers, a `[L]` or a `[1, L]` integer tensor.
Every failure is a `ValueError` that names the argument and says what to pass instead.
The commands (`python -m specnb.bench`, `specnb.training.train_draft`, `.train_head`,
`specnb.course.assignments`) refuse an unwritable output path before doing any work, with an
argparse message (exit 2): `check_out_file`, `check_out_folder`.
It does not check prompts or batches (`specnb.methods.inputs` does).
"""

import numbers
import os
import shlex
import sys
from pathlib import Path

import torch


def check_int(name: str, value, minimum: int) -> int:
    """An integer >= minimum: 3, np.int64(3) and torch.tensor(3) pass; True, 3.0, None fail."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point() \
            and value.dtype != torch.bool:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r} "
                         f"({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def token_ids(name: str, tokens) -> list:
    """A list of int ids from a list/tuple of integers or a `[L]` / `[1, L]` integer tensor.

    Example: torch.tensor([[5, 6]]) -> [5, 6]; "56" and [5.0, 6.0] are refused.
    """
    if isinstance(tokens, torch.Tensor):
        if tokens.is_floating_point() or tokens.dtype == torch.bool or tokens.dim() not in (1, 2) \
                or (tokens.dim() == 2 and tokens.shape[0] != 1):
            raise ValueError(f"{name} must be a list of int ids or an integer tensor [L] or "
                             f"[1, L], got {tokens.dtype} {list(tokens.shape)}")
        return tokens.reshape(-1).tolist()
    if not isinstance(tokens, (list, tuple)) or not all(
            isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in tokens):
        raise ValueError(f"{name} must be a list of int ids (or a [1, L] LongTensor), got "
                         f"{type(tokens).__name__} {str(tokens)[:40]}")
    return [int(t) for t in tokens]


def check_in_vocab(name: str, ids: list, vocab: int) -> None:
    """Every id in [0, vocab): an id outside would index past the embedding table."""
    if ids and (min(ids) < 0 or max(ids) >= vocab):
        raise ValueError(f"{name} must hold ids in [0, {vocab}) (the model's vocabulary), got "
                         f"range [{min(ids)}, {max(ids)}]")


def _writable_ancestor(parser, flag: str, path: Path) -> None:
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        parser.error(f"{flag} {path}: cannot write there ({parent} is not a writable folder)")


def check_out_folder(parser, flag: str, path: Path) -> None:
    """An output folder must be a folder, or creatable inside a writable one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        parser.error(f"{flag} {path} exists and is not a folder")
    _writable_ancestor(parser, flag, path)


def check_out_file(parser, flag: str, path: Path) -> None:
    """An output file must not be a folder, and its folder must be (or become) writable."""
    path = Path(path)
    if path.is_dir():
        parser.error(f"{flag} {path} is a folder; give a file name such as {path / 'bench.json'}")
    _writable_ancestor(parser, flag, path.parent)


def command_line(prog: str, argv=None) -> str:
    """The command a record was made with, to store in it: `prog` and its arguments (sys.argv's
    when `argv` is None). Example: command_line("python -m specnb.bench", ["--prompts", "4"])
    -> "python -m specnb.bench --prompts 4"."""
    return shlex.join([*prog.split(), *(sys.argv[1:] if argv is None else argv)])
