#!/usr/bin/env bash
# The script of the attn-select GitHub Action (action.yml); runs locally too.
#
# Inputs come as environment variables (the action maps its inputs to them):
#   ATTN_SELECT_FILES    deployment files or globs, whitespace-separated (required
#                        unless ATTN_SELECT_COMMAND is given)
#   ATTN_SELECT_COMMAND  a `vllm serve ...` command line to check instead of files, split
#                        as a shell does (quotes keep a JSON flag value in one piece)
#   ATTN_SELECT_DEVICES  devices, separated by commas or whitespace (fleet view; required
#                        for a command)
#   ATTN_SELECT_STRICT   "true" turns warnings into failures
#   ATTN_SELECT_ENGINE   engine profile, e.g. vllm==0.33.0 (default: newest)
#   ATTN_SELECT_SARIF    path of the SARIF file to write ("" = none)
#   ATTN_SELECT_BIN      the attn-select executable (default: attn-select)
#   ATTN_SELECT_PYTHON   the Python that splits the command (default: python3)
# Writes GitHub annotations to stdout, the markdown report to $GITHUB_STEP_SUMMARY,
# and `exit-code` / `sarif-file` to $GITHUB_OUTPUT when those are set.
set -uo pipefail

bin="${ATTN_SELECT_BIN:-attn-select}"
read -r -a files <<< "${ATTN_SELECT_FILES:-}"
if [[ "${ATTN_SELECT_DEVICES:-}" == *,* ]]; then
  IFS=',' read -r -a raw_devices <<< "$ATTN_SELECT_DEVICES"  # names with spaces: "RTX 5090, H100"
else
  read -r -a raw_devices <<< "${ATTN_SELECT_DEVICES:-}"
fi
devices=()
for device in "${raw_devices[@]}"; do
  device="${device#"${device%%[![:space:]]*}"}"
  device="${device%"${device##*[![:space:]]}"}"
  [ -n "$device" ] && devices+=("$device")
done

common=()
for device in "${devices[@]}"; do
  common+=(--device "$device")
done
if [ "${ATTN_SELECT_STRICT:-false}" = "true" ]; then
  common+=(--strict)
fi
if [ -n "${ATTN_SELECT_ENGINE:-}" ]; then
  common+=(--engine "$ATTN_SELECT_ENGINE")
fi

targets=()
if [ -n "${ATTN_SELECT_COMMAND:-}" ]; then
  # shell-style splitting (Python's shlex), never word splitting on spaces: a quoted
  # --speculative-config '{"method": "ngram", ...}' stays one argument
  command_words=()
  split_script='import os, shlex, sys
try:
    words = shlex.split(os.environ["ATTN_SELECT_COMMAND"])
except ValueError as exc:
    sys.exit(f"::error title=attn-select::the command input cannot be split as a shell would: {exc}")
sys.stdout.write("".join(w + "\0" for w in words))'
  split_output="$(mktemp)"
  if ! "${ATTN_SELECT_PYTHON:-python3}" -c "$split_script" > "$split_output"; then
    rm -f "$split_output"
    exit 2
  fi
  while IFS= read -r -d '' word; do
    command_words+=("$word")
  done < "$split_output"
  rm -f "$split_output"
  targets=(-- "${command_words[@]}")
elif [ "${#files[@]}" -gt 0 ]; then
  targets=("${files[@]}")
else
  echo "::error title=attn-select::give the files input (deployment files or globs) or a command"
  exit 2
fi

"$bin" check "${common[@]}" --format github "${targets[@]}"
status=$?

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  "$bin" check "${common[@]}" --format markdown "${targets[@]}" >> "$GITHUB_STEP_SUMMARY" 2>/dev/null || true
fi
if [ -n "${ATTN_SELECT_SARIF:-}" ]; then
  "$bin" check "${common[@]}" --format sarif --output "$ATTN_SELECT_SARIF" "${targets[@]}" 2>/dev/null || true
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$status" >> "$GITHUB_OUTPUT"
  if [ -n "${ATTN_SELECT_SARIF:-}" ]; then
    echo "sarif-file=$ATTN_SELECT_SARIF" >> "$GITHUB_OUTPUT"
  fi
fi
exit "$status"
