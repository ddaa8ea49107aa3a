#!/usr/bin/env bash
# Generate a config sample, run the vLLM oracle on it and convert the result
# to sweep JSON Lines.
#
#   tools/run_oracle_sample.sh FAMILY N SEED VLLM_VERSION OUT_PREFIX
#   e.g. tools/run_oracle_sample.sh standard 20000 1 0.33.0 /work/oracle-data/vllm-0.33.0/standard
#
# Writes OUT_PREFIX.inputs.jsonl (configs), OUT_PREFIX.oracle.json (the
# oracle's raw output) and OUT_PREFIX.sweep.jsonl (converted; for 0.25.1 with
# the kv_cache report).  ORACLE_DIR (default ../shared/oracle next to the
# repository, as tools/oracle/ locates it) holds oracle.py and its venvs (.venv
# for 0.33.0, .venv-VERSION otherwise).
set -euo pipefail
FAMILY=$1 N=$2 SEED=$3 VERSION=$4 PREFIX=$5
HERE=$(cd "$(dirname "$0")" && pwd)
ORACLE_DIR=${ORACLE_DIR:-$HERE/../../shared/oracle}
[ -f "$ORACLE_DIR/oracle.py" ] || { echo "no oracle.py in $ORACLE_DIR: set ORACLE_DIR" >&2; exit 2; }
if [ "$VERSION" = "0.33.0" ]; then VENV=.venv; else VENV=.venv-$VERSION; fi
KV=()
if [ "$VERSION" != "0.33.0" ]; then KV=(--kv-cache); fi
mkdir -p "$(dirname "$PREFIX")"
python3 "$HERE/make_sample.py" --family "$FAMILY" --n "$N" --seed "$SEED" \
  --vllm-version "$VERSION" -o "$PREFIX.inputs.jsonl"
python3 "$HERE/make_sample.py" --family "$FAMILY" --n "$N" --seed "$SEED" \
  --vllm-version "$VERSION" --json-list -o "$PREFIX.inputs.json"
(cd "$ORACLE_DIR" && "$VENV/bin/python" oracle.py "$PREFIX.inputs.json" \
  -o "$PREFIX.oracle.json" --compact 2> "$PREFIX.oracle.stderr")
tail -n 1 "$PREFIX.oracle.stderr"
python3 "$HERE/oracle_to_sweep.py" "$PREFIX.oracle.json" -o "$PREFIX.sweep.jsonl" "${KV[@]}"
rm -f "$PREFIX.inputs.json"
wc -l "$PREFIX.sweep.jsonl"
