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
#   ATTN_SELECT_IGNORE   warning codes to acknowledge (--ignore), separated by commas or
#                        whitespace
#   ATTN_SELECT_ARGS     further `attn-select check` arguments for every run, split as a
#                        shell does (e.g. "--model ./models/llama"; not --format/--output)
#   ATTN_SELECT_FORMAT   the report printed in the step's log (default: github, i.e.
#                        annotations; any `check --format`)
#   ATTN_SELECT_COMMAND_FILE  the file that holds the command (SARIF results and
#                        annotations point there; default: the workflow file, from
#                        GITHUB_WORKFLOW_REF, when it is in the working directory)
#   ATTN_SELECT_SARIF    path of the SARIF file to write ("" = none)
#   ATTN_SELECT_BIN      the attn-select executable (default: attn-select)
#   ATTN_SELECT_PYTHON   the Python that splits the command (default: python3)
# Writes GitHub annotations to stdout, the markdown report to $GITHUB_STEP_SUMMARY,
# and `exit-code` / `sarif-file` to $GITHUB_OUTPUT when those are set.
set -uo pipefail

bin="${ATTN_SELECT_BIN:-attn-select}"

# split_words TEXT WHAT: TEXT split as a shell does (Python's shlex) into the array
# `words`, never word splitting on spaces: a quoted --speculative-config
# '{"method": "ngram", ...}' stays one argument; WHAT names the input in the error
split_words() {
  words=()
  local split_script='import os, shlex, sys
what = os.environ["ATTN_SELECT_WHAT"]
try:
    words = shlex.split(os.environ["ATTN_SELECT_SPLIT"])
except ValueError as exc:
    sys.exit("::error title=attn-select::the " + what + " input cannot be split as a shell would: " + str(exc))
sys.stdout.write("".join(w + "\0" for w in words))'
  local split_output word
  split_output="$(mktemp)"
  if ! ATTN_SELECT_SPLIT="$1" ATTN_SELECT_WHAT="$2" \
      "${ATTN_SELECT_PYTHON:-python3}" -c "$split_script" > "$split_output"; then
    rm -f "$split_output"
    return 1
  fi
  while IFS= read -r -d '' word; do
    words+=("$word")
  done < "$split_output"
  rm -f "$split_output"
}

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
ignore_codes="${ATTN_SELECT_IGNORE:-}"
read -r -a ignored <<< "${ignore_codes//,/ }"
for code in "${ignored[@]}"; do
  common+=(--ignore "$code")
done
if [ -n "${ATTN_SELECT_ARGS:-}" ]; then
  split_words "$ATTN_SELECT_ARGS" args || exit 2
  common+=("${words[@]}")
fi

targets=()
if [ -n "${ATTN_SELECT_COMMAND:-}" ]; then
  split_words "$ATTN_SELECT_COMMAND" command || exit 2
  command_words=("${words[@]}")
  # the workflow that holds the command: owner/repo/PATH@ref in GITHUB_WORKFLOW_REF
  command_file="${ATTN_SELECT_COMMAND_FILE:-}"
  if [ -z "$command_file" ] && [ -n "${GITHUB_WORKFLOW_REF:-}" ]; then
    workflow="${GITHUB_WORKFLOW_REF%%@*}"
    workflow="${workflow#"${GITHUB_REPOSITORY:-}"/}"
    [ -f "$workflow" ] && command_file="$workflow"
  fi
  if [ -n "$command_file" ]; then
    common+=(--command-file "$command_file")
  fi
  targets=(-- "${command_words[@]}")
elif [ "${#files[@]}" -gt 0 ]; then
  targets=("${files[@]}")
else
  echo "::error title=attn-select::give the files input (deployment files or globs) or a command"
  exit 2
fi

"$bin" check "${common[@]}" --format "${ATTN_SELECT_FORMAT:-github}" "${targets[@]}"
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
