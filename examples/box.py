#!/usr/bin/env python3
"""A black box for `mmac infer`, in another language than mmac's own.

It implements one simple arithmetic, the integer MMA of s8 x s8 products with an s32
accumulator that wraps modulo 2^32 (`int_mma()` in the prelude), and speaks the protocol
of docs/infer.md: one request per line on stdin,

    c=HEX a=HEX,HEX,... b=HEX,HEX,...

answered by one line `d=HEX` on stdout, in order. It answers each line as it reads it and
flushes, so it never waits for more input than it has.

    mmac infer --exec "python3 examples/box.py" --types a=s8,b=s8,c=s32,d=s32 --k 16 -o box.mma
"""
import sys


def signed(value, bits):
    """The two's complement value of the low `bits` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def answer(line):
    fields = dict(field.split("=", 1) for field in line.split())
    c = signed(int(fields["c"], 16), 32)
    a = [signed(int(x, 16), 8) for x in fields["a"].split(",")]
    b = [signed(int(x, 16), 8) for x in fields["b"].split(",")]
    d = c + sum(x * y for x, y in zip(a, b))
    return "d=%08x" % (d & 0xFFFFFFFF)


def main():
    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            sys.stdout.write(answer(line) + "\n")
        except (KeyError, ValueError) as e:
            sys.stderr.write("box.py: line %d: cannot read %r: %s\n" % (number, line.strip(), e))
            return 2
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
