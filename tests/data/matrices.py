#!/usr/bin/env python3
"""Write the example matrices of the README's `mmac gemm` example: tests/data/A.npy and
tests/data/B.npy, 64 x 64 float16 (.npy version 1.0), each element uniform in [-1, 1)
rounded to the nearest f16, from a fixed seed. Standard library only (no NumPy). Run from
the repository root:

    python3 tests/data/matrices.py
"""
import random
import struct

ROWS = COLS = 64


def write_f16(path: str, rows: int, cols: int, rng: random.Random) -> None:
    header = "{'descr': '<f2', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    # magic, version 1.0, header length; the header is padded with spaces to a multiple
    # of 64 bytes and ends in a newline
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    data = b"".join(struct.pack("<e", rng.uniform(-1.0, 1.0)) for _ in range(rows * cols))
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(data)


def main() -> None:
    rng = random.Random(2025)
    write_f16("tests/data/A.npy", ROWS, COLS, rng)
    write_f16("tests/data/B.npy", ROWS, COLS, rng)


if __name__ == "__main__":
    main()
