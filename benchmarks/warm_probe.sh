#!/usr/bin/env bash
# Where a warm verdict's seconds go on the H200: one device call, carrying .gpucarry
# (benchmarks/stage_gpu_carry.sh). Times `import torch` (with and without CUDA's start and
# the interpreter's teardown), FlashInfer's import, the CPU-only dry run, a first FlashInfer
# verdict (JIT-compiled) and warm FlashInfer / FA3 verdicts, each a fresh process; then
# -X importtime and a cProfile of one warm verdict. Everything comes back as
# $OUT/probe.tar.xz (summary.txt: the wall seconds), FlashInfer's JIT cache as
# $OUT/flashinfer-cache.tar.xz.* (for .gpucache). Its 2026-12-04 run found the bytecode
# cost (docs/smoke.md, "Cold verdicts"; benchmarks/results/cold-2026-12-04.txt).
#   bash benchmarks/warm_probe.sh
set -u
REAL_OUT=${OUT:-/tmp/h200-out}; BUDGET=570
OUT=/tmp/probe; mkdir -p $OUT
. benchmarks/gpu_setup.sh
TIMEFORMAT='%R s'
t() { local label=$1; shift; { time "$@" > "$OUT/$label.log" 2>&1; } 2>> "$OUT/times-$label.txt"; echo "$label: $(tail -1 "$OUT/times-$label.txt")" | tee -a "$OUT/summary.txt"; }
log "import probes"
for i in 1 2 3; do t import-torch python3 -c "import torch"; done
for i in 1 2; do t import-torch-cuda python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; done
for i in 1 2; do t import-torch-cuda-exit python3 -c "import torch, os; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); os._exit(0)"; done
for i in 1 2; do t import-torch-fi python3 -c "import torch, flashinfer"; done
t python-bare python3 -c "pass"
t selector-dry python3 -m selector smoke tests/fixtures/smoke/gqa16-tp2-h200.yaml --dry-run
python3 -X importtime -c "import torch" 2> "$OUT/importtime-torch.txt"
python3 -X importtime -c "import torch, flashinfer" 2> "$OUT/importtime-fi.txt"
log "first FlashInfer verdict (compiles)"
t fi-first timeout 300 python3 -m selector smoke tests/fixtures/smoke/gqa16-tp2-h200.yaml
for i in 1 2 3; do t fi-warm python3 -m selector smoke tests/fixtures/smoke/gqa16-tp2-h200.yaml; done
for i in 1 2; do t fa3-warm python3 -m selector smoke tests/fixtures/smoke/llama-h200.yaml; done
python3 -X importtime -m selector smoke tests/fixtures/smoke/gqa16-tp2-h200.yaml > "$OUT/fi-warm-importtime.log" 2> "$OUT/importtime-fi-warm.txt"
python3 -m cProfile -o "$OUT/fi-warm.prof" -m selector smoke tests/fixtures/smoke/gqa16-tp2-h200.yaml > "$OUT/fi-warm-prof.log" 2>&1
python3 -c "
import pstats; p = pstats.Stats('$OUT/fi-warm.prof'); p.sort_stats('cumulative').print_stats(60)" > "$OUT/fi-warm-prof.txt" 2>&1
log "save FlashInfer's JIT cache"
tar -C "$HOME" -cf - .cache/flashinfer | xz -T16 -3 | split -b 15m - "$REAL_OUT/flashinfer-cache.tar.xz."
tar -C /tmp -cJf "$REAL_OUT/probe.tar.xz" probe
ls -la "$REAL_OUT"
cat "$OUT/summary.txt"
