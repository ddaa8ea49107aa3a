#!/usr/bin/env bash
# The fleet smoke's GPU session (README "Fleet smoke on a Ray cluster"): on the H200
# machine, a single-node Ray cluster runs the fleet smoke for the H200 row with the real
# kernels, next to a local `smoke` of the same file, and the verdicts are compared.
#
# Ray (2.60.0, cp312 manylinux, ~79 MB) travels split in three parts of <= 30 MB, one per
# call: .gpuwheels/ray/p1 (split_aa + jsonschema, jsonschema-specifications, referencing,
# rpds-py), p2 (split_ab), p3 (split_ac + ray.sha256). Calls 1 and 2 only copy their part:
#     mkdir -p ~/ray-stage && cp .gpuwheels/ray/p1/* ~/ray-stage/     (then p2)
# Call 3 carries p3 and runs this script. The kernel libraries come first, as
# ../shared/gpu/README.md brings them (~/gpu-env.sh); with .gpuwheels/part2 (part1 staged
# in ~/gpu-stage) or .gpuwheels/part3 (vLLM's FA3 / FlashMLA) carried too, this script
# runs their installers itself.
# Output: $OUT/local.json, $OUT/fleet.json, $OUT/fleet.txt, $OUT/fleet.md, $OUT/fleet.xml.
set -u
OUT=${OUT:-/tmp/ray-out}
CONFIG=${CONFIG:-examples/llama-3.1-8b-h200.yaml}
STAGE=~/ray-stage
SITE=~/ray-site
WHEEL=ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
mkdir -p "$OUT" "$STAGE"
T0=$(date +%s)
log() { echo; echo "== $* (t=$(( $(date +%s) - T0 )) s)"; }
left() { local r=$(( 570 - ($(date +%s) - T0) )); [ "$r" -lt 1 ] && r=1; [ "$r" -lt "$1" ] && echo "$r" || echo "$1"; }

log "kernel libraries"
if [ ! -f ~/gpu-env.sh ] && [ -f .gpuwheels/part2/install-on-device ]; then
  bash .gpuwheels/part2/install-on-device 2>&1 | tail -2   # part1 copied to ~/gpu-stage before
fi
[ -f ~/gpu-env.sh ] || { echo "no ~/gpu-env.sh: install the kernel libraries first (../shared/gpu/README.md)"; exit 4; }
. ~/gpu-env.sh
if [ -z "${VLLM_KERNELS_DIR:-}" ] && [ -f .gpuwheels/part3/install-vllm-kernels ]; then
  bash .gpuwheels/part3/install-vllm-kernels 2>&1 | tail -2 && . ~/gpu-env.sh
fi
echo "VLLM_KERNELS_DIR=${VLLM_KERNELS_DIR:-unset}"

log "Ray wheel: reassemble and install into $SITE"
for part in .gpuwheels/ray/p1 .gpuwheels/ray/p2 .gpuwheels/ray/p3; do
  [ -d "$part" ] && cp "$part"/* "$STAGE"/
done
if [ ! -f "$SITE/ray/__init__.py" ]; then
  for piece in aa ab ac; do
    [ -f "$STAGE/$WHEEL.split_$piece" ] || { echo "missing $WHEEL.split_$piece: copy .gpuwheels/ray/p1, p2 and p3 to $STAGE first"; exit 4; }
  done
  cat "$STAGE/$WHEEL".split_* > "$STAGE/$WHEEL"
  (cd "$STAGE" && sha256sum -c ray.sha256) || exit 4
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
    "$STAGE/$WHEEL" "$STAGE"/jsonschema*.whl "$STAGE"/referencing*.whl "$STAGE"/rpds_py*.whl \
    2>&1 | grep -v "^WARNING: Target directory" | tail -3
fi
export PYTHONPATH=$PWD:$SITE:${PYTHONPATH:-} RAY_USAGE_STATS_ENABLED=0 COLUMNS=170
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 PATH=$SITE/bin:$PATH
python3 -c "import ray, torch; print('ray', ray.__version__, '| torch', torch.__version__, torch.cuda.get_device_name(0))" || exit 4
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv

log "local smoke $CONFIG"
timeout "$(left 280)" python3 -m selector smoke "$CONFIG" --no-measure --format json > "$OUT/local.json"
echo "local exit $?"

log "fleet smoke $CONFIG --ray local --device H200"
timeout "$(left 250)" python3 -m selector smoke "$CONFIG" --ray local --device H200 --no-measure --format json > "$OUT/fleet.json"
echo "fleet exit $?"

log "fleet report and verdicts compared"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from rich.console import Console
from selector.fleet.outcome import FleetReport
from selector.fleet.render import render_junit, render_markdown, render_table

out = Path(sys.argv[1])
local = json.loads((out / "local.json").read_text() or "{}")
fleet = FleetReport.from_json(json.loads((out / "fleet.json").read_text()))
console = Console(width=170, record=True)
console.print(render_table(fleet))
(out / "fleet.txt").write_text(console.export_text())
(out / "fleet.md").write_text(render_markdown(fleet))
(out / "fleet.xml").write_text(render_junit(fleet))
row = next((o for o in fleet.outcomes if o.device == "H200"), None)
remote = (row.report if row is not None else None) or {}

def verdicts(report):
    return {"status": report.get("status"), "passed": report.get("passed"),
            "groups": {g["plan"]["name"]: (g.get("status"), g.get("passed"), g.get("provider"),
                                           [c["name"] for c in g["checks"] if not c["passed"]])
                       for g in report.get("groups", [])}}

a, b = verdicts(local), verdicts(remote)
print("local :", json.dumps(a, indent=1))
print("fleet :", json.dumps(b, indent=1))
print("device:", local.get("device"), "|", remote.get("device"), "| node", row and row.node)
print("verdict time: local", local.get("elapsed_s"), "s, fleet row", row and row.elapsed_s, "s")
print("VERDICTS EQUAL" if a == b and a["groups"] else "VERDICTS DIFFER")
sys.exit(0 if a == b and a["groups"] else 1)
PY
echo "compare exit $?"
log done
