"""The settings that make the examples' float32 numbers the same on any x86-64 machine.

mmac's own results never depend on the machine or its thread count (every GEMM runs in
the order of its spec). What does is the float32 baseline the examples train and compare
with: torch's CPU kernels pick their code by the processor (SSE, AVX2 or AVX-512 vectors
sum in different orders), MKL's GEMMs pick theirs by the processor and split their sums
across threads, and the random streams need fixed seeds. ``pin_float32()`` fixes each:

- ``ATEN_CPU_CAPABILITY=default``: torch's vectorised kernels (reductions, softmax, layer
  norm, the optimizer's element-wise updates) run their baseline x86-64 build on every
  processor;
- ``MKL_CBWR=COMPATIBLE``: MKL's conditional numerical reproducibility, the same code
  path (and so the same sums) on every Intel or compatible processor;
- one thread (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``torch.set_num_threads(1)``):
  no sum split by the number of cores;
- ``torch.use_deterministic_algorithms(True)``: an operator without a deterministic
  implementation is an error, not a varying result.

The environment variables are read when torch loads, so ``pin_float32`` must run before
the first ``import torch`` (it raises otherwise). Seeds are the examples' own business.
What remains machine-dependent is the C library's ``exp`` and ``log`` (torch's scalar
kernels call them): the same glibc gives the same numbers.

    import reproducible
    torch = reproducible.pin_float32()   # returns the torch module, imported pinned
"""

from __future__ import annotations

import os
import sys

PINNED_ENVIRONMENT = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def pin_float32():
    """Set the environment above, import torch with it, fix its threads to one and its
    algorithms to deterministic ones, and return the torch module."""
    if "torch" in sys.modules:
        raise RuntimeError(
            "reproducible.pin_float32() must run before torch is imported: its settings are "
            "read when torch loads"
        )
    os.environ.update(PINNED_ENVIRONMENT)
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    return torch
