# mmac prove's Bitwuzla driver (runtime/src/prove/solvers.rs runs it with `python -c`).
#
#   python -c DRIVER QUERY.smt2 PORT...
#
# QUERY is the miter as Yosys writes it (`write_smt2 -stbv`) with one state `s` asserted to
# make it fire. Prints `unsat` (it never fires), or `sat` and a line `PORT BITS` for each
# named input port (its value on `s`, most significant bit first), or `unknown`. Exits 4
# when this Python has no `bitwuzla` module (PyPI: pip install bitwuzla).
import sys

try:
    import bitwuzla
except ImportError as e:
    print(f"no bitwuzla module: {e}")
    sys.exit(4)

query, ports = sys.argv[1], sys.argv[2:]
options = bitwuzla.Options()
options.set(bitwuzla.Option.PRODUCE_MODELS, True)
parser = bitwuzla.Parser(bitwuzla.TermManager(), options)
parser.parse(query, True, True)
solver = parser.bitwuzla()
result = solver.check_sat()
if result == bitwuzla.Result.UNSAT:
    print("unsat")
elif result == bitwuzla.Result.SAT:
    print("sat")
    for port in ports:
        value = solver.get_value(parser.parse_term(f"(|mmac_miter_n {port}| s)"))
        print(port, value.value(2))
else:
    print("unknown")
sys.stdout.flush()
