#!/usr/bin/env python3
"""The capture kit's CUDA build check (run by capture/check_cuda.sh after capture/build.sh):
for every target of the kit,

1. the PTX that nvcc emits for it holds every instruction the kit claims for the target
   (capture_manifest.tsv), and no mma the kit does not claim there;
2. ptxas accepts that PTX (it did when build.sh built the fatbinary; here again, target by
   target, so that a failure names the target);
3. the claims are tight: the same kernels with every instruction built for every target
   (gen.py --all-targets; of wgmma, N = 8 of every type and form) go through ptxas, which
   must refuse exactly the instructions the kit does not claim for the target (so a target
   is never denied an instruction it has).

Prints a summary per target and family, and exits 1 on any failure.

Usage: check_cuda.py --nvcc NVCC --src device_cuda.cu --wgmma-src device_wgmma.cu --gen GEN_DIR
       --gen-all GEN_ALL_DIR --work DIR
"""

import argparse
import collections
import os
import re
import subprocess
import sys

TARGETS = ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a"]
ENTRY = re.compile(r"^\s*\.(?:visible\s+)?\.?entry\s+(\S*?capture_k(\d+)_\S*?)\s*\(", re.M)
MMA = re.compile(
    r"\b(?:mma(?:\.sp::ordered_metadata)?|wgmma\.mma_async(?:\.sp)?)\.sync\.aligned\.[\w.:]+")
PTXAS_ERROR = re.compile(r"line (\d+); error\s*:\s*(.*)")


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:  # a missing or unrunnable nvcc or ptxas: said, not a traceback
        print(f"check: error: cannot run {cmd[0]}: {e.strerror}", file=sys.stderr)
        sys.exit(2)


def manifest(gen):
    """target -> {instruction: (ptx, family)}, and kernel index -> instruction name."""
    claims = collections.defaultdict(dict)
    names = []
    with open(os.path.join(gen, "capture_manifest.tsv"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            target, name, ptx, family = line.rstrip("\n").split("\t")
            claims[target][name] = (ptx, family)
            if name not in names:
                names.append(name)
    return claims, names


def kernel_names(gen):
    """Kernel index -> instruction name, from the table's order."""
    table = open(os.path.join(gen, "capture_table.inc"), encoding="utf-8").read()
    block = table.split("kInstrs[] = {", 1)[1].split("};", 1)[0]
    return re.findall(r'^\s*\{"([^"]+)"', block, re.M)


def entries_by_line(ptx_text):
    """For each line number (1-based), the kernel index of the .entry it lies in."""
    owner = {}
    current = None
    for no, line in enumerate(ptx_text.splitlines(), 1):
        m = ENTRY.match(line)
        if m:
            current = int(m.group(2))
        owner[no] = current
    return owner


def compile_ptx(nvcc, src, inc, target, out):
    """nvcc's PTX for a target. For an arch-specific target (sm_90a) nvcc also runs ptxas
    over the PTX it wrote, and fails with ptxas's errors: those are step 2's and 3's to
    judge (they run ptxas themselves), so the PTX counts when nvcc failed on ptxas alone."""
    cc = target[3:]
    if os.path.exists(out):
        os.remove(out)
    p = run([nvcc, "-std=c++17", "-ptx", f"-arch=compute_{cc}",
             "-I", os.path.dirname(src), "-I", inc, src, "-o", out])
    only_ptxas = all(line.startswith("ptxas") for line in p.stderr.splitlines() if line.strip())
    if not os.path.exists(out) or (p.returncode != 0 and not only_ptxas):
        return None, p.stderr
    return open(out, encoding="utf-8").read(), ""


def ptxas(nvcc, ptx_path, target, out):
    exe = os.path.join(os.path.dirname(nvcc), "ptxas")
    p = run([exe, f"-arch={target}", ptx_path, "-o", out])
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--src", required=True, help="capture/src/device_cuda.cu")
    ap.add_argument("--wgmma-src", required=True, help="capture/src/device_wgmma.cu (sm_90a)")
    ap.add_argument("--gen", required=True)
    ap.add_argument("--gen-all", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    for folder in (a.gen, a.gen_all):
        if not os.path.isdir(folder):
            print(f"check: error: {folder}: no such folder (capture/gen.py writes it)", file=sys.stderr)
            return 2
    os.makedirs(a.work, exist_ok=True)
    claims, _ = manifest(a.gen)
    names = kernel_names(a.gen)
    if kernel_names(a.gen_all) != names:
        print("check: error: the --all-targets kernels are not the same instructions", file=sys.stderr)
        return 1
    # the instructions the all-targets build has kernels for (all but most wgmma N)
    with open(os.path.join(a.gen_all, "capture_sample.txt"), encoding="utf-8") as f:
        sample = set(f.read().split())
    failures = []
    summary = []
    for t in TARGETS:
        claimed = claims.get(t, {})
        # 1. the PTX holds every claimed instruction, and nothing else
        # (the wgmma translation unit is built for sm_90a alone)
        units = [("", a.src)] + ([(".wgmma", a.wgmma_src)] if t == "sm_90a" else [])
        found = collections.Counter()
        compiled = []
        for suffix, src in units:
            ptx_path = os.path.join(a.work, f"{t}{suffix}.ptx")
            text, err = compile_ptx(a.nvcc, src, a.gen, t, ptx_path)
            if text is None:
                failures.append(f"{t}: nvcc -ptx {os.path.basename(src)} failed:\n{err}")
                continue
            found.update(MMA.findall(text))
            compiled.append((suffix, ptx_path))
        if len(compiled) != len(units):
            continue
        for name, (ptx, _) in sorted(claimed.items()):
            if found[ptx] == 0:
                failures.append(f"{t}: {name}: `{ptx}` is not in the PTX")
        extra = set(found) - {p for p, _ in claimed.values()}
        for p in sorted(extra):
            failures.append(f"{t}: the PTX has `{p}`, which the kit does not claim for {t}")
        # 2. ptxas accepts it
        for suffix, ptx_path in compiled:
            rc, out = ptxas(a.nvcc, ptx_path, t, os.path.join(a.work, f"{t}{suffix}.cubin"))
            if rc != 0:
                failures.append(f"{t}: ptxas rejects the kit's PTX:\n{out.strip()}")
        # 3. tight: ptxas refuses exactly what is not claimed
        all_path = os.path.join(a.work, f"{t}.all.ptx")
        text_all, err = compile_ptx(a.nvcc, a.src, a.gen_all, t, all_path)
        if text_all is None:
            failures.append(f"{t}: nvcc -ptx (all targets) failed:\n{err}")
            continue
        owner = entries_by_line(text_all)
        rc, out = ptxas(a.nvcc, all_path, t, os.path.join(a.work, f"{t}.all.cubin"))
        refused = {}
        for m in PTXAS_ERROR.finditer(out):
            k = owner.get(int(m.group(1)))
            if k is None:
                failures.append(f"{t}: ptxas error outside any kernel: {m.group(0)}")
                continue
            refused.setdefault(names[k], m.group(2).strip())
        if rc != 0 and not refused:
            failures.append(f"{t}: ptxas failed on the all-targets PTX without a line:\n{out.strip()}")
        for name in names:
            if name not in sample:
                continue  # a wgmma of another N than the sample's (checked in step 1)
            if name in claimed and name in refused:
                failures.append(f"{t}: {name} is claimed, but ptxas refuses it: {refused[name]}")
            if name not in claimed and name not in refused:
                failures.append(f"{t}: {name} is not claimed, but ptxas accepts it for {t}")
        families = collections.Counter(f for _, f in claimed.values())
        reasons = collections.Counter(refused.values())
        summary.append(f"{t}: {len(claimed)} instructions in {len(families)} families accepted by "
                       f"ptxas and present in the PTX; {len(refused)} refused as unclaimed"
                       + "".join(f"\n    refused ({n}): {r}" for r, n in sorted(reasons.items())))
        for fam, n in sorted(families.items()):
            summary.append(f"    {fam}: {n}")
    print("\n".join(summary))
    if failures:
        print(f"\ncheck_cuda: {len(failures)} FAILURES:", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    total = sum(len(claims.get(t, {})) for t in TARGETS)
    print(f"check_cuda: ok: {total} (target, instruction) pairs over {len(TARGETS)} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
