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
  capture_wgmma.cuh    the same for wgmma (its own translation unit, built for sm_90a)
  capture_table.bin    the families' slots, which capture_table.inc points into
  capture_manifest.tsv one line per (target, instruction, PTX mnemonic) the CUDA build
                       claims, for capture/check_cuda.sh

Usage: capture/gen.py --mmac target/debug/mmac --out DIR [--specs SPEC ...] [--only NAME ...]

--only keeps the named instructions (and fails if one is missing): a smaller table for
tests. --all-targets compiles every kernel for every target (no target guards; of wgmma
only N = 8, listed in capture_sample.txt), for capture/check_cuda.py's check that ptxas
refuses what the table does not claim. Exit 2 with a message for anything unexpected in mmac's output.
"""

import argparse
import concurrent.futures
import json
import os
import re
import struct
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
    """The parts of an `mma` or `wgmma` name the kit runs: {"sparse", "scaled", "shape":
    index of the mMnNkK part, "warpgroup"}, or None for anything else (tcgen05, AMD's).
    `mma.sp.` is sparse (metadata in registers), `mma.block_scale.` block-scaled (scale
    factors in registers), `mma.sp.block_scale.` both; `kind::f8f6f4` is a dense mma like
    any other; `wgmma.` and `wgmma.sp.` run on a warpgroup, B in shared memory."""
    parts = name.split(".")
    if len(parts) < 3 or parts[0] not in ("mma", "wgmma"):
        return None
    i = 1
    sparse = parts[i] == "sp"
    i += sparse
    scaled = parts[0] == "mma" and parts[i] == "block_scale"
    i += scaled
    if i >= len(parts) or SHAPE.match(parts[i]) is None:
        return None
    return {"sparse": sparse, "scaled": scaled, "shape": i, "warpgroup": parts[0] == "wgmma"}


def ptx_mnemonic(name, scales):
    """The PTX of an mma name, with A row-major and B column-major as the layouts are:
    mma.m16n8k16.f32.f16.f16.f32 -> mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32;
    mma.sp.X -> mma.sp::ordered_metadata.sync.aligned.X (the metadata the kit packs is
    ascending, which is all ::ordered_metadata asks, and the .kind:: sparse forms exist only
    so); mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.TYPES ->
    mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.TYPES, the
    scale vector being the `scales` factors per row of A. The rest of the name (.satfinite,
    .kind::, the types, b1's .xor.popc/.and.popc) is PTX's own order. wgmma.m64nNkK.TYPES
    -> wgmma.mma_async.sync.aligned.m64nNkK.TYPES (wgmma.mma_async.sp... for wgmma.sp)."""
    form = kit_form(name)
    parts = name.split(".")
    rest = parts[form["shape"] + 1:]
    if form["warpgroup"]:
        head = "wgmma.mma_async.sp" if form["sparse"] else "wgmma.mma_async"
        return ".".join([head, "sync.aligned", parts[form["shape"]]] + rest)
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
    """The kit's targets that have the instruction: sm_90a for wgmma; else those at or
    above min_sm, and sm_100a for the `.kind::f8f6f4` forms whose A and B are both FP8 (but not a sparse one with an
    f16 accumulator), which CUDA 13.0's ptxas takes there although the PTX ISA names only
    sm_120a; capture/check_cuda.py checks both ways that ptxas agrees."""
    form = kit_form(name)
    if form["warpgroup"]:
        return 900, [t for t in TARGETS if t[1] == 900]  # wgmma is sm_90a's alone
    need = min_sm(name, types)
    targets = [t for t in TARGETS if t[1] >= need]
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
                    slots.append((lane << 21) | (word << 5) | (lo % 32))
                firsts.append(len(slots))
    return {
        "lanes": lanes,
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


def layouts_of(mmac, spec, names):
    """name -> `mmac layout --json` of every name (one call, JSON Lines), None for a name
    without a known layout."""
    if not names:
        return {}
    cmd = [mmac, "layout", spec, "--json"] + [x for n in names for x in ("--instr", n)]
    rc, out, err = run(cmd)
    if rc not in (0, 1) or (rc == 1 and not out):
        fail(f"`mmac layout {spec} --json --instr ...` failed ({rc}): {err.strip()}")
    found = {}
    entries = {}  # a family's entries, by its name (printed on its first line only)
    for line in out.splitlines():
        try:
            doc = json.loads(line)
            name = doc.pop("instruction")
        except (json.JSONDecodeError, KeyError, AttributeError) as e:
            fail(f"`mmac layout {spec} --json`: not a layout line ({e}): {line[:200]}")
        if "error" in doc:
            if "no fragment layout is known" not in doc["error"]:
                fail(f"`mmac layout {spec} --instr {name}`: {doc['error']}")
            doc = None
        else:
            if not isinstance(doc.get("operands"), dict):
                fail(f"`mmac layout {spec} --instr {name}`: a layout line without operands: {line[:200]}")
            fragments = doc.get("fragments", {})
            for op, family in fragments.items():
                if op in doc["operands"]:
                    entries[family] = doc["operands"][op]
            for op, family in fragments.items():
                if op not in doc["operands"]:
                    if family not in entries:
                        fail(f"{name}: `{op}`'s family {family} was never printed")
                    doc["operands"][op] = entries[family]
        found[name] = doc
    missing = sorted(set(names) - set(found))
    if missing:
        fail(f"`mmac layout {spec} --json` gave nothing for {', '.join(missing)}")
    return found


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
    per_spec = {}
    for name, entry in found.items():
        for _, spec in entry["archs"]:
            per_spec.setdefault(spec, []).append(name)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        jobs = {spec: pool.submit(layouts_of, mmac, spec, names) for spec, names in per_spec.items()}
        layouts_by_spec = {spec: job.result() for spec, job in jobs.items()}
    laid, skipped = {}, []
    for name, entry in sorted(found.items()):
        layouts = [layouts_by_spec[spec][name] for _, spec in entry["archs"]]
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


# wgmma's B in shared memory, as the kit lays it out: K-major without swizzling (imm-trans-b
# 0, the descriptor's layout type 0), in core matrices of 8 columns of B x 16 bytes of K,
# 128 bytes each (PTX ISA 9.7.15.5.1.2); the core matrices along K of a group of 8
# columns lie B_LBO bytes apart (the descriptor's leading dimension byte offset), the
# groups of 8 columns one group's bytes apart (its stride dimension byte offset).
SMEM_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
B_LBO = 128


FAMILIES_SEEN = {}


def family_once(name, op, family, entries, lanes):
    """family_of, once per fragment family (`mmac layout`'s "fragments" names it)."""
    if family not in FAMILIES_SEEN:
        FAMILIES_SEEN[family] = family_of(name, op, entries, lanes)
    return FAMILIES_SEEN[family]


def memory_family(name, k, n, fmt):
    """wgmma's B (k x n) as a memory image in the kit's shared-memory layout: one lane of
    k * n * bytes / 4 words, element (row r, column c) at byte (c / 8) * sbo +
    (r / per_row) * B_LBO + (c % 8) * 16 + (r % per_row) * bytes, sbo = 8 * k * bytes."""
    size = SMEM_BYTES.get(fmt)
    if size is None or (k * size) % 16 or n % 8:
        fail(f"{name}: B of `{fmt}`, {k} x {n}: the kit lays out whole core matrices")
    per_row, sbo = 16 // size, 8 * k * size
    slots, firsts = [], [0]
    for r in range(k):
        for c in range(n):
            off = (c // 8) * sbo + (r // per_row) * B_LBO + (c % 8) * 16 + (r % per_row) * size
            slots.append(((off // 4) << 5) | (off % 4) * 8)
            firsts.append(len(slots))
    words = k * n * size // 4
    return {"lanes": 1, "rows": k, "cols": n, "sets": 1, "width": 8 * size, "reg_bits": 32,
            "regs": words, "words": words, "slots": slots, "firsts": firsts, "sbo": sbo}


def build(laid):
    """The instruction records and the deduplicated families."""
    families, family_index, instrs = [], {}, []
    for name, entry in sorted(laid.items()):
        lay = entry["layout"]
        ops = lay.get("operands", {})
        lanes = lay.get("lanes", 32)
        form = kit_form(name)
        want_ops = ["a", "b", "c", "d"] + ["meta"] * form["sparse"] + ["sa", "sb"] * form["scaled"]
        want_lanes, want_memory = (128, ["b"]) if form["warpgroup"] else (32, [])
        memory = sorted(lay.get("memory") or {})
        if lanes != want_lanes or sorted(ops) != sorted(want_ops) or memory != want_memory:
            fail(f"{name}: operands {sorted(ops)} on {lanes} lanes, {memory or 'none'} in "
                 f"memory; the kit runs it with {', '.join(want_ops)} on {want_lanes} lanes, "
                 f"{want_memory or 'none'} in memory")
        m, n, k = (int(x) for x in SHAPE.match(name.split(".")[form["shape"]]).groups())
        stored = k // 2 if form["sparse"] else k
        scales, scale_header = scale_of(name, entry["types"], k)
        meta = metadata_of(name, lay, stored) if form["sparse"] else None
        shapes = {"a": (m, stored), "b": (k, n), "c": (m, n), "d": (m, n),
                  "meta": (m, stored // meta["unit"]) if meta else None,
                  "sa": (m, scales), "sb": (scales, n)}
        fams = {}
        for op in want_ops:
            if op in memory:
                fam = memory_family(name, k, n, entry["types"][op])
            else:
                fam = family_once(name, op, lay["fragments"][op], ops[op], lanes)
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
    """capture_table.inc (the families and instructions, as C++) and, beside it,
    capture_table.bin: every family's slots and firsts as little-endian 32-bit words, which
    table.cpp includes as they are (`.incbin`: the warpgroup families hold a million
    slots, which a compiler would take minutes over as C++ initializers)."""
    out = [
        "// capture_table.inc: GENERATED by capture/gen.py from `mmac list` and",
        f"// `mmac layout --json` ({origin}); do not edit. Included by capture/src/table.cpp.",
        "// A family's slots and firsts are in capture_table.bin (capture_blob, at the word",
        "// offsets given); firsts is null where every element has one copy (element e's",
        "// copy at slots[e]). Slot = lane << 21 | word << 5 | bit: where one copy of an element",
        "// sits in a lane's register image (word 2r and 2r+1 for a 64-bit register r), or in a",
        "// memory image (lane 0; wgmma's B as the kit lays it out in shared memory).",
        f"// mma names without a layout, left out: {', '.join(skipped) or 'none'}",
        "",
    ]
    blob = []
    out.append("static const capture::Family kFamilies[] = {")
    for f in families:
        single = f["firsts"] == list(range(len(f["slots"]) + 1))
        firsts = "nullptr"
        if not single:
            firsts = f"capture_blob + {len(blob)}"
            blob += f["firsts"]
        slots = f"capture_blob + {len(blob)}"
        blob += f["slots"]
        out.append(
            f"    {{{f['lanes']}, {f['rows']}, {f['cols']}, {f['sets']}, {f['width']}, "
            f"{f['reg_bits']}, {f['regs']}, {f['words']}, {firsts}, {slots}}},")
    out.append("};")
    write_bytes(os.path.splitext(path)[0] + ".bin", struct.pack(f"<{len(blob)}I", *blob))
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
    """One kernel: each warp (warpgroup, for wgmma) loads its lanes' words of A and C (and
    the metadata, the scale factors), B from its register image or, for wgmma, from its
    memory image into shared memory, runs the instruction and stores D; on a target
    without the instruction it reports that through *status. The sparsity selector and the
    scale factors' byte and thread ids are 0, as the layouts the table holds are for those
    values."""
    t = ins["types"]
    ops = {op: families[f] for op, f in ins["fams"].items()}
    wg = kit_form(ins["name"])["warpgroup"]
    lanes = 128 if wg else 32
    lines = [f"// {ins['name']}: {ins['ptx']} "
             f"({', '.join(x[0] for x in ins['targets']) or 'no target: ' + ins['refused']})"]
    lines.append(
        f"__global__ void __launch_bounds__(CAPTURE_BLOCK) capture_k{i}_(const CaptureImages in, "
        "uint32_t *__restrict__ D, unsigned mmas, int *status) {")
    lines.append(f"    const unsigned lane = threadIdx.x % {lanes}u;")
    lines.append(f"    const unsigned mma = (blockIdx.x * blockDim.x + threadIdx.x) / {lanes}u;")
    lines.append("    if (mma >= mmas) return;")
    ccs = " || ".join(f"__CUDA_ARCH__ == {x[1]}" for x in ins["targets"]) or "0"
    if all_targets:
        # for capture/check_cuda.py: every target gets every instruction, and ptxas must
        # refuse exactly the ones the table does not claim for it
        ccs = "1"
    lines.append(f"#if defined(__CUDA_ARCH__) && ({ccs})")
    if wg:
        lines += shared_b(ops["b"])
    # the register operands, in PTX's order: d (for wgmma, C's registers, accumulated
    # into), a, b, c, meta, sa, sb
    order = [op for op in ["d", "a", "b", "c", "meta", "sa", "sb"]
             if op in ops and not (wg and op in ("b", "c"))]
    groups = {}
    for op in order:
        f = ops[op]
        kind = reg_kind(t[op], f["reg_bits"]) if op in t else "r"
        if op in ("meta", "sa", "sb") and f["regs"] != 1:
            fail(f"{ins['name']}: `{op}` takes {f['regs']} registers; PTX's operand is one")
        src = "c" if op == "d" and wg else op
        if op != "d" or wg:
            lines.append(f"    const uint32_t *{src} = in.{src} + (size_t)(mma * {lanes}u + lane) * {f['words']}u;")
        names = []
        for r in range(f["regs"]):
            v = f"{op}{r}"
            names.append(v)
            ctype = {"d": "double", "f": "float", "r": "uint32_t"}[kind]
            if op == "d" and not wg:
                lines.append(f"    {ctype} {v};")
            elif kind == "d":
                lines.append(
                    f"    {'const ' * (op != 'd')}double {v} = __hiloint2double((int){src}[{2 * r + 1}], (int){src}[{2 * r}]);")
            elif kind == "f":
                lines.append(f"    {'const ' * (op != 'd')}float {v} = __uint_as_float({src}[{r}]);")
            else:
                lines.append(f"    {'const ' * (op != 'd')}uint32_t {v} = {src}[{r}];")
        groups[op] = (names, kind)
    idx = 0
    fields = {}
    for op in order:
        names, _ = groups[op]
        one = ", ".join(f"%{idx + j}" for j in range(len(names)))
        fields[op] = one if op in ("meta", "sa", "sb") else "{" + one + "}"
        idx += len(names)
    d_kind = groups["d"][1]
    if wg:
        text, outs, ins_ = wgmma_asm(ins, fields, groups)
    else:
        text = ", ".join(fields[op] for op in "dabc")
        if "meta" in fields:
            text += f", {fields['meta']}, 0x0"
        if "sa" in fields:
            text += f", {fields['sa']}, {{0, 0}}, {fields['sb']}, {{0, 0}}"
        text = f"{ins['ptx']} {text};\\n"
        outs = ", ".join(f'"={d_kind}"({v})' for v in groups["d"][0])
        ins_ = ", ".join(f'"{groups[op][1]}"({v})' for op in order[1:] for v in groups[op][0])
    lines.append(f'    asm volatile("{text}"')
    lines.append(f"                 : {outs}")
    clobber = ' : "memory"' if wg else ""
    lines.append(f"                 : {ins_}{clobber});")
    fd = ops["d"]
    lines.append(f"    uint32_t *d = D + (size_t)(mma * {lanes}u + lane) * {fd['words']}u;")
    for r, v in enumerate(groups["d"][0]):
        if d_kind == "d":
            lines.append(f"    d[{2 * r}] = (uint32_t)__double2loint({v});")
            lines.append(f"    d[{2 * r + 1}] = (uint32_t)__double2hiint({v});")
        elif d_kind == "f":
            lines.append(f"    d[{r}] = __float_as_uint({v});")
        else:
            lines.append(f"    d[{r}] = {v};")
    lines.append("#else")
    lines.append("    (void)in; (void)D;")
    lines.append("    if (lane == 0) atomicExch(status, 1);  // not built for this target")
    lines.append("#endif")
    lines.append("}")
    return "\n".join(lines)


def shared_b(fb):
    """wgmma: the warpgroup copies its B image into shared memory (one warpgroup per
    block), makes the writes visible to the asynchronous proxy wgmma reads through, and
    describes it (capture_desc, in device_cuda.cu)."""
    return [
        "    static_assert(CAPTURE_BLOCK == 128, \"one warpgroup per block\");",
        f"    __shared__ __align__(128) uint32_t smem_b[{fb['words']}];",
        f"    const uint32_t *b = in.b + (size_t)mma * {fb['words']}u;",
        f"    for (unsigned w = lane; w < {fb['words']}u; w += 128u) smem_b[w] = b[w];",
        "    asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");",
        "    __syncthreads();",
        f"    const uint64_t desc = capture_desc(smem_b, {B_LBO}u, {fb['sbo']}u);",
    ]


def wgmma_asm(ins, fields, groups):
    """The asm of one wgmma, from fence to wait: D accumulates onto C (scale-d true, a
    predicate set from an operand), A from registers, B through the descriptor, A and B not
    negated, B not transposed (K-major; only .f16/.bf16 take imm-trans-b)."""
    # the asm operands: D's registers (outputs), then A's, the descriptor, the metadata
    # and the scale-d operand
    at = len(groups["d"][0]) + len(groups["a"][0])
    desc, meta, one = f"%{at}", f"%{at + 1}", f"%{at + 1 + ('meta' in fields)}"
    operands = f"{fields['d']}, {fields['a']}, {desc}"
    if "meta" in fields:
        operands += f", {meta}, 0"
    operands += ", p, 1, 1"
    if ins["types"]["a"] in ("f16", "bf16"):
        operands += ", 0"
    text = "\\n".join([
        "{", ".reg .pred p;", f"setp.ne.b32 p, {one}, 0;", "wgmma.fence.sync.aligned;",
        f"{ins['ptx']} {operands};", "wgmma.commit_group.sync.aligned;",
        "wgmma.wait_group.sync.aligned 0;", "}"]) + "\\n"
    outs = ", ".join(f'"+{groups["d"][1]}"({v})' for v in groups["d"][0])
    ins_ = [f'"{groups["a"][1]}"({v})' for v in groups["a"][0]] + ['"l"(desc)']
    if "meta" in fields:
        ins_.append(f'"r"({groups["meta"][0][0]})')
    ins_.append('"r"(1u)')
    return text, outs, ", ".join(ins_)


def write_kernels(out_dir, families, instrs, origin, all_targets=False):
    """capture_kernels.cuh (every mma.sync kernel, for device_cuda.cu, built for every
    target) and capture_wgmma.cuh (the wgmma kernels, for device_wgmma.cu, built for sm_90a
    alone, which has them). With all_targets, for capture/check_cuda.py: every kernel in
    capture_kernels.cuh, built for every target, but of wgmma only N = 8 of every type and
    form (whether ptxas takes a wgmma on a target does not depend on N; every N is checked
    on sm_90a in the build proper), named in capture_sample.txt."""
    head = [
        f"// GENERATED by capture/gen.py from `mmac layout --json` ({origin}); do not edit.",
        "// Included by capture/src/device_cuda.cu or device_wgmma.cu, after",
        "// capture_device.cuh (CAPTURE_BLOCK, CaptureImages, capture_desc). One kernel per",
        "// instruction: warp (warpgroup) w runs one mma on lane l's words at (w * lanes + l) *",
        "// words of each register image, and wgmma's B from words w * words of its memory image.",
        "",
    ]
    def wide(ins):
        return kit_form(ins["name"])["warpgroup"]
    if all_targets:
        chosen = [(i, ins) for i, ins in enumerate(instrs)
                  if not wide(ins) or SHAPE.match(ins["name"].split(".")[kit_form(ins["name"])["shape"]]).group(2) == "8"]
        files = {"capture_kernels.cuh": (chosen, "capture_launch"), "capture_wgmma.cuh": ([], "capture_launch_wgmma")}
        write(os.path.join(out_dir, "capture_sample.txt"), "".join(ins["name"] + "\n" for _, ins in chosen))
    else:
        files = {
            "capture_kernels.cuh": ([(i, x) for i, x in enumerate(instrs) if not wide(x)], "capture_launch"),
            "capture_wgmma.cuh": ([(i, x) for i, x in enumerate(instrs) if wide(x)], "capture_launch_wgmma"),
        }
    for name, (chosen, launch) in files.items():
        out = [f"// {name}: " + head[0][3:]] + head[1:]
        for i, ins in chosen:
            out.append(kernel(i, ins, families, all_targets))
            out.append("")
        out.append("// Launch instruction `index`'s kernel; false for one this file has not.")
        out.append(f"bool {launch}(int index, unsigned blocks, const CaptureImages &in, "
                   "uint32_t *D, unsigned mmas, int *status) {")
        out.append("    switch (index) {")
        for i, _ in chosen:
            out.append(f"    case {i}: capture_k{i}_<<<blocks, CAPTURE_BLOCK>>>(in, D, mmas, status); return true;")
        out.append("    default: return false;")
        out.append("    }")
        out.append("}")
        write(os.path.join(out_dir, name), "\n".join(out) + "\n")


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


def write_bytes(path, data):
    """Write only when the bytes changed."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    with open(path, "wb") as f:
        f.write(data)


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
        fail("no mma or wgmma instruction with a layout in " + ", ".join(a.specs))
    families, instrs = build(laid)
    os.makedirs(a.out, exist_ok=True)
    origin = "specs " + " ".join(os.path.basename(s) for s in a.specs)
    write_table(os.path.join(a.out, "capture_table.inc"), families, instrs, skipped, origin)
    write_kernels(a.out, families, instrs, origin, a.all_targets)
    write_manifest(os.path.join(a.out, "capture_manifest.tsv"), instrs)
    print(f"gen.py: {len(instrs)} instructions, {len(families)} fragment families "
          f"({len(skipped)} mma names without a layout) -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
