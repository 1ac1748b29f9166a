"""One line that says where a run happened: the CPU (and a GPU, if any), threads and versions.

Every notebook prints it in its first cell, so a reader knows which machine its timings come
from; benchmark records keep the same facts as fields (`specnb.bench`).

    >>> specnb.machine_line()  # the CPU's model name and which of amx, avx512f, avx2 it has
    'CPU <model name> [avx512f avx2], 1 thread · torch 2.13.0+cpu · transformers 5.24.0 · Python 3.11.7'
"""

import platform

import torch

from .fast_path import cpu_identity


def machine_line() -> str:
    """The CPU model and vector extensions, torch's thread count, any CUDA GPU, and the torch,
    transformers and Python versions, on one line."""
    import transformers

    cpu = cpu_identity()
    threads = torch.get_num_threads()
    where = f"CPU {cpu['name']} [{cpu['isa']}], {threads} thread{'s' if threads != 1 else ''}"
    if torch.cuda.is_available():
        where += f"; GPU {torch.cuda.get_device_name()}"
    return (f"{where} · torch {torch.__version__} · transformers {transformers.__version__} · "
            f"Python {platform.python_version()}")
