"""examples/digits_fp8.py runs and prints what its doc says: an accuracy and a logits
error per design, every matmul of the model through the instruction."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def test_the_digits_example_runs():
    r = subprocess.run(
        [sys.executable, str(REPO / "examples" / "digits_fp8.py")],
        capture_output=True,
        text=True,
        cwd=REPO / "python",  # not the repository root: the example finds specs/ itself
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("540 test images")
    native = float(re.search(r"accuracy (\S+)", lines[1]).group(1))
    assert native > 0.9
    designs = lines[2:]
    assert [line.split("  ")[0] for line in designs] == [
        "Hopper FP8 (e4m3)",
        "CDNA3 FP8 (fnuz)",
        "F=20 RNE FP8 (hypothetical)",
        "Hopper f16 (reference)",
    ]
    for line in designs:
        accuracy = float(re.search(r"accuracy (\S+)", line).group(1))
        error = float(re.search(r"logits error max (\S+)", line).group(1))
        assert accuracy > 0.85 and 0 < error < 5, line
        assert "(2 matmuls through" in line
    # the FP8 designs differ from each other in their bits
    assert "   0 of 5400 logits differ" in designs[0]
    assert re.search(r" [1-9]\d* of 5400 logits differ", designs[1])
