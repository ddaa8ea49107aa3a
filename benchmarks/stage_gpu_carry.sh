#!/usr/bin/env bash
# Fill .gpucarry/ (git-ignored) with what benchmarks/h200_session.sh installs on the H200:
# FlashInfer and its runtime deps, pydantic, and vLLM 0.25.1's compiled FA3 / FlashMLA
# extensions (xz). FA4's CuTe-DSL runtime (part1, 92 MB) is left out: vLLM runs FA3 on
# Hopper, and the carry (working tree + carried paths) must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpucarry/' .git/info/exclude || echo '/.gpucarry/' >> .git/info/exclude
grep -qx '/.gpucache/' .git/info/exclude || echo '/.gpucache/' >> .git/info/exclude
mkdir -p .gpucarry
for name in annotated_types apache_tvm_ffi cuda_tile flashinfer_python pydantic-2 pydantic_core typing_inspection torch_c_dlpack_ext; do
  cp .gpuwheels/part2/${name}*.whl .gpucarry/
done
cp .gpuwheels/part3/*.so.xz .gpuwheels/part3/VERSIONS .gpucarry/
du -sh .gpucarry
