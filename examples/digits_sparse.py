"""Prune a small classifier to 2:4 and evaluate it on sparse MMAs, dense vs sparse.

The digits classifier of ``examples/digits_fp8.py`` (scikit-learn's bundled 8x8 digits, a
two-layer perceptron trained in float32 with torch) is pruned to 2:4 structured sparsity:
in every group of 4 input features of each layer's weight, the 2 of smallest magnitude
are zeroed, and the model is fine-tuned with that mask. Then every matrix multiply of
the pruned model is computed, bit for bit, by MMA instructions (``mmac.torch.emulate``):
the dense ``mma.m16n8k16`` and the sparse ``mma.sp.m16n8k32`` of Ampere and of Hopper.
A sparse instruction takes the pruned weight as its A (the emulation transposes a linear
layer's product so that it does), stored as its nonzero elements and their columns.

The dense and the sparse instruction compute different bits from the same pruned weights:
the dense unit walks every column, the sparse one (under the hypothesis the specs state)
only the selected ones, so its chained steps close at other places. The script prints
the accuracy, the logits' error against float32, and how many logits differ between
the dense and the sparse instruction of each architecture.

It evaluates the pruned weights that ``train`` made once, stored in
``examples/digits_mlp_2of4.npz`` (float32 training can end a few ulps apart on another
processor: ``examples/reproducible.py``); ``--train`` trains again, ``--train --save``
stores the result.

Run from anywhere: ``python examples/digits_sparse.py`` (needs mmac, torch,
scikit-learn: ``pip install './python[examples]'``).
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
ARCHS = [("Ampere", SPECS / "ampere.mma"), ("Hopper", SPECS / "hopper.mma")]
DENSE, SPARSE = "mma.m16n8k16.f32.f16.f16.f32", "mma.sp.m16n8k32.f32.f16.f16.f32"


def mask_2_of_4(weight: torch.Tensor) -> torch.Tensor:
    """Keep the 2 largest-magnitude weights of every group of 4 input features."""
    out_features, in_features = weight.shape
    groups = weight.abs().reshape(out_features, in_features // 4, 4)
    keep = groups.argsort(dim=-1, descending=True)[..., :2]
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return mask.reshape(out_features, in_features)


WEIGHTS = Path(__file__).resolve().with_name("digits_mlp_2of4.npz")


def data() -> tuple:
    """The digits as float32 in [0, 1], split 70/30 (seeded): x_train, x_test, y_train, y_test."""
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    return train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)


def train(model, x_train, y_train, epochs: int = 300, tune: int = 100) -> None:
    """The float32 training and 2:4 fine-tuning the stored weights came from (``--train``
    runs it again)."""
    torch.manual_seed(0)
    for layer in (model[0], model[2]):
        layer.reset_parameters()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def fit(steps: int, masks=None) -> None:
        for _ in range(steps):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x_train), y_train).backward()
            optimizer.step()
            if masks is not None:
                with torch.no_grad():
                    for layer, mask in masks:
                        layer.weight.mul_(mask)

    fit(epochs)
    layers = [model[0], model[2]]
    masks = [(layer, mask_2_of_4(layer.weight.detach())) for layer in layers]
    with torch.no_grad():
        for layer, mask in masks:
            layer.weight.mul_(mask)
    fit(tune, masks)


def main() -> int:
    x_train, x_test, y_train, y_test = data()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    model = reproducible.trained(model, WEIGHTS, lambda m: train(m, x_train, y_train))
    with torch.no_grad():
        reference = model(x_test)
    zeros = sum((layer.weight == 0).sum().item() for layer in (model[0], model[2]))
    total = sum(layer.weight.numel() for layer in (model[0], model[2]))
    accuracy = (reference.argmax(1) == y_test).float().mean().item()
    print(f"{len(y_test)} test images; weights 2:4 pruned ({zeros} of {total} zero); logits compared with float32")
    print(f"{'float32 (native)':22} accuracy {accuracy:.4f}")
    for arch, path in ARCHS:
        spec = mmac.load(path)
        results = {}
        for kind, name in (("dense", DENSE), ("sparse", SPARSE)):
            with torch.no_grad(), mmac.torch.emulate(spec[name]):
                results[kind] = logits = model(x_test)
            error = (logits.double() - reference.double()).abs()
            accuracy = (logits.argmax(1) == y_test).float().mean().item()
            print(
                f"{arch + ' ' + kind:22} accuracy {accuracy:.4f}   logits error max "
                f"{error.max().item():.3e} mean {error.mean().item():.3e}   ({name})"
            )
        differ = (results["dense"] != results["sparse"]).sum().item()
        print(f"{arch + ':':22} {differ} of {results['dense'].numel()} logits differ between dense and sparse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
