#!/usr/bin/env bash
# Fill .vllmcarry/ (git-ignored) with what benchmarks/h200_engine_session.sh installs on the
# H200 to start the real vLLM 0.25.1 engine: the vllm package of the
# vllm-0.25.1-cp38-abi3-manylinux_2_28_x86_64 wheel without its compiled FlashAttention
# extensions (_vllm_fa2_C is Ampere's path; FA3 and FlashMLA come from .gpucarry, filled by
# benchmarks/stage_gpu_carry.sh) and without the Rust frontend binary (vllm-rs, used only
# with VLLM_RUST_FRONTEND_PATH), xz-compressed and split into three parts of at most 35 MB, plus
# the wheels of the runtime dependencies that the engine's import chain
# (vllm.LLM(model=DIR, load_format="dummy", skip_tokenizer_init=True)) touches and the
# H200 image lacks or has at another version than vLLM 0.25.1 was resolved with.
#   ../shared/gpu/fetch-wheels .gpuwheels && ../shared/gpu/fetch-vllm-kernels .gpuwheels
#   benchmarks/stage_gpu_carry.sh && benchmarks/stage_vllm_engine.sh
# Then carry .gpucarry, .vllmcarry/a, b, c and d in five calls back to back
# (benchmarks/h200_engine_session.sh says how).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.vllmcarry/' .git/info/exclude || echo '/.vllmcarry/' >> .git/info/exclude
VERSION=0.25.1
CACHE=.gpuwheels/.download
mkdir -p "$CACHE" .vllmcarry/a .vllmcarry/b .vllmcarry/c .vllmcarry/d .vllmcarry/.deps
rm -f .vllmcarry/[abcd]/*
ls "$CACHE"/vllm-$VERSION-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps \
  --only-binary=:all: --python-version 3.12 --implementation cp --abi abi3 \
  --platform manylinux_2_28_x86_64 -d "$CACHE" "vllm==$VERSION"
WHEEL=$(ls "$CACHE"/vllm-$VERSION-*.whl)
# Versions: vLLM 0.25.1's pin where its METADATA has one, else the release pip resolved for
# the 0.25.1 oracle venv (../shared/oracle/requirements-oracle-0.25.1.txt) or inside the
# METADATA range; the H200 image's numpy, torch, triton, psutil, requests, pyyaml, regex,
# tqdm, pillow, sentencepiece, tiktoken, einops, cloudpickle, aiohttp, prometheus-client
# and py-cpuinfo are used as they are.
DEPS=(transformers==5.24.0 huggingface-hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2
      tokenizers==0.23.3 safetensors==0.8.0 truststore==0.10.5
      msgspec==0.22.0 pyzmq==27.3.0 cbor2==6.3.0 pybase64==1.5.1 cachetools==8.0.2
      openai==3.57.0 jiter distro sniffio==1.3.1 openai-harmony==0.0.8
      llguidance==1.7.3 xgrammar==0.2.9 outlines-core==0.2.14 lark==1.2.2 interegular
      diskcache==5.6.3 lm-format-enforcer==0.11.3 partial-json-parser
      compressed-tensors==0.17.0 loguru depyf==0.20.0 astor dill blake3 setproctitle
      python-json-logger ijson fastapi==0.136.0 starlette==1.0.1)
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps "${PLAT[@]}" -d .vllmcarry/.deps "${DEPS[@]}"
python3 - "$WHEEL" <<'PY'
import io, lzma, sys, tarfile, zipfile
wheel = sys.argv[1]
drop = ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so", "vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so",
        "vllm/_flashmla_C.abi3.so", "vllm/_flashmla_extension_C.abi3.so", "vllm/vllm-rs")
buffer = io.BytesIO()
with zipfile.ZipFile(wheel) as z, tarfile.open(fileobj=buffer, mode="w") as tar:
    for info in z.infolist():
        name = info.filename
        if name.endswith("/") or name in drop:
            continue
        if "/deep_gemm/_C.cpython-" in name and "cpython-312" not in name:
            continue  # the H200's Python is 3.12
        data = z.read(name)
        entry = tarfile.TarInfo(name)
        entry.size = len(data)
        entry.mode = 0o755 if name.endswith(".so") else 0o644
        tar.addfile(entry, io.BytesIO(data))
packed = lzma.compress(buffer.getvalue(), preset=6)
size = 35 * 1000 * 1000  # a part + the working tree (~20-25 MB) stays under one call's 64 MiB
parts = [packed[i:i + size] for i in range(0, len(packed), size)]
if len(parts) > 3:
    sys.exit(f"vllm packs to {len(packed) / 1e6:.0f} MB: more than three parts of {size / 1e6:.0f} MB")
for index, part in enumerate(parts):
    open(f".vllmcarry/{'abc'[index]}/vllm.tar.xz.{index:02d}", "wb").write(part)
print(f"vllm {len(buffer.getvalue()) / 1e6:.0f} MB tar -> {len(packed) / 1e6:.0f} MB xz in {len(parts)} parts")
PY
cp .vllmcarry/.deps/*.whl .vllmcarry/d/
du -sh .vllmcarry/[abcd]
