"""The fresh process of ``oracle.fresh.run_fresh``: ``python child.py CALL.json``.

CALL.json names the tool file, the function, its keyword arguments and the answer file.
The tool is imported by its file (tools/ first on ``sys.path``, so its sibling imports and
``import oracle`` resolve as when it runs as a script); the answer is written to a
partial file and renamed, so the parent reads a whole answer or none.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def main(call_file: str) -> int:
    call = json.loads(Path(call_file).read_text(encoding="utf-8"))
    tool = Path(call["tool"])
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p != here]
    sys.path.insert(0, str(tool.parent))
    spec = importlib.util.spec_from_file_location(tool.stem, tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[tool.stem] = module
    spec.loader.exec_module(module)
    answer = getattr(module, call["function"])(**call["arguments"])
    target = Path(call["answer"])
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(answer), encoding="utf-8")
    partial.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
