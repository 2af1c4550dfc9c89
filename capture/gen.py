#!/usr/bin/env python3
"""The capture kit's generator: everything instruction-specific in capture/, derived from the
spec library (never written by hand).

For every `mma.sync` instruction of the NVIDIA specs that `mmac layout` knows a fragment
layout for (dense, sparse `mma.sp`, `.kind::f8f6f4`, block-scaled), it reads `mmac list`
(the operand formats, the scale factors) and `mmac layout --json` (which lane, register
and bits hold which element, and the sparse metadata's encoding) and writes, into --out:

  capture_table.inc    the host's table: per instruction its PTX mnemonic, shape, formats,
                       the CUDA targets that have it, its fragment layouts (a, b, c, d,
                       and meta, sa, sb where it has them; deduplicated) and its metadata
                       encoding, as C++ data for capture/src/table.cpp
  capture_kernels.cuh  the device code: one kernel per instruction, its inline PTX
                       `mma` with the register counts of the layout, compiled only for
                       the targets that have the instruction, and the launch switch
  capture_manifest.tsv one line per (target, instruction, PTX mnemonic) the CUDA build
                       claims, for capture/check_cuda.sh

Usage: capture/gen.py --mmac target/debug/mmac --out DIR [--specs SPEC ...] [--only NAME ...]

--only keeps the named instructions (and fails if one is missing): a smaller table for
tests. --all-targets compiles every kernel for every target (no target guards), for
capture/check_cuda.py's check that ptxas refuses what the table does not claim. Exit 2 with a message for anything unexpected in mmac's output.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

# The CUDA targets of the kit and the spec of the architecture each one is.
TARGETS = [
    ("sm_80", 800, "ampere"),
    ("sm_89", 890, "ada"),
    ("sm_90a", 900, "hopper"),
    ("sm_100a", 1000, "blackwell"),
    ("sm_120a", 1200, "rtx_blackwell"),
]
DEFAULT_SPECS = [
    "specs/turing.mma",
    "specs/ampere.mma",
    "specs/ada.mma",
    "specs/hopper.mma",
    "specs/blackwell.mma",
    "specs/rtx_blackwell.mma",
]
SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
FP8 = {"e4m3", "e5m2"}


def fail(msg):
    print(f"gen.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def kit_form(name):
    """The parts of an `mma` name the kit runs: {"sparse", "scaled", "shape": index of the
    mMnNkK part}, or None for anything else (wgmma, tcgen05, AMD's). `mma.sp.` is sparse
    (metadata in registers), `mma.block_scale.` block-scaled (scale factors in registers),
    `mma.sp.block_scale.` both; `kind::f8f6f4` is a dense mma like any other."""
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != "mma":
        return None
    i = 1
    sparse = parts[i] == "sp"
    i += sparse
    scaled = parts[i] == "block_scale"
    i += scaled
    if i >= len(parts) or SHAPE.match(parts[i]) is None:
        return None
    return {"sparse": sparse, "scaled": scaled, "shape": i}


def ptx_mnemonic(name, scales):
    """The PTX of an mma name, with A row-major and B column-major as the layouts are:
    mma.m16n8k16.f32.f16.f16.f32 -> mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32;
    mma.sp.X -> mma.sp::ordered_metadata.sync.aligned.X (the metadata the kit packs is
    ascending, which is all ::ordered_metadata asks, and the .kind:: sparse forms exist only
    so); mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.TYPES ->
    mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.TYPES, the
    scale vector being the `scales` factors per row of A. The rest of the name (.satfinite,
    .kind::, the types, b1's .xor.popc/.and.popc) is PTX's own order."""
    form = kit_form(name)
    parts = name.split(".")
    rest = parts[form["shape"] + 1:]
    head = "mma.sp::ordered_metadata" if form["sparse"] else "mma"
    out = [head, "sync.aligned", parts[form["shape"]], "row.col"]
    if form["scaled"]:
        if len(rest) < 3 or not rest[0].startswith("kind::") or not re.match(r"^block\d+$", rest[1]):
            fail(f"{name}: a block-scaled name is `...mMnNkK.kind::K.blockB.TYPES`")
        out += [rest[0], "block_scale", f"scale_vec::{scales}X"] + rest[2:]
    else:
        out += rest
    return ".".join(out)


def min_sm(name, types):
    """The PTX ISA's target requirement (PTX ISA 9.7.14.5.14 and 9.7.14.6.3, Target ISA
    notes): .kind:: and block-scaled mma sm_120a; f64 m16n8k4/k8/k16 sm_90; .e4m3/.e5m2
    (without .kind::) sm_89; everything else the kit builds, sparse included, sm_80."""
    form = kit_form(name)
    shape = name.split(".")[form["shape"]]
    if form["scaled"] or "kind::" in name:
        return 1200
    if types["a"] == "f64" and shape != "m8n8k4":
        return 900
    if types["a"] in FP8 or types["b"] in FP8:
        return 890
    return 800


def targets_of(name, types):
    """The kit's targets that have the instruction: those at or above min_sm, and sm_100a
    for the `.kind::f8f6f4` forms whose A and B are both FP8 (but not a sparse one with an
    f16 accumulator), which CUDA 13.0's ptxas takes there although the PTX ISA names only
    sm_120a; capture/check_cuda.py checks both ways that ptxas agrees."""
    need = min_sm(name, types)
    targets = [t for t in TARGETS if t[1] >= need]
    form = kit_form(name)
    fp8 = types["a"] in FP8 and types["b"] in FP8
    if ("kind::f8f6f4" in name and fp8 and not form["scaled"]
            and not (form["sparse"] and types["d"] == "f16")):
        targets = [t for t in TARGETS if t[1] in (1000, 1200)]
    return need, targets


def parse_types(text, where):
    out = {}
    for part in text.split():
        if "=" not in part:
            continue
        k, v = part.split("=", 1)
        out[k] = v
    for op in "abcd":
        if op not in out:
            fail(f"{where}: `mmac list` gives no type for `{op}` (got `{text}`)")
    return out


def family_of(name, op, entries, lanes):
    """The layout of one operand as a table: rows, cols, sets, register bits, registers,
    words per lane, and per element (set, row, col) in that order the (lane, word, bit,
    width) of every copy."""
    if not isinstance(entries, list) or not entries:
        fail(f"{name}: operand `{op}` has no layout entries")
    rows = cols = sets = 0
    reg_bits = 32
    regs = 0
    places = {}
    widths = set()
    for e in entries:
        try:
            lane, reg, (lo, hi), row, col = (
                e["lane"], e["register"], e["bits"], e["row"], e["col"])
        except (KeyError, TypeError, ValueError):
            fail(f"{name}: operand `{op}`: unexpected layout entry {e}")
        s = e.get("set", 0)
        if not (0 <= lane < lanes) or lo < 0 or hi <= lo or hi > 64 or reg < 0:
            fail(f"{name}: operand `{op}`: entry out of range {e}")
        if hi > 32:
            reg_bits = 64
        rows, cols, sets = max(rows, row + 1), max(cols, col + 1), max(sets, s + 1)
        regs = max(regs, reg + 1)
        widths.add(hi - lo)
        places.setdefault((s, row, col), []).append((lane, reg, lo, hi))
    if len(widths) != 1:
        fail(f"{name}: operand `{op}` mixes element widths {sorted(widths)}")
    width = widths.pop()
    if len(places) != rows * cols * sets:
        fail(f"{name}: operand `{op}`: {len(places)} elements held, expected "
             f"{sets} x {rows} x {cols}")
    per_reg = reg_bits // 32
    slots = []
    firsts = [0]
    for s in range(sets):
        for r in range(rows):
            for c in range(cols):
                for lane, reg, lo, hi in sorted(places[(s, r, c)]):
                    if reg_bits == 64 and (lo, hi) != (0, 64) and hi > 32 and lo < 32:
                        fail(f"{name}: operand `{op}`: an element straddles two words {e}")
                    word = reg * per_reg + lo // 32
                    slots.append((lane << 16) | (word << 8) | (lo % 32))
                firsts.append(len(slots))
    return {
        "rows": rows,
        "cols": cols,
        "sets": sets,
        "width": width,
        "reg_bits": reg_bits,
        "regs": regs,
        "words": regs * per_reg,
        "slots": slots,
        "firsts": firsts,
    }


def layout_of(mmac, spec, name):
    rc, out, err = run([mmac, "layout", spec, "--instr", name, "--json"])
    if rc != 0:
        if "no fragment layout is known" in err:
            return None
        fail(f"`mmac layout {spec} --instr {name} --json` failed ({rc}): {err.strip()}")
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        fail(f"`mmac layout {spec} --instr {name} --json`: not JSON: {e}")


def collect(mmac, specs, only):
    """name -> {types, specs: [arch...], layout JSON} for every mma name of the kit."""
    found = {}
    for spec in specs:
        rc, out, err = run([mmac, "list", spec])
        if rc != 0:
            fail(f"`mmac list {spec}` failed ({rc}): {err.strip()}")
        arch = os.path.splitext(os.path.basename(spec))[0]
        for line in out.splitlines():
            cols = line.split("\t")
            if len(cols) < 3:
                fail(f"`mmac list {spec}`: unexpected line `{line}`")
            name = cols[0]
            if kit_form(name) is None or (only and name not in only):
                continue
            types = parse_types(cols[2], f"{spec}: {name}")
            entry = found.setdefault(name, {"types": types, "archs": [], "spec": spec})
            if entry["types"] != types:
                fail(f"{name}: {spec} gives types {types}, {entry['spec']} {entry['types']}")
            entry["archs"].append((arch, spec))
    if only:
        missing = sorted(set(only) - set(found))
        if missing:
            fail(f"not an mma instruction of the specs: {', '.join(missing)}")
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for name, entry in found.items():
            for _, spec in entry["archs"]:
                jobs[(name, spec)] = pool.submit(layout_of, mmac, spec, name)
    laid, skipped = {}, []
    for name, entry in sorted(found.items()):
        layouts = [jobs[(name, spec)].result() for _, spec in entry["archs"]]
        if any(lay is None for lay in layouts):
            if any(lay is not None for lay in layouts):
                fail(f"{name}: some specs have a layout for it, others not")
            skipped.append(name)
            continue
        if any(lay != layouts[0] for lay in layouts):
            fail(f"{name}: the specs give it different layouts")
        entry["layout"] = layouts[0]
        laid[name] = entry
    if only:
        missing = sorted(set(only) - set(laid))
        if missing:
            fail(f"no fragment layout is known for: {', '.join(missing)}")
    return laid, skipped


# Documented forms the kit's ptxas (CUDA 13.0, capture/requirements-cuda.txt) refuses for
# every target: the kit claims them for none, and capture/check_cuda.py checks that ptxas
# still refuses them (so a newer ptxas that takes them fails the check, and this goes).
PTXAS_REFUSES = [
    (".kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
     "CUDA 13.0's ptxas refuses .kind::mxf4nvf4 with .scale_vec::4X and .ue8m0 "
     "(`Illegal modifier`), a combination PTX ISA Table 36 lists"),
]

# The operands of the table, in its order (capture::Operand): the product's four, then a
# sparse instruction's metadata and a block-scaled one's scale factors.
OPERANDS = ["a", "b", "c", "d", "meta", "sa", "sb"]


def scale_of(name, types, k):
    """A block-scaled instruction's scale factors per row of A (k / block) and its
    `# scale:` header (`ue8m0 block=32`), from `mmac list`'s `scale=T/B`; (0, "none")."""
    text = types.get("scale")
    if text is None:
        return 0, "none"
    m = re.match(r"^(\w+)/(\d+)$", text)
    if not m or int(m.group(2)) == 0 or k % int(m.group(2)):
        fail(f"{name}: `mmac list` gives scale `{text}` (want TYPE/BLOCK dividing k = {k})")
    return k // int(m.group(2)), f"{m.group(1)} block={m.group(2)}"


def metadata_of(name, lay, stored):
    """A sparse instruction's metadata encoding from `mmac layout --json`."""
    md = lay.get("metadata")
    if not isinstance(md, dict):
        fail(f"{name}: `mmac layout --json` gives no \"metadata\" for a sparse instruction")
    try:
        unit, span, kept, codes = md["unit"], md["span"], md["kept"], md["codes"]
    except KeyError as e:
        fail(f"{name}: the layout's metadata lacks {e} (mmac older than the kit?)")
    if (unit < 1 or kept % unit or span % unit or len(codes) != span // unit or len(codes) > 8
            or stored % kept or kept >= span):
        fail(f"{name}: unexpected metadata encoding {md}")
    return {"unit": unit, "span": span, "kept": kept, "codes": codes}


def build(laid):
    """The instruction records and the deduplicated families."""
    families, family_index, instrs = [], {}, []
    for name, entry in sorted(laid.items()):
        lay = entry["layout"]
        ops = lay.get("operands", {})
        lanes = lay.get("lanes", 32)
        form = kit_form(name)
        want_ops = ["a", "b", "c", "d"] + ["meta"] * form["sparse"] + ["sa", "sb"] * form["scaled"]
        if lanes != 32 or sorted(ops) != sorted(want_ops) or lay.get("memory"):
            fail(f"{name}: operands {sorted(ops)} on {lanes} lanes; the kit runs mma "
                 f"with {', '.join(want_ops)} in the registers of 32 lanes")
        m, n, k = (int(x) for x in SHAPE.match(name.split(".")[form["shape"]]).groups())
        stored = k // 2 if form["sparse"] else k
        scales, scale_header = scale_of(name, entry["types"], k)
        meta = metadata_of(name, lay, stored) if form["sparse"] else None
        shapes = {"a": (m, stored), "b": (k, n), "c": (m, n), "d": (m, n),
                  "meta": (m, stored // meta["unit"]) if meta else None,
                  "sa": (m, scales), "sb": (scales, n)}
        fams = {}
        for op in want_ops:
            fam = family_of(name, op, ops[op], lanes)
            want = shapes[op]
            if (fam["rows"], fam["cols"]) != want:
                fail(f"{name}: operand `{op}` is {fam['rows']} x {fam['cols']}, the shape "
                     f"says {want[0]} x {want[1]}")
            key = json.dumps([fam[x] for x in sorted(fam)])
            if key not in family_index:
                family_index[key] = len(families)
                families.append(fam)
            fams[op] = family_index[key]
        sets = {families[fams[op]]["sets"] for op in want_ops}
        if len(sets) != 1:
            fail(f"{name}: operands hold different numbers of independent matrices {sets}")
        need, targets = targets_of(name, entry["types"])
        for arch, spec in entry["archs"]:
            for t in TARGETS:
                if t[2] == arch and t not in targets:
                    fail(f"{name}: {spec} lists it for {t[0]}, the PTX ISA needs sm_{need // 10}")
        ptx = ptx_mnemonic(name, scales)
        refused = next((why for form, why in PTXAS_REFUSES if form in ptx), None)
        if refused:
            targets = []
        instrs.append({
            "name": name,
            "ptx": ptx,
            "refused": refused,
            "m": m, "n": n, "k": k, "stored": stored,
            "types": entry["types"],
            "fams": fams,
            "meta": meta,
            "scales": scales, "scale_header": scale_header,
            "targets": targets,
            "archs": sorted(a for a, _ in entry["archs"]),
        })
    return families, instrs


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_table(path, families, instrs, skipped, origin):
    out = [
        "// capture_table.inc: GENERATED by capture/gen.py from `mmac list` and",
        f"// `mmac layout --json` ({origin}); do not edit. Included by capture/src/table.cpp.",
        "// Slot = lane << 16 | word << 8 | bit: where one copy of an element sits in a lane's",
        "// register image (word 2r and 2r+1 for a 64-bit register r).",
        f"// mma names without a layout, left out: {', '.join(skipped) or 'none'}",
        "",
    ]
    for i, f in enumerate(families):
        out.append(f"static const uint32_t kSlots{i}[] = {{")
        for j in range(0, len(f["slots"]), 12):
            out.append("    " + ", ".join(f"0x{s:06x}u" for s in f["slots"][j:j + 12]) + ",")
        out.append("};")
        out.append(f"static const uint32_t kFirsts{i}[] = {{")
        for j in range(0, len(f["firsts"]), 16):
            out.append("    " + ", ".join(str(x) for x in f["firsts"][j:j + 16]) + ",")
        out.append("};")
    out.append("static const capture::Family kFamilies[] = {")
    for i, f in enumerate(families):
        out.append(
            f"    {{{f['rows']}, {f['cols']}, {f['sets']}, {f['width']}, {f['reg_bits']}, "
            f"{f['regs']}, {f['words']}, kFirsts{i}, kSlots{i}}},")
    out.append("};")
    out.append("static const capture::Instr kInstrs[] = {")
    for i, ins in enumerate(instrs):
        t = ins["types"]
        targets = " ".join(x[0] for x in ins["targets"]) or f"no target: {ins['refused']}"
        mask = sum(1 << TARGETS.index(x) for x in ins["targets"])
        fams = ", ".join(str(ins["fams"].get(op, -1)) for op in OPERANDS)
        md = ins["meta"] or {"unit": 0, "span": 0, "kept": 0, "codes": []}
        codes = ", ".join(f"{c}u" for c in md["codes"]) or "0u"
        out.append(
            f"    {{{c_str(ins['name'])}, {c_str(ins['ptx'])}, {ins['m']}, {ins['n']}, "
            f"{ins['k']}, {ins['stored']}, {{{c_str(t['a'])}, {c_str(t['b'])}, {c_str(t['c'])}, "
            f"{c_str(t['d'])}}}, {{{fams}}}, {{{md['unit']}, {md['span']}, {md['kept']}, "
            f"{len(md['codes'])}, {{{codes}}}}}, {ins['scales']}, {c_str(ins['scale_header'])}, "
            f"{mask}u, {c_str(targets)}, {i}}},")
    out.append("};")
    out.append("static const capture::Target kTargets[] = {")
    for name, cc, arch in TARGETS:
        out.append(f"    {{{c_str(name)}, {cc}, {c_str(arch)}}},")
    out.append("};")
    write(path, "\n".join(out) + "\n")


def reg_kind(fmt, reg_bits):
    """The inline-asm constraint of one register of this format: f64 -> "d", f32 -> "f"
    (PTX's .f32/.f64 operands), every packed or integer format a .b32 register -> "r"."""
    if reg_bits == 64:
        if fmt != "f64":
            fail(f"a 64-bit register of `{fmt}`: only f64 is known")
        return "d"
    return "f" if fmt == "f32" else "r"


def kernel(i, ins, families, all_targets=False):
    """One kernel: each warp loads its lanes' words of A, B and C (and the metadata, the
    scale factors), runs the instruction and stores D; on a target without the instruction
    it reports that through *status. The sparsity selector and the scale factors' byte and
    thread ids are 0, as the layouts the table holds are for those values."""
    t = ins["types"]
    ops = {op: families[f] for op, f in ins["fams"].items()}
    lines = [f"// {ins['name']}: {ins['ptx']} "
             f"({', '.join(x[0] for x in ins['targets']) or 'no target: ' + ins['refused']})"]
    lines.append(
        f"__global__ void __launch_bounds__(CAPTURE_BLOCK) capture_k{i}_(const CaptureImages in, "
        "uint32_t *__restrict__ D, unsigned warps, int *status) {")
    lines.append("    const unsigned lane = threadIdx.x % 32u;")
    lines.append("    const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32u;")
    lines.append("    if (warp >= warps) return;")
    ccs = " || ".join(f"__CUDA_ARCH__ == {x[1]}" for x in ins["targets"]) or "0"
    if all_targets:
        # for capture/check_cuda.py: every target gets every instruction, and ptxas must
        # refuse exactly the ones the table does not claim for it
        ccs = "1"
    lines.append(f"#if defined(__CUDA_ARCH__) && ({ccs})")
    order = [op for op in ["d", "a", "b", "c", "meta", "sa", "sb"] if op in ops]
    groups = {}
    for op in order:
        f = ops[op]
        kind = reg_kind(t[op], f["reg_bits"]) if op in t else "r"
        if op in ("meta", "sa", "sb") and f["regs"] != 1:
            fail(f"{ins['name']}: `{op}` takes {f['regs']} registers; PTX's operand is one")
        if op != "d":
            lines.append(f"    const uint32_t *{op} = in.{op} + (size_t)(warp * 32u + lane) * {f['words']}u;")
        names = []
        for r in range(f["regs"]):
            v = f"{op}{r}"
            names.append(v)
            if op == "d":
                ctype = {"d": "double", "f": "float", "r": "uint32_t"}[kind]
                lines.append(f"    {ctype} {v};")
            elif kind == "d":
                lines.append(
                    f"    const double {v} = __hiloint2double((int){op}[{2 * r + 1}], (int){op}[{2 * r}]);")
            elif kind == "f":
                lines.append(f"    const float {v} = __uint_as_float({op}[{r}]);")
            else:
                lines.append(f"    const uint32_t {v} = {op}[{r}];")
        groups[op] = (names, kind)
    idx = 0
    fields = {}
    for op in order:
        names, _ = groups[op]
        one = ", ".join(f"%{idx + j}" for j in range(len(names)))
        fields[op] = one if op in ("meta", "sa", "sb") else "{" + one + "}"
        idx += len(names)
    text = ", ".join(fields[op] for op in "dabc")
    if "meta" in fields:
        text += f", {fields['meta']}, 0x0"
    if "sa" in fields:
        text += f", {fields['sa']}, {{0, 0}}, {fields['sb']}, {{0, 0}}"
    outs = ", ".join(f'"={groups["d"][1]}"({v})' for v in groups["d"][0])
    ins_ = ", ".join(f'"{groups[op][1]}"({v})' for op in order[1:] for v in groups[op][0])
    lines.append(f'    asm volatile("{ins["ptx"]} {text};\\n"')
    lines.append(f"                 : {outs}")
    lines.append(f"                 : {ins_});")
    fd = ops["d"]
    lines.append(f"    uint32_t *d = D + (size_t)(warp * 32u + lane) * {fd['words']}u;")
    kind = groups["d"][1]
    for r, v in enumerate(groups["d"][0]):
        if kind == "d":
            lines.append(f"    d[{2 * r}] = (uint32_t)__double2loint({v});")
            lines.append(f"    d[{2 * r + 1}] = (uint32_t)__double2hiint({v});")
        elif kind == "f":
            lines.append(f"    d[{r}] = __float_as_uint({v});")
        else:
            lines.append(f"    d[{r}] = {v};")
    lines.append("#else")
    lines.append("    (void)in; (void)D;")
    lines.append("    if (lane == 0) atomicExch(status, 1);  // not built for this target")
    lines.append("#endif")
    lines.append("}")
    return "\n".join(lines)


def write_kernels(path, families, instrs, origin, all_targets=False):
    out = [
        "// capture_kernels.cuh: GENERATED by capture/gen.py from `mmac layout --json`",
        f"// ({origin}); do not edit. Included by capture/src/device_cuda.cu, which defines",
        "// CAPTURE_BLOCK (threads per block) and CaptureImages (the device pointers of the",
        "// operand images). One kernel per instruction: warp w runs one mma on lane l's words",
        "// at (w * 32 + l) * words of each operand image.",
        "",
    ]
    for i, ins in enumerate(instrs):
        out.append(kernel(i, ins, families, all_targets))
        out.append("")
    out.append("// Launch instruction `index`'s kernel; false for an index out of range.")
    out.append("static bool capture_launch(int index, unsigned blocks, const CaptureImages &in, "
               "uint32_t *D, unsigned warps, int *status) {")
    out.append("    switch (index) {")
    for i, _ in enumerate(instrs):
        out.append(f"    case {i}: capture_k{i}_<<<blocks, CAPTURE_BLOCK>>>(in, D, warps, status); return true;")
    out.append("    default: return false;")
    out.append("    }")
    out.append("}")
    write(path, "\n".join(out) + "\n")


GROUPS = {"f16": "f16/bf16", "bf16": "f16/bf16", "tf32": "tf32", "s8": "s8/u8", "u8": "s8/u8",
          "s4": "s4/u4", "u4": "s4/u4", "b1": "b1", "f64": "f64", "e4m3": "fp8", "e5m2": "fp8",
          "e3m2": "fp6", "e2m3": "fp6", "e2m1": "fp4"}


def family_label(ins):
    """The instruction family a claim belongs to, e.g. `m16n8k16 f16/bf16 -> f32`,
    `sparse m16n8k64 kind::f8f6f4 -> f32`, `block-scaled m16n8k64 kind::mxf4nvf4 -> f32`."""
    form = kit_form(ins["name"])
    parts = ins["name"].split(".")
    kind = next((p for p in parts if p.startswith("kind::")), None)
    a = kind or GROUPS.get(ins["types"]["a"], ins["types"]["a"])
    prefix = ("sparse " if form["sparse"] else "") + ("block-scaled " if form["scaled"] else "")
    return f"{prefix}{parts[form['shape']]} {a} -> {ins['types']['d']}"


def write_manifest(path, instrs):
    out = ["# target\tinstruction\tptx\tfamily (GENERATED by capture/gen.py)"]
    for ins in instrs:
        for t in ins["targets"]:
            out.append(f"{t[0]}\t{ins['name']}\t{ins['ptx']}\t{family_label(ins)}")
    write(path, "\n".join(out) + "\n")


def write(path, text):
    """Write only when the text changed, so that make-style rebuilds stay quiet."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mmac", required=True, help="the mmac executable")
    ap.add_argument("--out", required=True, help="the folder to write into")
    ap.add_argument("--specs", nargs="+", default=DEFAULT_SPECS)
    ap.add_argument("--only", nargs="+", default=[], help="keep only these instructions")
    ap.add_argument("--all-targets", action="store_true",
                    help="kernels for every target, claimed or not (capture/check_cuda.py)")
    a = ap.parse_args()
    if not os.access(a.mmac, os.X_OK):
        fail(f"{a.mmac} is not an executable (build it with `cargo build`)")
    for s in a.specs:
        if not os.path.isfile(s):
            fail(f"{s}: no such spec file")
    laid, skipped = collect(a.mmac, a.specs, set(a.only))
    if not laid:
        fail("no dense mma.sync instruction with a layout in " + ", ".join(a.specs))
    families, instrs = build(laid)
    os.makedirs(a.out, exist_ok=True)
    origin = "specs " + " ".join(os.path.basename(s) for s in a.specs)
    write_table(os.path.join(a.out, "capture_table.inc"), families, instrs, skipped, origin)
    write_kernels(os.path.join(a.out, "capture_kernels.cuh"), families, instrs, origin,
                  a.all_targets)
    write_manifest(os.path.join(a.out, "capture_manifest.tsv"), instrs)
    print(f"gen.py: {len(instrs)} instructions, {len(families)} fragment families "
          f"({len(skipped)} mma names without a layout) -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
