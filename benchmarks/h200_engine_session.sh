#!/usr/bin/env bash
# Start the real vLLM 0.25.1 engine on the H200 for the recorded deployments
# (tests/golden/vllm_startups/deployments.json) and bring back each start-up log.
#
# Staging (development machine): benchmarks/stage_gpu_carry.sh && benchmarks/stage_vllm_engine.sh
# Then device calls back to back (the machine goes back 30 s after a call):
#   carry .gpucarry:               bash benchmarks/h200_session.sh ... (or . benchmarks/gpu_setup.sh)
#   carry .vllmcarry/a:            bash benchmarks/h200_engine_session.sh stash .vllmcarry/a
#   carry .vllmcarry/b:            bash benchmarks/h200_engine_session.sh stash .vllmcarry/b
#   carry .vllmcarry/c:            bash benchmarks/h200_engine_session.sh stash .vllmcarry/c
#   carry .vllmcarry/d:            bash benchmarks/h200_engine_session.sh run [NAME...]
#   no carry, same machine:        bash benchmarks/h200_engine_session.sh run NAME...
#   (`install` instead of `run`: install what was stashed and stop, e.g. before
#   `pytest -m gpu --gpu-required` with vLLM importable)
# `run` installs what was stashed (once), starts each deployment (benchmarks/vllm_startups.py)
# and writes $OUT/startup-logs.tar.xz; tools/record_startups.py turns it into the goldens.
set -u
MODE=${1:-run}
shift || true
OUT=${OUT:-/tmp/h200-out}
BUDGET=${BUDGET:-560}
STAGE=$HOME/vllm-stage
mkdir -p "$STAGE" "$OUT"
if [ "$MODE" = stash ]; then
  for dir in "$@"; do cp "$dir"/* "$STAGE"/; done
  ls -la "$STAGE"
  exit 0
fi
. benchmarks/gpu_setup.sh
if [ ! -d "$SITE/vllm" ]; then
  log "install vLLM 0.25.1 into $SITE"
  cp .vllmcarry/d/*.whl "$STAGE"/ 2>/dev/null
  cat "$STAGE"/vllm.tar.xz.* | xz -d -T16 | tar -xf - -C "$SITE" || { echo "vllm parts missing"; ls -la "$STAGE"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$STAGE"/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -5
  cp "$KERNELS/_vllm_fa3_C.abi3.so" "$SITE/vllm/vllm_flash_attn/"
  cp "$KERNELS/_flashmla_C.abi3.so" "$KERNELS/_flashmla_extension_C.abi3.so" "$SITE/vllm/"
fi
python3 -m pip list 2>/dev/null > "$OUT/pip-list.txt"
python3 -c "import vllm, transformers, torch; print('vllm', vllm.__version__, '| transformers', transformers.__version__, '| torch', torch.__version__)" 2>&1 | tail -3
[ "$MODE" = install ] && exit 0
log "engine start-ups"
mkdir -p "$OUT/startups"
STARTUP_BUDGET_S=$(left 600) python3 benchmarks/vllm_startups.py "$OUT/startups" "$@"
for f in "$OUT"/startups/*.log; do
  grep -q "engine ready" "$f" || { echo "--- $(basename "$f") (not ready)"; grep -v " DEBUG " "$f" | tail -15; }
done
tar -C "$OUT" -cf - startups | xz -T16 -6 > "$OUT/startup-logs.tar.xz" && rm -rf "$OUT/startups"
ls -la "$OUT"
log done
