#!/usr/bin/env bash
# Build every recorder's environment on a fresh development machine: one oracle venv per
# profiled vLLM release (the oracle's own setup.sh: CPU torch, then the release's pinned
# requirements, --no-deps) and the ORACLE_EXTRA_PATH folder of pure-Python packages that
# model modules import and the oracle venvs lack (tools/oracle/models.py names them).
#
#   bash tools/setup_oracle_envs.sh [RELEASE ...]
#
#   ORACLE_DIR   the oracle instrument (default: ../shared/oracle next to the repository,
#                as every recorder finds it)
#   VENVS        where the venvs go, as oracle-RELEASE (default: ../.venvs)
#   EXTRA        the extra-path folder (default: ../oracle-extra)
#
# No RELEASE: every release the instrument has a requirements file for. A venv whose
# python already imports vllm is kept. About 2 minutes and 4 GiB per release. Then run
# recorders as the docs show, with ORACLE_DIR and ORACLE_EXTRA_PATH=$EXTRA set.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
# the harness's own lookup (tools/oracle/locate.py oracle_dir: $ORACLE_DIR, else the default)
ORACLE_DIR=$(cd "$REPO/tools" && python3 -c 'import oracle; print(oracle.oracle_dir())') || exit 2
VENVS=${VENVS:-$REPO/../.venvs}
EXTRA=${EXTRA:-$REPO/../oracle-extra}
releases=("$@")
if [ ${#releases[@]} -eq 0 ]; then
  releases=(0.33.0)
  for reqs in "$ORACLE_DIR"/requirements-oracle-*.txt; do
    name=$(basename "$reqs" .txt)
    releases+=("${name#requirements-oracle-}")
  done
fi
mkdir -p "$VENVS"
for release in "${releases[@]}"; do
  venv="$VENVS/oracle-$release"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm" 2>/dev/null; then
    echo "kept $venv"
    continue
  fi
  bash "$ORACLE_DIR/setup.sh" "$release" "$venv" > "$VENVS/setup-$release.log" 2>&1 \
    || { echo "vLLM $release: setup failed, see $VENVS/setup-$release.log" >&2; exit 1; }
  echo "built $venv"
done
# Model modules' imports (tools/oracle/models.py; docs/models.md lists the multimodal ones):
# torchvision's compiled ops need not load (the harness stubs its fake-op registrations);
# num2words: transformers' SmolVLMProcessor (tools/encoder_oracle.py).
newest="$VENVS/oracle-${releases[0]}"
"$newest/bin/pip" install -q --no-deps --target "$EXTRA" --upgrade \
  torchvision==0.29.0 compressed-tensors loguru mistral_common tiktoken jsonschema \
  referencing rpds-py jsonschema-specifications pydantic_extra_types pycountry timm num2words
# torchaudio (Cohere-ASR's processor imports torchaudio.functional): no build for the venvs'
# torch, so the newest one's Python code without its compiled extension, which torchaudio
# then does not load (torchaudio/_extension/utils.py _load_lib: no library file, no load)
"$newest/bin/pip" install -q --no-deps --target "$EXTRA" --upgrade torchaudio==2.11.1
rm -f "$EXTRA"/torchaudio/lib/*.so
echo "export ORACLE_DIR=$ORACLE_DIR ORACLE_EXTRA_PATH=$EXTRA"
