"""Start the real vLLM engine for each recorded deployment and keep its start-up log.

Run on a GPU machine with vLLM installed (benchmarks/h200_engine_session.sh does it on the
H200 with vLLM 0.25.1): every deployment starts in its own process, as

    vllm.LLM(model=DIR, load_format="dummy", skip_tokenizer_init=True, **engine_args)

with DIR holding the deployment's config.json (random weights, no download), at vLLM's
DEBUG log level so the memory profile (weights, peak activation, non-torch memory) is in
the log. The log of each start-up lands in OUT/NAME.log; the figures vLLM states in it are
read by ``attn-select verify`` (selector/compare/startup_log.py) into tests/golden/
vllm_startups/ (tools/record_startups.py).

    python3 benchmarks/vllm_startups.py OUT [NAME...]     # all, or the named ones
    python3 benchmarks/vllm_startups.py --list
"""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENTS = ROOT / "tests" / "golden" / "vllm_startups" / "deployments.json"


DONE = "Free memory on device ("
"""vLLM 0.25.1's DEBUG summary of the start-up's memory (v1/worker/gpu_worker.py:813-835)."""


def deployments() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(DEPLOYMENTS.read_text())["deployments"]
    return data


def environment() -> dict[str, str]:
    """The environment every start-up runs with (deployments.json says why)."""
    data: dict[str, str] = json.loads(DEPLOYMENTS.read_text()).get("environment", {})
    return data


def model_dir(spec: dict[str, Any], into: Path) -> Path:
    """A folder with the deployment's config.json (its source file with the stated edits)."""
    config = json.loads((ROOT / spec["config"]).read_text())
    for dotted, value in spec.get("config_edits", {}).items():
        node = config
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    into.mkdir(parents=True, exist_ok=True)
    (into / "config.json").write_text(json.dumps(config, indent=1))
    return into


def start_one(name: str) -> None:
    """In this process: start the engine for ``name`` and leave (no teardown)."""
    spec = deployments()[name]
    folder = model_dir(spec, Path(tempfile.mkdtemp(prefix=f"{name}-")))
    # a start-up that stops making progress leaves every thread's stack in its log
    faulthandler.dump_traceback_later(float(os.environ.get("STARTUP_STACKS_AFTER_S", "120")),
                                      repeat=True)
    import vllm

    print(f"STARTUP {name}: vllm {vllm.__version__}, args {json.dumps(spec['engine_args'])}",
          flush=True)
    started = time.time()
    vllm.LLM(model=str(folder), load_format="dummy", skip_tokenizer_init=True,
             **spec["engine_args"])
    print(f"STARTUP {name}: engine ready in {time.time() - started:.1f} s", flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        print("\n".join(deployments()))
        return 0
    if argv[:1] == ["--one"]:
        start_one(argv[1])
        return 0
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(deployments())
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **environment()}
    budget = float(os.environ.get("STARTUP_BUDGET_S", "540"))
    begun = time.time()
    rows = []
    for name in names:
        spec = deployments()[name]
        left = budget - (time.time() - begun)
        limit = min(float(spec.get("timeout_s", 150)), left)
        if limit < 30:
            rows.append((name, "not run (session budget)", 0.0))
            continue
        started = time.time()
        path = out / f"{name}.log"
        with open(path, "w") as log:
            stacks = {"STARTUP_STACKS_AFTER_S": str(max(20.0, limit - 15))}
            process = subprocess.Popen([sys.executable, __file__, "--one", name],
                                       env={**env, **stacks},
                                       stdout=log, stderr=subprocess.STDOUT)
            status = f"timeout {limit:.0f} s"
            while time.time() - started < limit:
                code = process.poll()
                if code is not None:
                    status = "ready" if code == 0 else f"exit {code}"
                    break
                if DONE in path.read_text(errors="replace"):
                    # every figure is logged once this line is (gpu_worker.py:835, after the
                    # CUDA-graph capture); the kernel warm-up after it is not recorded
                    time.sleep(1)
                    status = "figures logged"
                    break
                time.sleep(1)
            if process.poll() is None:
                process.kill()
                process.wait()
        rows.append((name, status, time.time() - started))
        print(f"{name:28s} {status:18s} {time.time() - started:6.1f} s", flush=True)
    (out / "startups.json").write_text(json.dumps(
        [{"name": n, "status": s, "wall_s": round(w, 1)} for n, s, w in rows], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
