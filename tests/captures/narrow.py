#!/usr/bin/env python3
"""tests/captures/narrow.py: cases of narrow exponent range for a float instruction,
beside `mmac gen`'s: products and c of similar size, so that alignment, truncation and
chaining show in d (gen's random cases span every exponent and mostly give d = c). Reads
the header (arch, instruction, k, types, sparsity) of a `mmac gen` file; d= is a
placeholder that the capture kit replaces with the device's.

    python3 tests/captures/narrow.py GEN.mmv OUT.mmv N SEED   (exit 3: not a float instruction)
"""
import random
import sys
from pathlib import Path

BITS = {"f16": (5, 10), "bf16": (8, 7), "tf32": (8, 10), "e4m3": (4, 3), "e5m2": (5, 2),
        "f32": (8, 23)}
WIDTH = {"f16": 4, "bf16": 4, "tf32": 8, "e4m3": 2, "e5m2": 2, "f32": 8}


def encode(fmt, lo, hi, rng):
    e, m = BITS[fmt]
    bias = (1 << (e - 1)) - 1
    exp = rng.randint(lo, hi) + bias
    man = rng.getrandbits(m)
    bits = (rng.getrandbits(1) << (e + m)) | (exp << m) | man
    if fmt == "tf32":
        bits <<= 13
    return f"{bits:0{WIDTH[fmt]}x}"


def main(src, dst, n, seed):
    rng = random.Random(seed)
    head, k, types, sparse = [], None, {}, None
    for line in Path(src).read_text().splitlines():
        if not line.startswith("#") or line.startswith("# random "):
            break
        if line.startswith("# k:"):
            k = int(line.split()[2])
        if line.startswith("# types:"):
            types = dict(t.split("=") for t in line.split()[2:])
        if line.startswith("# sparse:"):
            sparse = (int(line.split()[3]), int(line.split()[5]))
        if line.startswith(("# source:", "# neighbours", "# cases:")) or "random cases" in line:
            continue
        head.append(line)
    if types.get("a") not in BITS or types.get("c") not in BITS:
        return False
    head.append(f"# source: narrow.py (exponents of a, b in [-4, 4], c in [-2, 6]), seed {seed}")
    head.append(f"# cases: {n}")
    out = head[:]
    for i in range(n):
        stored = k if sparse is None else k * sparse[0] // sparse[1]
        a = [encode(types["a"], -4, 4, rng) for _ in range(stored)]
        b = [encode(types["b"], -4, 4, rng) for _ in range(k)]
        c = encode(types["c"], -2, 6, rng) if rng.random() > 0.1 else "0" * WIDTH[types["c"]]
        case = f"c={c} a={','.join(a)} b={','.join(b)}"
        if sparse:
            keep, group = sparse
            pos = []
            for g in range(0, k, group):
                pos += sorted(rng.sample(range(g, g + group), keep))
            case += " pos=" + ",".join(f"{p:x}" for p in pos)
        case += " d=" + "0" * WIDTH[types["d"]]
        out += [f"# narrow {i}", case]
    Path(dst).write_text("\n".join(out) + "\n")
    return True


if __name__ == "__main__":
    ok = main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    sys.exit(0 if ok else 3)
