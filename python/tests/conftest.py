"""Shared fixtures: the repository's specs, the `mmac` command the Python results are
compared with (``$MMAC_CLI``, which scripts/test sets, else target/debug/mmac), and
random operands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mmac

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "specs"


@pytest.fixture(scope="session")
def cli() -> Path:
    path = Path(os.environ.get("MMAC_CLI", REPO / "target" / "debug" / "mmac"))
    if not path.is_file():
        pytest.fail(f"the mmac command is not at {path}: build it (cargo build) or set MMAC_CLI")
    return path


def run_cli(cli: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, cwd=REPO)


@pytest.fixture(scope="session")
def spec():
    """Specs by file stem, loaded once: ``spec("hopper")``, ``spec("examples/kulisch")``."""
    cache = {}

    def get(stem: str) -> mmac.Spec:
        if stem not in cache:
            cache[stem] = mmac.load(SPECS / f"{stem}.mma")
        return cache[stem]

    return get


def random_codes(ins: mmac.Instruction, operand: str, shape, rng, finite=True) -> np.ndarray:
    """Random raw encodings (uint64) of an operand's format; with ``finite``, NaN and
    infinite codes are replaced by +0."""
    fmt = ins.format(operand)
    bits = fmt["bits"]
    codes = rng.integers(0, 1 << bits, size=shape, dtype=np.uint64, endpoint=False)
    if finite and fmt["kind"] == "float":
        values = ins.decode(codes, operand)
        codes[~np.isfinite(values)] = 0
    return codes
