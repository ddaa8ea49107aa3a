# Sourced by the H200 session scripts (benchmarks/h200_session.sh,
# benchmarks/h200_parallel_session.sh): installs the carried kernel libraries
# (benchmarks/stage_gpu_carry.sh fills $CARRY, default .gpucarry) into ~/gpu-site and
# ~/vllm-kernels, restores FlashInfer's JIT cache from .gpucache when carried, exports the
# environment, and defines log (a timed heading) and left N (seconds left of $BUDGET, at
# most N). The caller sets OUT and BUDGET before sourcing it.
CARRY=${CARRY:-.gpucarry}
SITE=$HOME/gpu-site
KERNELS=$HOME/vllm-kernels
mkdir -p "$OUT" "$SITE" "$KERNELS"
T0=$(date +%s)
log() { echo; echo "== $* (t=$(( $(date +%s) - T0 )) s)"; }
left() { local r=$(( BUDGET - ($(date +%s) - T0) )); [ "$r" -lt 1 ] && r=1; [ "$r" -lt "$1" ] && echo "$r" || echo "$1"; }

log install
if [ ! -d "$SITE/flashinfer" ]; then
  for w in "$CARRY"/*.whl; do python3 -m zipfile -e "$w" "$SITE"; done
fi
for f in "$CARRY"/*.so.xz; do
  [ -f "$KERNELS/$(basename "$f" .xz)" ] || python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" "$KERNELS/$(basename "$f" .xz)"
done
cp "$CARRY/VERSIONS" "$KERNELS/" 2>/dev/null
if ls .gpucache/flashinfer-cache.tar.xz.* >/dev/null 2>&1 && [ ! -d "$HOME/.cache/flashinfer" ]; then
  cat .gpucache/flashinfer-cache.tar.xz.* | tar -xJf - -C "$HOME"
  # the wheels were just unpacked (new mtimes): make the cached objects newer than their
  # sources, or ninja rebuilds every module
  find "$HOME/.cache/flashinfer" -exec touch {} +
fi
export PYTHONPATH=$PWD:$SITE FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 PYTHONUNBUFFERED=1
export VLLM_KERNELS_DIR=$KERNELS COLUMNS=160 NO_COLOR=1
