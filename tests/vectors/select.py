#!/usr/bin/env python3
"""Copy a conformance subset of ../shared/vectors into tests/vectors.

For every vector file: its header, the first RANDOM random cases and every probe case
(the hand-built feature probes that follow the 256 random ones; the header's `# cases:`
line says how many random cases there are). Run from the repository root:

    python3 tests/vectors/select.py ../shared/vectors tests/vectors
"""
import os
import re
import sys

RANDOM = 24


def main(src: str, dst: str) -> None:
    total = 0
    for root, _dirs, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".mmv"):
                continue
            path = os.path.join(root, name)
            lines = open(path).read().splitlines()
            header = [l for l in lines if l.startswith("#")]
            cases = [l for l in lines if l and not l.startswith("#")]
            m = next((re.search(r"\((\d+) random", l) for l in header if l.startswith("# cases:")), None)
            n_random = int(m.group(1)) if m else 256
            keep = cases[:RANDOM] + cases[n_random:]
            out_dir = os.path.join(dst, os.path.relpath(root, src))
            os.makedirs(out_dir, exist_ok=True)
            with open(os.path.join(out_dir, name), "w") as f:
                f.write("\n".join(header + [f"# subset: first {RANDOM} random cases and all probes"] + keep) + "\n")
            total += len(keep)
    print(f"{total} cases")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
