#!/usr/bin/env bash
# tests/captures/device_run.sh: the one device run that captured tests/captures/H200 (2026-11-28),
# as it ran: from the repository root of a GPU machine with $OUT set, the kit's CUDA build
# (mmac-capture.xz) and the inputs (inputs.tar.xz: mmac gen's vectors, narrow.py's cases and
# the instruction list) carried in target/capture/device; tests/captures/README.md says how.
set -u
D=target/capture/device
W=/tmp/cap
BUDGET=${BUDGET:-240}
mkdir -p $W/vectors $W/narrow $W/log $W/out/vectors $W/out/narrow $W/out/permma
{ date; nvidia-smi; nvidia-smi -q | head -40; } >"$OUT/gpu.txt" 2>&1
head -3 "$OUT/gpu.txt"
tar xJf $D/inputs.tar.xz -C $W || exit 3
xz -dc $D/mmac-capture.xz >$W/mmac-capture && chmod +x $W/mmac-capture || exit 3
BIN=${CAPTURE_BIN:-$W/mmac-capture}
export W BIN
deadline=$(( $(date +%s) + BUDGET ))
export deadline

cap() { # KIND INSTR [extra args]: capture one file, print a status line
    local kind=$1 i=$2
    shift 2
    if [ "$(date +%s)" -ge "$deadline" ]; then echo "$kind $i skipped"; return; fi
    local t0=$EPOCHREALTIME out=$W/out/$kind/$i.mmv vec=$kind
    [ "$kind" = permma ] && vec=vectors
    timeout 90 $BIN --instr "$i" --vectors "$W/$vec/$i.mmv" -o "$out" "$@" \
        2>"$W/log/$kind.$i.err"
    local rc=$?
    echo "$kind $i rc=$rc $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.2f}s')")"
}
export -f cap

# smoke test first: if one capture fails, say why and stop
cap vectors mma.m16n8k16.f32.f16.f16.f32 | tee "$OUT/status.txt"
if ! grep -q "rc=0" "$OUT/status.txt"; then
    cat "$W/log/vectors.mma.m16n8k16.f32.f16.f16.f32.err"
    exit 4
fi
cat "$W/log/vectors.mma.m16n8k16.f32.f16.f16.f32.err"

# then, in order of what settles most: sparse narrow, sparse gen, dense, the rest
{
    for f in $W/narrow/*.sp.*.mmv; do echo "narrow $(basename "$f" .mmv)"; done
    grep '\.sp\.' $W/instructions.txt | sed 's/^/vectors /'
    for f in $W/narrow/*.mmv; do case $f in *.sp.*) ;; *) echo "narrow $(basename "$f" .mmv)";; esac; done
    grep -v '\.sp\.' $W/instructions.txt | grep -vx mma.m16n8k16.f32.f16.f16.f32 | sed 's/^/vectors /'
} >$W/jobs.txt
wc -l <$W/jobs.txt
xargs -P 8 -L 1 bash -c 'cap "$0" "$1"' <$W/jobs.txt >>"$OUT/status.txt"
deadline=$(( $(date +%s) + 90 ))
# each case alone in its MMA must give the same d (the independence of the diagonal)
for i in mma.sp.m16n8k32.f32.f16.f16.f32 wgmma.sp.m64n8k32.f32.f16.f16 mma.m16n8k16.f16.f16.f16.f16; do
    cap permma "$i" --cases-per-mma 1 >>"$OUT/status.txt"
done
cp $W/log/vectors.mma.m16n8k16.f32.f16.f16.f32.err "$OUT/first.err"
tar cJf "$OUT/captures.tar.xz" -C $W/out . -C $W log
echo "runs: $(grep -c rc=0 "$OUT/status.txt") ok, $(grep -c 'rc=[1-9]' "$OUT/status.txt") failed, $(grep -c skipped "$OUT/status.txt") skipped"
grep 'rc=[1-9]' "$OUT/status.txt" | head -20
ls -la "$OUT"
