"""Checks the commands (`bench`, `train_draft`, `train_head`, `assignments`) share: an output
path is refused before any work is done, with an argparse message (exit 2)."""

import os
from pathlib import Path


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
