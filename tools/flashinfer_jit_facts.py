"""Record and check what ``schemas/flashinfer-jit.yaml`` and its tests read from a FlashInfer wheel.

Nothing of FlashInfer's source is written into the repository:

* ``python tools/flashinfer_jit_facts.py WHEEL`` records the single lines the data cites
  (``source: path:line`` with a ``quote`` on it) into
  ``tests/fixtures/flashinfer_jit/flashinfer-X.json``;
* ``python tools/flashinfer_jit_facts.py --check WHEEL`` writes nothing: it renders, in
  memory, FlashInfer's kernel translation units of one batch-prefill module per family (fa2
  and fa3, bf16, head 128, int32 indices, no window, no soft cap) from the wheel's own
  templates with the arguments ``flashinfer/jit/attention/modules.py``
  (``gen_customize_batch_prefill_module``) gives them, and asserts that the stand-ins
  (``tests/fixtures/flashinfer_jit/standins-X.yaml``, written by attn-select) state the same
  includes, constants, kernel templates, template arguments by position, parameters and
  mask-mode literals; that the cited lines of the host and binding files hold the symbols the
  stand-ins name; and that the recorded cited lines are the wheel's.

The tests select from the stand-ins' texts (:func:`standin_module`). WHEEL may also be an
installed package's ``site-packages`` folder (the GPU machine's FlashInfer:
``tests/smoke/test_flashinfer_jit_cpu.py`` checks it when FlashInfer imports).

    python tools/flashinfer_jit_facts.py --check flashinfer_python-0.6.13-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

from selector.smoke.flashinfer_jit import parse_unit

__all__ = ["FlashInferFiles", "check", "cited_lines", "load_standins", "render_units",
           "standin_module"]

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "schemas" / "flashinfer-jit.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "flashinfer_jit"
VERSION = "0.6.13"
# modules.py's kwargs for bf16 q/kv/o, int32 indices, head 128, no rope, no window/soft cap
COMMON = {"dtype_q": "nv_bfloat16", "dtype_kv": "nv_bfloat16", "dtype_o": "nv_bfloat16",
          "idtype": "int32_t", "head_dim_qk": 128, "head_dim_vo": 128,
          "pos_encoding_mode": "PosEncodingMode::kNone", "use_sliding_window": "false",
          "use_logits_soft_cap": "false", "use_fp16_qk_reduction": "false"}
NOTICE = ("// attn-select stand-in, NOT FlashInfer's code: it states only what\n"
          "// selector/smoke/flashinfer_jit.py reads from FlashInfer {version}'s\n// {what}\n"
          "// (tests/fixtures/flashinfer_jit/standins-{version}.yaml; checked against the wheel\n"
          "// by tools/flashinfer_jit_facts.py --check).\n")


class FlashInferFiles:
    """A FlashInfer wheel, or the folder an installed one lies in (``site-packages``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path) if path.is_file() else None

    def text(self, name: str) -> str:
        if self.zip is not None:
            return self.zip.read(name).decode("utf-8")
        return (self.path / name).read_text(encoding="utf-8")


def load_standins(version: str = VERSION) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (FIXTURES / f"standins-{version}.yaml").read_text(encoding="utf-8"))
    return data


def _span(stands_for: str) -> tuple[str, int, int]:
    path, _, lines = stands_for.partition(":")
    first, _, last = lines.partition("-")
    return path, int(first), int(last or first)


def standin_module(family: str, version: str = VERSION) -> dict[str, str]:
    """The stand-in sources (file name -> text) of the family's batch-prefill module, in the
    order FlashInfer lists them (kernel units by mask mode, paged then ragged; host; binding)."""
    data = load_standins(version)
    facts = data["families"][family]
    modes: list[str] = data["mask_modes"]["values"]
    what = (f"{family} kernel units ({', '.join(unit['stands_for'] for unit in facts['kernel_units'])}"
            f", rendered by {facts['rendered_by']})")
    kernel_notice = NOTICE.format(version=version, what=what)
    units: dict[str, str] = {}
    for index, mode in enumerate(modes):
        for unit in facts["kernel_units"]:
            constants = "".join(f"constexpr auto {name} = {value.format(mask_mode=mode)};\n"
                                for name, value in unit["constants"].items())
            body = "".join(
                f"template cudaError_t {unit['kernel']}<"
                f"{', '.join(argument.format(mask_mode=mode) for argument in arguments)}>"
                f"({unit['parameters']});\n" for arguments in unit["instantiations"])
            units[unit["file"].format(mode=index)] = (
                kernel_notice + "\n".join(unit["includes"]) + "\n\nnamespace flashinfer {\n\n"
                + constants + body + "\n}  // namespace flashinfer\n")
    for unit in facts["host_units"]:
        lines = [NOTICE.format(version=version, what=unit["stands_for"]), *unit["includes"], ""]
        if unit.get("declares"):
            lines.append("namespace flashinfer {")
            lines += [f"template <typename Params> cudaError_t {symbol}(Params params);"
                      f"  // line {line}" for symbol, line in unit["declares"].items()]
            lines.append("}  // namespace flashinfer")
        lines += [f"// line {line}: runs flashinfer::{symbol}<..., MASK_MODE, ...> (the mask "
                  "mode dispatched at run time)" for symbol, line in unit.get("calls", {}).items()]
        lines += [f"// line {line}: exports {name}" for name, line in unit.get("exports", {}).items()]
        units[unit["file"]] = "\n".join(lines) + "\n"
    return units


def render_units(files: FlashInferFiles, family: str, version: str = VERSION) -> dict[str, str]:
    """FlashInfer's own kernel units of the family's module, rendered in memory from the
    wheel's templates (never written), and its host and binding files as it ships them."""
    import jinja2

    data = load_standins(version)
    facts = data["families"][family]
    units: dict[str, str] = {}
    for index, mode in enumerate(data["mask_modes"]["values"]):
        for unit in facts["kernel_units"]:
            template = jinja2.Template(files.text(_span(unit["stands_for"])[0]))
            units[unit["file"].format(mode=index)] = template.render(
                mask_mode=mode, variant_name=facts["variant_name"], **COMMON)
    for unit in facts["host_units"]:
        units[unit["file"]] = files.text(_span(unit["stands_for"])[0])
    return units


def _check_family(files: FlashInferFiles, family: str, version: str) -> list[str]:
    problems: list[str] = []
    data = load_standins(version)
    facts = data["families"][family]
    theirs, ours = render_units(files, family, version), standin_module(family, version)
    if list(theirs) != list(ours):
        problems.append(f"{family}: files {list(theirs)} != stand-ins {list(ours)}")
    for name, text in theirs.items():
        real, standin = parse_unit(text), parse_unit(ours.get(name, ""))
        if (real is None) != (standin is None):
            problems.append(f"{family}/{name}: FlashInfer's unit is "
                            f"{'not ' if real is None else ''}a kernel unit, the stand-in "
                            f"{'not ' if standin is None else ''}")
            continue
        if real is None or standin is None:
            continue
        if [line for line in real.preamble.splitlines() if line.startswith("#")] != \
                [line for line in standin.preamble.splitlines() if line.startswith("#")]:
            problems.append(f"{family}/{name}: includes differ")
        if real.constants != standin.constants:
            problems.append(f"{family}/{name}: constants {real.constants} != {standin.constants}")
        got = [(i.kernel, i.arguments, i.parameters, i.mask_mode) for i in real.instantiations]
        want = [(i.kernel, i.arguments, i.parameters, i.mask_mode)
                for i in standin.instantiations]
        if got != want:
            problems.append(f"{family}/{name}: instantiations\n  FlashInfer {got}\n"
                            f"  stand-in   {want}")
    for unit in facts["kernel_units"] + facts["host_units"]:
        path, first, last = _span(unit["stands_for"])
        lines = files.text(path).splitlines()
        if (first, last) != (1, len(lines)):
            problems.append(f"{unit['stands_for']}: the file has {len(lines)} lines")
        for include in unit["includes"]:
            if include not in lines:
                problems.append(f"{path}: no line {include!r}")
        for key in ("declares", "calls", "exports"):
            for symbol, line in unit.get(key, {}).items():
                if symbol not in lines[line - 1]:
                    problems.append(f"{path}:{line}: {symbol!r} is not on the line "
                                    f"({lines[line - 1].strip()!r})")
    modules = files.text("flashinfer/jit/attention/modules.py").splitlines()
    path, first, last = _span(facts["rendered_by"])
    cited = "\n".join(modules[first - 1:last])
    for unit in facts["kernel_units"]:
        stem = unit["file"].split("{mode}")[0]
        if stem not in cited:
            problems.append(f"{facts['rendered_by']}: no {stem!r}")
    for unit in facts["host_units"]:
        if unit["file"] not in cited and "_file_csrc" not in cited:
            problems.append(f"{facts['rendered_by']}: no {unit['file']!r}")
    path, line, _ = _span(facts["variant_source"])
    found = re.search(r'variant_name = f?"([^"]*)"', modules[line - 1])
    # every option the f-string reads is off in this module (COMMON): false
    variant = re.sub(r"\{str\([^{}]*\)\.lower\(\)\}", "false", found.group(1)) if found else None
    if variant != facts["variant_name"]:
        problems.append(f"{facts['variant_source']}: variant {variant!r}, "
                        f"stand-ins {facts['variant_name']!r}")
    path, first, last = _span(data["mask_modes"]["source"])
    literals = "\n".join(files.text(path).splitlines()[first - 1:last])
    for index, mode in enumerate(data["mask_modes"]["values"]):
        if f'{index}: "{mode}"' not in literals:
            problems.append(f"{data['mask_modes']['source']}: no {index}: {mode!r}")
    return problems


def cited_lines(files: FlashInferFiles) -> dict[str, str]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    lines: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            source, quote = node.get("source"), node.get("quote")
            if isinstance(source, str) and isinstance(quote, str):
                path, _, line = source.partition(":")
                row = files.text(path).splitlines()[int(line) - 1]
                if quote not in row:
                    sys.exit(f"{source}: {quote!r} is not on the line ({row.strip()!r})")
                lines[source] = row
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return dict(sorted(lines.items()))


def check(files: FlashInferFiles, version: str = VERSION) -> list[str]:
    """What the stand-ins and the recorded lines state that ``files`` does not (empty: agree)."""
    problems: list[str] = []
    for family in load_standins(version)["families"]:
        problems += _check_family(files, family, version)
    recorded = json.loads((FIXTURES / f"flashinfer-{version}.json").read_text(encoding="utf-8"))
    if recorded["lines"] != cited_lines(files):
        problems.append(f"flashinfer-{version}.json: the recorded lines are not the wheel's")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--check", action="store_true",
                        help="check the stand-ins and recorded lines against WHEEL; write nothing")
    args = parser.parse_args()
    files = FlashInferFiles(args.wheel)
    version = args.wheel.name.split("-")[1] if args.wheel.is_file() else VERSION
    if args.check:
        problems = check(files, version)
        for problem in problems:
            print(problem)
        if problems:
            sys.exit(1)
        families = load_standins(version)["families"]
        count = sum(len(render_units(files, family, version)) for family in families)
        print(f"{args.wheel.name}: the stand-ins state what its {count} files of "
              f"{len(families)} batch-prefill modules do")
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"flashinfer-{version}.json").write_text(json.dumps(
        {"wheel": args.wheel.name, "lines": cited_lines(files)}, indent=1) + "\n",
        encoding="utf-8")
    print(f"wrote {FIXTURES / f'flashinfer-{version}.json'}")


if __name__ == "__main__":
    main()
