"""Train a small classifier, then evaluate it with every matmul emulated on FP8 MMAs.

The data is scikit-learn's bundled digits set (1,797 8x8 images, shipped inside the
package: nothing is downloaded). A two-layer perceptron is trained in float32 with torch,
then evaluated natively and with every matrix multiply of the model computed, bit for
bit, by an MMA instruction (`mmac.torch.emulate`): Hopper's FP8 `wgmma` (E4M3 inputs,
truncating 13-bit alignment), CDNA3's FP8 MFMA (E4M3FNUZ inputs, two-level alignment)
and a hypothetical FP8 design from `specs/examples/` (F = 20, round to nearest even).
It prints the test accuracy, the error of the logits against float32, and how many
logits differ in their bits from the Hopper FP8 results.

The numbers it prints are the same on any x86-64 machine: it evaluates the weights that
``train`` made once, stored in ``examples/digits_mlp.npz``, with the float32 settings of
``examples/reproducible.py`` (one thread, torch's and MKL's processor-independent code).
``--train`` trains again (seeded; the weights can end a few ulps apart on another
processor), ``--train --save`` stores the result.

Run from anywhere: ``python examples/digits_fp8.py`` (needs mmac, torch, scikit-learn:
``pip install './python[examples]'``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import reproducible

torch = reproducible.pin_float32()

from sklearn.datasets import load_digits  # noqa: E402  (after the float32 settings)
from sklearn.model_selection import train_test_split  # noqa: E402

import mmac  # noqa: E402
import mmac.torch  # noqa: E402

SPECS = Path(__file__).resolve().parents[1] / "specs"
DESIGNS = [
    ("Hopper FP8 (e4m3)", SPECS / "hopper.mma", "wgmma.m64n8k32.f32.e4m3.e4m3"),
    ("CDNA3 FP8 (fnuz)", SPECS / "cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8"),
    ("F=20 RNE FP8 (hypothetical)", SPECS / "examples" / "fp8_f20_rne.mma", "mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ("Hopper f16 (reference)", SPECS / "hopper.mma", "mma.m16n8k16.f32.f16.f16.f32"),
]


WEIGHTS = Path(__file__).resolve().with_name("digits_mlp.npz")


def data() -> tuple:
    """The digits as float32 in [0, 1], split 70/30 (seeded): x_train, x_test, y_train, y_test."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    return train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)


def train(model, x_train, y_train, epochs: int = 300) -> None:
    """The float32 training the stored weights came from (``--train`` runs it again)."""
    torch.manual_seed(0)
    for layer in (model[0], model[2]):
        layer.reset_parameters()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x_train), y_train)
        loss.backward()
        optimizer.step()


def main() -> int:
    x_train, x_test, y_train, y_test = data()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    model = reproducible.trained(model, WEIGHTS, lambda m: train(m, x_train, y_train))
    with torch.no_grad():
        reference = model(x_test)
    accuracy = (reference.argmax(1) == y_test).float().mean().item()
    print(f"{len(y_test)} test images; logits compared with float32 (max and mean |error|)")
    print(f"{'float32 (native)':30} accuracy {accuracy:.4f}")
    first = None
    for label, path, name in DESIGNS:
        ins = mmac.load(path)[name]
        with torch.no_grad(), mmac.torch.emulate(ins) as mode:
            logits = model(x_test)
        error = (logits.double() - reference.double()).abs()
        accuracy = (logits.argmax(1) == y_test).float().mean().item()
        # how many logits differ, bit for bit, from the first design's
        first = logits if first is None else first
        differ = (logits != first).sum().item()
        print(
            f"{label:30} accuracy {accuracy:.4f}   logits error max {error.max().item():.3e} "
            f"mean {error.mean().item():.3e}   {differ:4} of {logits.numel()} logits differ "
            f"from {DESIGNS[0][0]}   ({mode.calls} matmuls through {name})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
