"""Extract and check the vLLM source lines the kernel call contract cites.

Every argument in ``schemas/engines/vllm-X/kernel-calls.yaml`` names the vLLM source line
its value is read from (``source: path:line``) and text that must appear there
(``quote``). This tool reads those lines from a vLLM wheel (or an unpacked wheel) and

* ``extract`` -- writes them to ``tests/fixtures/kernel_contract/vllm-X.json`` (the CI test
  checks the contract against that file, since CI cannot download a wheel);
* ``check``   -- re-reads a wheel and fails if a quote is missing from its cited line or
  the recorded lines differ from the wheel's;
* ``relocate`` -- prints, for each quote not on its cited line, the nearest line that has it.

    pip download --no-deps vllm==0.25.1 -d /tmp/w && \
    python tools/kernel_contract_facts.py check --engine 0.25.1 --wheel /tmp/w/vllm-0.25.1-*.whl
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "kernel_contract"


def contract_path(engine: str) -> Path:
    return ROOT / "schemas" / "engines" / f"vllm-{engine}" / "kernel-calls.yaml"


def citations(node: Any, where: str = "") -> Iterator[tuple[str, str, int | None, str]]:
    """``(where, path, line or None, quote)`` for every cited item in the contract."""
    if isinstance(node, dict):
        source, quote = node.get("source"), node.get("quote")
        if isinstance(source, str) and isinstance(quote, str):
            path, _, line = source.partition(":")
            yield where, path, int(line) if line else None, quote
        for key, value in node.items():
            yield from citations(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from citations(value, f"{where}[{index}]")


class Source:
    """Files of a vLLM wheel (zip) or an unpacked tree, read on demand."""

    def __init__(self, location: Path) -> None:
        self.location = location
        self.zip = zipfile.ZipFile(location) if location.is_file() else None
        self.cache: dict[str, list[str]] = {}

    def lines(self, path: str) -> list[str]:
        if path not in self.cache:
            if self.zip is not None:
                text = self.zip.read(path).decode("utf-8")
            else:
                text = (self.location / path).read_text(encoding="utf-8")
            self.cache[path] = text.splitlines()
        return self.cache[path]


def extract(engine: str, source: Source, wheel_name: str) -> dict[str, Any]:
    contract = yaml.safe_load(contract_path(engine).read_text(encoding="utf-8"))
    lines: dict[str, str] = {}
    problems: list[str] = []
    for where, path, line, quote in citations(contract):
        text = source.lines(path)
        if line is None:
            if not any(quote in row for row in text):
                problems.append(f"{where}: {quote!r} not found in {path}")
            continue
        row = text[line - 1] if 0 < line <= len(text) else ""
        lines[f"{path}:{line}"] = row
        if quote not in row:
            problems.append(f"{where}: {quote!r} not on {path}:{line} ({row.strip()!r})")
    return {"engine": f"vllm=={engine}", "wheel": wheel_name, "lines": dict(sorted(lines.items())),
            "problems": problems}


def relocate(engine: str, source: Source) -> list[str]:
    contract = yaml.safe_load(contract_path(engine).read_text(encoding="utf-8"))
    out = []
    for where, path, line, quote in citations(contract):
        if line is None:
            continue
        text = source.lines(path)
        if 0 < line <= len(text) and quote in text[line - 1]:
            continue
        hits = [i + 1 for i, row in enumerate(text) if quote in row]
        best = min(hits, key=lambda i: abs(i - line)) if hits else None
        out.append(f"{where}: {path}:{line} -> {best} ({len(hits)} hits) {quote!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["extract", "check", "relocate"])
    parser.add_argument("--engine", required=True, help="vLLM version, e.g. 0.25.1")
    parser.add_argument("--wheel", type=Path, required=True,
                        help="the vLLM wheel, or a folder it was unpacked into")
    args = parser.parse_args(argv)
    source = Source(args.wheel)
    if args.command == "relocate":
        for row in relocate(args.engine, source):
            print(row)
        return 0
    facts = extract(args.engine, source, args.wheel.name)
    for problem in facts["problems"]:
        print(f"error: {problem}", file=sys.stderr)
    fixture = FIXTURES / f"vllm-{args.engine}.json"
    if args.command == "extract":
        if facts["problems"]:
            return 1
        fixture.parent.mkdir(parents=True, exist_ok=True)
        del facts["problems"]
        fixture.write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {fixture.relative_to(ROOT)}: {len(facts['lines'])} lines")
        return 0
    recorded = json.loads(fixture.read_text(encoding="utf-8"))["lines"]
    changed = [key for key, row in facts["lines"].items() if recorded.get(key) != row]
    for key in changed:
        print(f"error: {key} differs from {fixture.name}", file=sys.stderr)
    ok = not facts["problems"] and not changed
    print(f"{'ok' if ok else 'FAILED'}: {len(facts['lines'])} cited lines of vllm=={args.engine}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
