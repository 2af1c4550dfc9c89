"""Train a small transformer to sort digits, then profile where FP8 MMAs lose accuracy.

The data is generated: sequences of 8 random digits (0-9), and the target is the same
digits sorted. Nothing is downloaded. A two-block transformer encoder (width 64, 4 heads,
pre-norm, learned positions) is trained from scratch in float32 with torch, then
evaluated natively and with every matrix multiply of the model (the q/k/v and output
projections, the two matmuls of each attention, the MLP, the head) computed bit for bit
by an MMA instruction under ``mmac.torch.emulate(ins, report=True)``:

- Hopper FP8 ``wgmma`` (e4m3 inputs, a 13-bit truncating aligner),
- Blackwell FP8 ``tcgen05.mma ... kind::f8f6f4`` (e4m3 inputs, 25-bit aligner),
- CDNA3 FP8 MFMA (e4m3 FNUZ inputs, two-level alignment),
- a hypothetical FP8 design from ``specs/examples/fp8_f20_rne.mma`` (F = 20, round to
  nearest even).

For each it prints the profiler's table (one row per call site: the module path, the
operator, its error against float64 of the same operands, the share of outputs that
differ from float32) and the end metric: the share of sequences sorted right, and of
tokens. The numbers are the same on any x86-64 machine (seeds fixed, and the float32
settings of ``examples/reproducible.py``).

Run from anywhere: ``python examples/transformer_numerics.py`` (needs mmac, torch;
about two minutes on two cores). ``--small`` trains and evaluates a reduced version in
about ten seconds (the tests run it); ``--plot errors.png`` also draws each design's
errors per call site (needs matplotlib).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import reproducible

torch = reproducible.pin_float32()

import mmac  # noqa: E402  (after the float32 settings)
import mmac.torch  # noqa: E402

SPECS = Path(__file__).resolve().parents[1] / "specs"
# (label, spec, instruction, scaling recipe): FP8 as it is deployed, operands scaled into
# the format's range per tensor (Transformer Engine's recipe), MXFP8 by its E8M0 block scales
DESIGNS = [
    ("Hopper FP8 (e4m3)", SPECS / "hopper.mma", "wgmma.m64n8k32.f32.e4m3.e4m3", "tensor"),
    (
        "Blackwell MXFP8 (e4m3)",
        SPECS / "blackwell.mma",
        "tcgen05.mma.block_scale.m64n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0",
        "block",
    ),
    ("CDNA3 FP8 (fnuz)", SPECS / "cdna3.mma", "v_mfma_f32_16x16x32_fp8_fp8", "tensor"),
    ("F=20 RNE FP8 (hypothetical)", SPECS / "examples" / "fp8_f20_rne.mma", "mma.m16n8k32.f32.e4m3.e4m3.f32", "tensor"),
]

DIGITS = 32
LENGTH = 12


class Attention(torch.nn.Module):
    """Multi-head self-attention written out: the two matmuls (scores, weighted sum) are
    ordinary matmuls, so they run through the instruction like the projections."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(width // self.heads)
        mixed = scores.softmax(dim=-1) @ v
        return self.out(mixed.transpose(1, 2).reshape(batch, length, width))


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention, then a two-layer MLP, each residual."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.norm2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Sorter(torch.nn.Module):
    """Token and position embeddings, transformer blocks, and a head that predicts the
    digit at each position of the sorted sequence."""

    def __init__(self, width: int = 64, heads: int = 4, depth: int = 2):
        super().__init__()
        self.embed = torch.nn.Embedding(DIGITS, width)
        self.position = torch.nn.Parameter(0.02 * torch.randn(LENGTH, width))
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, DIGITS)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def sequences(count: int, generator: torch.Generator) -> tuple:
    """``count`` random digit sequences and their sorted versions."""
    tokens = torch.randint(0, DIGITS, (count, LENGTH), generator=generator)
    return tokens, tokens.sort(dim=1).values


def train(steps: int, batch: int = 128) -> Sorter:
    torch.manual_seed(0)
    model = Sorter()
    data = torch.Generator().manual_seed(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps)
    for _ in range(steps):
        tokens, target = sequences(batch, data)
        loss = torch.nn.functional.cross_entropy(model(tokens).reshape(-1, DIGITS), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return model.eval()


def accuracy(logits, target) -> tuple[float, float]:
    """The share of sequences sorted right (every position), and of positions."""
    right = logits.argmax(-1) == target
    return right.all(dim=1).float().mean().item(), right.float().mean().item()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a reduced run (tests): fewer steps, fewer sequences")
    parser.add_argument(
        "--plot", metavar="PNG", help="also draw every design's errors per site into this file (matplotlib)"
    )
    args = parser.parse_args(argv)
    steps, count = (60, 32) if args.small else (600, 1000)
    model = train(steps)
    tokens, target = sequences(count, torch.Generator().manual_seed(2))
    with torch.no_grad():
        reference = model(tokens)
    print(f"sorting {LENGTH} digits: a transformer trained {steps} steps, evaluated on {count} new sequences")
    sequences_right, tokens_right = accuracy(reference, target)
    print(f"{'float32 (native)':30} sorted {sequences_right:.4f}   tokens {tokens_right:.4f}")
    profiles = []
    for label, path, name, scaling in DESIGNS:
        ins = mmac.load(path)[name]
        with torch.no_grad(), mmac.torch.emulate(ins, scaling=scaling, report=True) as profile:
            logits = model(tokens)
        sequences_right, tokens_right = accuracy(logits, target)
        print()
        print(f"{label:30} sorted {sequences_right:.4f}   tokens {tokens_right:.4f}")
        print(profile.table())
        profiles.append((label, profile))
    if args.plot:
        plot(profiles, args.plot)
    return 0


def plot(profiles, path: str) -> None:
    """One bar chart per design (normwise and mean relative error per site), into ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # a file, no window
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(profiles), 1, figsize=(10, 3.6 * len(profiles)))
    for ax, (label, profile) in zip(axes, profiles):
        profile.plot(ax=ax, metrics=("norm_rel", "mean_rel"))
        ax.set_title(f"{label}: {profile.ins.name}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path)
    print(f"\nplot written to {path}")


if __name__ == "__main__":
    sys.exit(main())
