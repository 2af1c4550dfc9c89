"""The examples run and print what their docs say: examples/digits_fp8.py and
examples/digits_sparse.py print exactly the numbers docs/python.md quotes (from their stored
weights; ``--train`` trains again), examples/transformer_numerics.py (its reduced run) a
profile table per design, and neither changes its numbers when the processor MKL sees or
the thread count around it changes (the settings of examples/reproducible.py)."""

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


def test_the_digits_examples_train_again_on_request_without_storing():
    """``--train`` runs the training the stored weights came from (its last bits may
    differ on another processor, so only the table's shape and accuracy are checked) and
    leaves the stored weights alone without ``--save``."""
    for script, weights in (("digits_fp8.py", "digits_mlp.npz"), ("digits_sparse.py", "digits_mlp_2of4.npz")):
        stored = (EXAMPLES / weights).read_bytes()
        out = _run(script, "--train")
        assert (EXAMPLES / weights).read_bytes() == stored
        quoted = _quoted_output(f"python examples/{script}")
        assert [line[:22] for line in out.splitlines()] == [line[:22] for line in quoted.splitlines()]
        for line in out.splitlines()[1:]:
            if "accuracy" in line:
                assert float(re.search(r"accuracy (\S+)", line).group(1)) > 0.85, line


def test_the_sparse_digits_example_prints_the_numbers_the_docs_quote():
    out = _run("digits_sparse.py")
    lines = out.splitlines()
    assert lines[0].startswith("540 test images; weights 2:4 pruned (2368 of 4736 zero)")
    for arch in ("Ampere", "Hopper"):
        differ = next(line for line in lines if line.startswith(arch + ":"))
        assert re.search(r" [1-9]\d* of 5400 logits differ between dense and sparse", differ), differ
        for kind in ("dense", "sparse"):
            line = next(line for line in lines if line.startswith(f"{arch} {kind} "))
            assert float(re.search(r"accuracy (\S+)", line).group(1)) > 0.9, line
    assert out == _quoted_output("python examples/digits_sparse.py")


SITES = [
    f"blocks.{i}.{site}"
    for i in (0, 1)
    for site in ("attn.qkv addmm", "attn bmm", "attn bmm#2", "attn.out addmm", "mlp.0 addmm", "mlp.2 addmm")
] + ["head addmm"]


def test_the_transformer_example_profiles_every_design(tmp_path):
    png = tmp_path / "errors.png"
    out = _run("transformer_numerics.py", "--small", "--plot", str(png))
    out, written = out.split("\n\nplot written to ")
    assert written == f"{png}\n" and png.read_bytes().startswith(b"\x89PNG")
    parts = out.split("\n\n")
    assert parts[0].startswith("sorting 12 digits: a transformer trained 60 steps, evaluated on 32 new sequences")
    assert re.search(r"float32 \(native\) +sorted \d\.\d{4}   tokens \d\.\d{4}$", parts[0])
    labels = []
    for part in parts[1:]:
        lines = part.splitlines()
        labels.append(re.match(r"(.+?)  +sorted (\d\.\d{4})   tokens (\d\.\d{4})$", lines[0]).group(1))
        assert lines[1].startswith("13 calls through `") and lines[1].endswith(
            "at 13 sites; error against float64 of the same operands"
        )
        assert lines[2].split()[:2] == ["module", "op"]
        rows = [line.split() for line in lines[3:]]
        assert [" ".join(row[:2]) for row in rows] == SITES
        for row in rows:
            max_rel, mean_rel, norm_rel = map(float, row[-4:-1])
            # FP8: every output pays for the rounding of its operands
            assert 0 < norm_rel < 1 and 0 < mean_rel < max_rel, row
    assert labels == [
        "Hopper FP8 (e4m3)",
        "Blackwell MXFP8 (e4m3)",
        "CDNA3 FP8 (fnuz)",
        "F=20 RNE FP8 (hypothetical)",
    ]
    assert _run("transformer_numerics.py", "--small", env=ANOTHER_MACHINE) == out + "\n"


def test_the_float32_settings_refuse_a_torch_already_loaded():
    code = "import sys, torch; sys.path.insert(0, sys.argv[1]); import reproducible; reproducible.pin_float32()"
    r = subprocess.run([sys.executable, "-c", code, str(EXAMPLES)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "must run before torch is imported" in r.stderr

