"""Record the real vLLM engine start-ups as goldens: the logs that
benchmarks/h200_engine_session.sh brought back and the figures vLLM states in them.

    python tools/record_startups.py STARTUP-LOGS.tar.xz      # from the device call's $OUT

writes tests/golden/vllm_startups/logs/NAME.log (each start-up's whole log, as vLLM wrote
it at DEBUG level) and tests/golden/vllm_startups/figures.json (per deployment: vLLM's
release, the run's status and each figure selector/compare/startup_log.py reads, with its line).
The one command that re-records them on an H200 (staging first, see the script):

    bash benchmarks/h200_engine_session.sh run      # then this tool on $OUT/startup-logs.tar.xz
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

from oracle import REPO as ROOT

from selector.compare.startup_log import parse_startup_log

GOLDEN = ROOT / "tests" / "golden" / "vllm_startups"


def figures(text: str, name: str) -> dict[str, object]:
    log = parse_startup_log(text, name)
    return {"version": log.version,
            "backends": [b.value for b in log.backends],
            "facts": {k: v.value for k, v in sorted(log.facts.items()) if k != "version"},
            "lines": {k: v.line for k, v in sorted(log.facts.items()) if k != "version"},
            "refusals": [r.value for r in log.refusals]}


def main(argv: list[str]) -> int:
    archive = Path(argv[0])
    (GOLDEN / "logs").mkdir(parents=True, exist_ok=True)
    # a session that re-records some start-ups keeps the others' figures
    previous = GOLDEN / "figures.json"
    out: dict[str, object] = (json.loads(previous.read_text(encoding="utf-8"))["startups"]
                              if previous.is_file() else {})
    with tarfile.open(archive) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        status = {row["name"]: row for row in json.load(
            io.TextIOWrapper(tar.extractfile(members["startups.json"]) or io.BytesIO(b"[]")))}
        for file_name, member in sorted(members.items()):
            if not file_name.endswith(".log"):
                continue
            name = file_name[:-4]
            text = (tar.extractfile(member) or io.BytesIO()).read().decode("utf-8", "replace")
            (GOLDEN / "logs" / file_name).write_text(text, encoding="utf-8")
            out[name] = {"status": status.get(name, {}).get("status"), **figures(text, name)}
    (GOLDEN / "figures.json").write_text(json.dumps(
        {"about": "vLLM's own start-up figures per deployment (tools/record_startups.py from "
                  "the logs in logs/; deployments.json says how each started)",
         "startups": dict(sorted(out.items()))}, indent=1) + "\n", encoding="utf-8")
    print(f"recorded {len(out)} start-ups into {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
