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

These settings were not enough for training: the examples, training on every run, printed
f16 results that differed in their fourth digit between two of the project's machines (an
AMD EPYC and an Intel Xeon, the same glibc, torch and MKL), while their FP8 results agreed:
the float32 weights' last bits differed. So the examples evaluate weights stored beside
them (``trained``): a forward pass is one short chain of GEMMs, far from the hundreds of
steps that carried the difference. ``--train`` trains again (``--train --save`` rewrites
the stored weights).

    import reproducible
    torch = reproducible.pin_float32()   # returns the torch module, imported pinned
    model = reproducible.trained(model, WEIGHTS, lambda m: fit(m, ...))
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


def trained(model, path, train):
    """``model`` with the weights stored at ``path`` (its state dict as a ``.npz``), in
    eval mode; with ``--train`` on the command line, trained again by ``train(model)``
    instead, and with ``--train --save`` also stored at ``path``."""
    import numpy as np
    import torch

    if "--train" in sys.argv[1:]:
        train(model)
        if "--save" in sys.argv[1:]:
            np.savez(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    else:
        with np.load(path) as stored:
            model.load_state_dict({k: torch.from_numpy(stored[k]) for k in stored.files})
    return model.eval()
