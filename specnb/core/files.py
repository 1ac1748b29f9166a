"""Files written whole or not at all: a command stopped midway (Ctrl-C, a time budget's
SIGKILL) leaves the file as it was, or no file, never half of one that a reader then trips on.
"""

import signal
import threading
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path, data: bytes) -> None:
    """Write `path` whole or not at all (a .partial beside it, then renamed over it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


@contextmanager
def sigint_ignored():
    """Ctrl-C (SIGINT) is ignored inside: a command that keeps partial results writes them
    whole even when a second interrupt arrives. Only the main thread can swap handlers; in any
    other thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
