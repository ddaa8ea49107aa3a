#!/usr/bin/env bash
# H200 session for the TP / DCP shard check (attn-select smoke on tensor- and
# decode-context-parallel deployments); the reports and a summary land under $OUT.
#
# Staging (on the development machine, once), as for benchmarks/h200_session.sh:
#   ../shared/gpu/fetch-wheels .gpuwheels && ../shared/gpu/fetch-vllm-kernels .gpuwheels
#   benchmarks/stage_gpu_carry.sh          # fills .gpucarry/ (git-ignored)
# Then one device call from the repo root, carrying .gpucarry (and .gpucache if saved):
#   bash benchmarks/h200_parallel_session.sh
# It runs, each step under its own time limit:
#   1. DCP 2 and DCP 4 (GQA 32/2 heads at TP 8) for FLASH_ATTN (vLLM's FA3) and
#      FLASHINFER, every rank in turn on the one GPU, merged by LSE;
#   2. TP 2 / 4 / 8 head shards of Llama-3.1-70B-like attention (64/8 heads), and TP 16
#      (each KV head replicated on 2 ranks);
#   3. the injected LSE-base mix-up (must exit 3);
#   4. DCP 2 over NCCL, one process per GPU, when the machine has 2+ GPUs (else "not run");
#   5. pytest tests/parallel (CPU tests and the gpu-marked ones).
set -u
OUT=${OUT:-/tmp/h200-parallel-out}
BUDGET=${BUDGET:-570}
. benchmarks/gpu_setup.sh
export NCCL_NVLS_ENABLE=0
python3 -c "import torch, flashinfer; print('torch', torch.__version__, '| flashinfer', flashinfer.__version__, '|', torch.cuda.device_count(), 'x', torch.cuda.get_device_name(0))"

shard() {  # shard LABEL EXPECTED_EXIT FILE [ARGS...]: the text report and its exit status
  local label=$1 expected=$2 file=$3; shift 3
  log "$label: attn-select smoke $file $*"
  timeout "$(left 200)" python3 -m selector smoke "$file" "$@" 2>&1 | tee "$OUT/$label.txt"
  local code=${PIPESTATUS[0]}
  echo "$label: exit $code (expected $expected): $([ "$code" = "$expected" ] && echo OK || echo UNEXPECTED)" | tee -a "$OUT/summary.txt"
}
for d in 2 4; do
  shard "dcp$d" 0 "examples/parallel/gqa-32q-2kv-h200-tp8-dcp$d.yaml"
done
for t in 2 4 8 16; do
  shard "tp$t" 0 "examples/parallel/llama-3.1-70b-attn-h200-tp$t.yaml" --shards only
done
shard "dcp2-lse-mixup" 3 "examples/parallel/gqa-32q-2kv-h200-tp8-dcp2.yaml" --merge-lse-base swapped
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  shard "dcp2-nccl-2gpus" 0 "examples/parallel/gqa-32q-2kv-h200-tp8-dcp2.yaml" --gpus 2
else
  echo "dcp2-nccl-2gpus: not run (one GPU on this machine)" | tee -a "$OUT/summary.txt"
fi
log "pytest tests/parallel (CPU + gpu-marked)"
timeout "$(left 200)" python3 -m pytest tests/parallel -q -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/pytest.txt"
log summary
cat "$OUT/summary.txt"
log done
