"""Compute releases the GIL and scales: two Python threads calling `gemm` with one
worker each compute at the same time.

The native module counts the computations running at once, inside their worker pools.
With the GIL held through a call, or with both calls queued on one shared pool of one
worker (as before issue 30: a data loader's threads gained nothing), two calls could
never overlap and the peak would stay 1. No timing is asserted."""

from __future__ import annotations

import threading

import numpy as np

from mmac import _native

HOPPER_F16 = "mma.m16n8k16.f32.f16.f16.f32"


def test_two_threads_compute_in_parallel(spec):
    ins = spec("hopper")[HOPPER_F16]
    rng = np.random.default_rng(2)
    A = rng.standard_normal((128, 256)).astype(np.float16)
    B = rng.standard_normal((256, 128)).astype(np.float16)
    want = ins.gemm(A, B).view(np.uint32)
    _native.reset_concurrency_peak()
    start = threading.Barrier(2)
    overlapped = threading.Event()
    results, errors = [], []

    def worker():
        try:
            start.wait()
            for _ in range(200):
                results.append(ins.gemm(A, B, threads=1).view(np.uint32))
                if _native.concurrency_peak() >= 2:
                    overlapped.set()
                if overlapped.is_set():
                    return
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert _native.concurrency_peak() == 2, "two gemm calls never ran at the same time"
    for r in results:
        np.testing.assert_array_equal(r, want)
