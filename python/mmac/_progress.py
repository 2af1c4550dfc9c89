"""Progress of long computations (``ins.gemm``, :func:`mmac.report`): the ``progress=``
argument resolved into the callable the native code calls, with the GIL held, with the
number of units (tiles of D, samples) finished since its last call.

``progress`` is ``True`` (a tqdm bar; an ``ImportError`` without tqdm), ``False`` (none),
``None`` (automatic: a tqdm bar when tqdm is installed and the work is large, else none)
or a callable, which receives the counts itself.
"""

from __future__ import annotations

import contextlib

AUTOMATIC_WORK = 1 << 31
"""Multiply-adds from which ``progress=None`` draws a bar (when tqdm is installed): a
GEMM of 2048 x 1024 x 1024, twice the 1024 x 1024 x 1024 GEMM that took 1.5 to 2 s on
the project's two (shared) cores."""


def _tqdm():
    """tqdm's bar class (``tqdm.auto``: a widget in Jupyter, text elsewhere), or None."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


@contextlib.contextmanager
def reporter(progress, *, total: int, work: int, desc: str, unit: str):
    """The callable for the native ``progress`` argument, or None, for the duration of the
    computation: ``total`` units of ``work`` multiply-adds in all. A bar is closed (and
    cleared) when the block ends, even by an exception."""
    if progress is False:
        yield None
        return
    if progress is None and work < AUTOMATIC_WORK:
        yield None
        return
    if progress is True or progress is None:
        bar_class = _tqdm()
        if bar_class is None:
            if progress is True:
                raise ImportError(
                    "progress=True draws a tqdm bar, and tqdm is not installed: "
                    "pip install tqdm, or pass a callable, which receives the number of "
                    f"{unit}s finished since its last call"
                )
            yield None
            return
        bar = bar_class(total=total, desc=desc, unit=unit, leave=False)
        try:
            yield bar.update
        finally:
            bar.close()
        return
    if not callable(progress):
        raise TypeError(f"progress must be True, False, None or a callable, not {progress!r}")
    yield progress
