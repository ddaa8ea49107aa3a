#!/usr/bin/env bash
# One-command H200 session: install the carried kernel libraries, run the acceptance
# smokes (text + JSON reports), the GPU tests and the bench; logs land under $OUT.
#
# Staging (on the development machine, once):
#   ../shared/gpu/fetch-wheels .gpuwheels && ../shared/gpu/fetch-vllm-kernels .gpuwheels
#   benchmarks/stage_gpu_carry.sh          # fills .gpucarry/ (~37 MB, git-ignored)
# Then one device call, from the repo root, carrying .gpucarry:
#   bash benchmarks/h200_session.sh [smoke|tests|bench|all|cold]
# cold (under 5 minutes of device time): FlashInfer's JIT cache (~/.cache/flashinfer) and
# Python's bytecode cache ($PYTHONPYCACHEPREFIX, gpu_setup.sh) are removed first, so each
# "first" is truly first; then the wall time of each verdict
# (`attn-select smoke`), first and warm, for an FA3 deployment (llama-h200, parity off by
# default) and a FlashInfer one (gqa16-tp2-h200: the kernel variants its decode and prefill
# calls run compile), then the FA3 one with --parity; the table lands in $OUT/cold.txt,
# each FlashInfer module's per-unit compile times (ninja's .ninja_log) in $OUT/cold-ninja.txt.
# FlashInfer's JIT cache comes back as $OUT/flashinfer-cache.tar.xz.* (<= 16 MB parts);
# put them in .gpucache/ and carry it in a later call to skip the compiles.
# Prebuilt kernels: carry .gpucarry-jit too (benchmarks/prebuild_flashinfer.py fills it on
# the development machine; gpu_setup.sh puts its flashinfer_jit_cache stand-in on
# PYTHONPATH), and the smoke loads the reduced modules with no compile (the reports' note:
# "prebuilt kernels, as flashinfer-jit-cache ships them"); NO_PREBUILT=1 ignores it.
set -u
MODE=${1:-all}
OUT=${OUT:-/tmp/h200-out}
if [ "$MODE" = cold ]; then BUDGET=${BUDGET:-280}; else BUDGET=${BUDGET:-560}; fi
mkdir -p "$OUT/smokes"
. benchmarks/gpu_setup.sh
verdict() {  # verdict LABEL NAME CAP [FLAGS]: one smoke's wall time (a fresh process)
  local label=$1 name=$2 cap=$3; shift 3
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout "$(left "$cap")" python3 -m selector smoke "tests/fixtures/smoke/$name.yaml" "$@" \
    > "$OUT/smokes/cold-$label.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '%-22s %-16s %-10s %7.1f s  exit %s\n' "$label" "$name" "${*:-default}" \
    "$(awk "BEGIN{print $t1 - $t0}")" "$rc" | tee -a "$OUT/cold.txt"
}
ninja_times() {  # per FlashInfer module: its build's wall time, then each step, slowest first
  local log
  find "$HOME/.cache/flashinfer" -name .ninja_log 2>/dev/null | sort | while read -r log; do
    awk -F'\t' 'NR > 1 && NF >= 4 { w = $2 > w ? $2 : w; c++ } END {
      printf "%s: %d steps, %.1f s from the first start to the last end\n", m, c, w / 1000 }' \
      m="$(basename "$(dirname "$log")")" "$log"
    awk -F'\t' 'NR > 1 && NF >= 4 { n = split($4, p, "/"); printf "%8.1f s  %s\n", ($2 - $1) / 1000, p[n] }' \
      "$log" | sort -rn
  done
}
if [ "$MODE" = cold ]; then
  log "cold verdicts (FlashInfer's JIT cache removed: every first compiles)"
  rm -rf "$HOME/.cache/flashinfer" "$PYTHONPYCACHEPREFIX"  # nor any bytecode: a fresh machine's
  : > "$OUT/cold.txt"
  echo "prebuilt FlashInfer kernels: ${JIT_SITE:-none (JIT-compiled)}" | tee -a "$OUT/cold.txt"
  verdict fa3-first llama-h200 60
  verdict fa3-warm llama-h200 60
  verdict flashinfer-first gqa16-tp2-h200 200
  verdict flashinfer-warm gqa16-tp2-h200 60
  verdict flashinfer-warm-2 gqa16-tp2-h200 60
  verdict fa3-warm-2 llama-h200 60
  verdict fa3-parity-warm llama-h200 60 --parity
  grep -h -A14 -i "time to verdict" "$OUT"/smokes/cold-*.txt | head -90
  { echo "== what FlashInfer compiled (the reports' notes)"
    grep -h "FlashInfer JIT\|FlashInfer [0-9.]*: its whole" "$OUT"/smokes/cold-*.txt | sort -u
    echo "== verdicts"
    for f in "$OUT"/smokes/cold-*.txt; do
      printf '%-28s %s\n' "$(basename "$f" .txt)" "$(grep -m1 '^attn-select smoke' "$f" || tail -1 "$f")"
    done
  } | tee -a "$OUT/cold.txt"
  ninja_times > "$OUT/cold-ninja.txt"
  log "FlashInfer's per-unit compile times (ninja)"; cat "$OUT/cold-ninja.txt"
fi
python3 -c "import torch, flashinfer; print('torch', torch.__version__, '| flashinfer', flashinfer.__version__, '|', torch.cuda.get_device_name(0))"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader

smoke() {  # smoke NAME: text report (verdict time per stage) + JSON report
  log "smoke $1"
  timeout "$(left 240)" python3 -m selector smoke "tests/fixtures/smoke/$1.yaml" 2>&1 | tee "$OUT/smokes/smoke-$1.txt"
  echo "exit ${PIPESTATUS[0]}"
}
if [ "$MODE" = smoke ] || [ "$MODE" = all ]; then
  for name in ${SMOKES:-llama-h200 deepseek-v3-tp8-h200-flashmla deepseek-v3-tp8-h200 gpt-oss-20b-h200 gemma-2-9b-h200 gqa16-tp2-h200 llama-fp8kv-h200 gemma-3-27b-h200}; do
    smoke "$name"
  done
  log "warm-cache verdict time (second run)"
  timeout "$(left 60)" python3 -m selector smoke tests/fixtures/smoke/llama-h200.yaml --no-measure 2>&1 | tail -24
fi
if [ "$MODE" = bench ] || [ "$MODE" = all ]; then
  log "bench (Llama GQA 32/8, head 128, bf16) + raw loops"
  mkdir -p "$OUT/bench"
  timeout "$(left 240)" python3 -m selector bench tests/fixtures/smoke/llama-h200.yaml \
    --workload examples/workloads/llama-chat.yaml --output "$OUT/bench" --policy fastest 2>&1 | tail -40
  timeout "$(left 90)" python3 benchmarks/bench_rawloop.py "$OUT/bench/bench.json" 2>&1 | tee "$OUT/rawloop.txt"
fi
if [ "$MODE" = tests ] || [ "$MODE" = all ]; then
  log "pytest -m gpu --gpu-required"
  timeout "$(left 300)" python3 -m pytest tests/smoke tests/bench -m gpu -q -p no:cacheprovider --gpu-required 2>&1 | tail -25
fi
tar -C "$OUT" -cf "$OUT/smokes.tar" smokes && rm -rf "$OUT/smokes"  # at most 8 files come back
log "save FlashInfer's JIT cache"
if [ -d "$HOME/.cache/flashinfer" ] && [ -z "${NO_CACHE_SAVE:-}" ] && [ "$MODE" != cold ]; then
  tar -C "$HOME" -cf - .cache/flashinfer | xz -T16 -3 | split -b 15m - "$OUT/flashinfer-cache.tar.xz."
  ls -la "$OUT"/flashinfer-cache.tar.xz.*
fi
log done
