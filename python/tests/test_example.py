"""The examples run and print what their docs say: examples/digits_fp8.py prints exactly
the numbers docs/python.md quotes, and does not change them when the processor MKL sees
or the thread count around it changes (the settings of examples/reproducible.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO

EXAMPLES = REPO / "examples"

# what another machine looks like to MKL and OpenMP; ATEN_CPU_CAPABILITY names a vector
# width every x86-64 build of torch has (a processor without AVX2 falls back to default)
ANOTHER_MACHINE = {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "OMP_NUM_THREADS": "2", "ATEN_CPU_CAPABILITY": "avx2"}


def _run(script: str, *args, env=None) -> str:
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        cwd=REPO / "python",  # not the repository root: the examples find specs/ themselves
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def _quoted_output(command: str) -> str:
    """The ```text block that follows the ```sh block running ``command`` in
    docs/python.md."""
    text = (REPO / "docs" / "python.md").read_text()
    m = re.search(r"```sh\n" + re.escape(command) + r"\n```\n\n```text\n(.*?)```", text, flags=re.S)
    assert m, f"docs/python.md quotes no output of `{command}`"
    return m.group(1)


def test_the_digits_example_prints_the_numbers_the_docs_quote():
    out = _run("digits_fp8.py")
    lines = out.splitlines()
    assert lines[0].startswith("540 test images")
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
    assert "   0 of 5400 logits differ" in designs[0]
    assert re.search(r" [1-9]\d* of 5400 logits differ", designs[1])
    # the same numbers as the docs, and as on a machine MKL and OpenMP see differently
    assert out == _quoted_output("python examples/digits_fp8.py")
    assert _run("digits_fp8.py", env=ANOTHER_MACHINE) == out


def test_the_float32_settings_refuse_a_torch_already_loaded():
    code = "import sys, torch; sys.path.insert(0, sys.argv[1]); import reproducible; reproducible.pin_float32()"
    r = subprocess.run([sys.executable, "-c", code, str(EXAMPLES)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "must run before torch is imported" in r.stderr

