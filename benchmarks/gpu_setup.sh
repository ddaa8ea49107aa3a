# Sourced by the H200 session scripts (benchmarks/h200_session.sh,
# benchmarks/h200_parallel_session.sh): installs the carried kernel libraries
# (benchmarks/stage_gpu_carry.sh fills $CARRY, default .gpucarry) into ~/gpu-site and
# ~/vllm-kernels, restores FlashInfer's JIT cache from .gpucache when carried, puts the
# prebuilt FlashInfer kernels of .gpucarry-jit on PYTHONPATH when carried, exports the
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
  [ -e "$f" ] || continue  # a later call of a warm machine need not carry them again
  [ -f "$KERNELS/$(basename "$f" .xz)" ] || python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$f" "$KERNELS/$(basename "$f" .xz)"
done
cp "$CARRY/VERSIONS" "$KERNELS/" 2>/dev/null
if ls .gpucache/flashinfer-cache.tar.xz.* >/dev/null 2>&1 && [ ! -d "$HOME/.cache/flashinfer" ]; then
  cat .gpucache/flashinfer-cache.tar.xz.* | tar -xJf - -C "$HOME"
  # the wheels were just unpacked (new mtimes): make the cached objects newer than their
  # sources, or ninja rebuilds every module
  find "$HOME/.cache/flashinfer" -exec touch {} +
fi
# Prebuilt FlashInfer kernels (benchmarks/prebuild_flashinfer.py fills .gpucarry-jit/): the
# flashinfer_jit_cache stand-in, its libraries unpacked, goes on PYTHONPATH, so FlashInfer's
# loader finds the smoke's reduced modules with no compile (flashinfer/jit/env.py:100-132).
# Only when carried in this call: without it FlashInfer JIT-compiles as before.
JIT_CARRY=${JIT_CARRY:-.gpucarry-jit}
JIT_SITE=
if [ -f "$JIT_CARRY/flashinfer_jit_cache/__init__.py" ] && [ -z "${NO_PREBUILT:-}" ]; then
  JIT_SITE=$HOME/jit-site
  rm -rf "$JIT_SITE" && mkdir -p "$JIT_SITE" && cp -r "$JIT_CARRY/flashinfer_jit_cache" "$JIT_SITE/"
  python3 - "$JIT_SITE/flashinfer_jit_cache/jit_cache" <<'PY'
import lzma, pathlib, sys
for packed in pathlib.Path(sys.argv[1]).glob("*/*.so.xz"):
    packed.with_suffix("").write_bytes(lzma.open(packed).read())
    packed.unlink()
    print("prebuilt FlashInfer module:", packed.parent.name)
PY
fi
# The image's torch venv holds no bytecode and a run does not write it there: every Python
# start compiled ~1,200 modules from source, 3.0 s of a 7.5 s verdict (a profile of a warm
# FlashInfer verdict on 2026-12-04; the smoke's report says so, selector/smoke/bytecode.py).
# A bytecode cache in a folder we can write, as any machine whose packages pip installed has.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-$HOME/.cache/pycache}
export PYTHONPATH=$PWD:$SITE${JIT_SITE:+:$JIT_SITE} FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=16 PYTHONUNBUFFERED=1
export VLLM_KERNELS_DIR=$KERNELS COLUMNS=160 NO_COLOR=1
