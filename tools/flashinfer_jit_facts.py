"""Record what ``schemas/flashinfer-jit.yaml`` and its tests read from a FlashInfer wheel.

* the lines the data cites (``source: path:line`` with a ``quote`` on it), into
  ``tests/fixtures/flashinfer_jit/flashinfer-X.json``;
* FlashInfer's kernel translation units of one batch-prefill module per family (fa2 and
  fa3, bf16, head 128, int32 indices, no window, no soft cap), rendered from the wheel's own
  templates with the arguments ``flashinfer/jit/attention/modules.py``
  (``gen_batch_prefill_module`` -> ``gen_customize_batch_prefill_module``) gives them, into
  ``tests/fixtures/flashinfer_jit/<family>/`` (the unit tests select from these texts).

    pip download --no-deps flashinfer-python==0.6.13 -d /tmp/fi && \
    python tools/flashinfer_jit_facts.py /tmp/fi/flashinfer_python-0.6.13-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import jinja2
import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "schemas" / "flashinfer-jit.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "flashinfer_jit"
MASK_MODES = ["MaskMode::kNone", "MaskMode::kCausal", "MaskMode::kCustom",
              "MaskMode::kMultiItemScoring"]
# modules.py's kwargs for bf16 q/kv/o, int32 indices, head 128, no rope, no window/soft cap
COMMON = {"dtype_q": "nv_bfloat16", "dtype_kv": "nv_bfloat16", "dtype_o": "nv_bfloat16",
          "idtype": "int32_t", "head_dim_qk": 128, "head_dim_vo": 128,
          "pos_encoding_mode": "PosEncodingMode::kNone", "use_sliding_window": "false",
          "use_logits_soft_cap": "false", "use_fp16_qk_reduction": "false"}
FAMILIES = {
    # family: (paged template, ragged template, file stem, variant name, kept sources)
    "fa2": ("batch_prefill_paged_kernel_inst.jinja", "batch_prefill_ragged_kernel_inst.jinja",
            "batch_prefill_{kind}_kernel_mask_{mode}.cu",
            "DefaultAttention<use_custom_mask, false, false, false>",
            ["batch_prefill.cu", "batch_prefill_jit_binding.cu"]),
    "fa3": ("batch_prefill_paged_sm90_kernel_inst.jinja",
            "batch_prefill_ragged_sm90_kernel_inst.jinja",
            "batch_prefill_{kind}_sm90_kernel_mask_{mode}.cu", "DefaultAttention<false>",
            ["batch_prefill_sm90.cu", "batch_prefill_sm90_jit_binding.cu"]),
}


class Wheel:
    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path)
        self.name = path.name

    def text(self, path: str) -> str:
        return self.zip.read(path).decode("utf-8")


def cited_lines(wheel: Wheel) -> dict[str, str]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    lines: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            source, quote = node.get("source"), node.get("quote")
            if isinstance(source, str) and isinstance(quote, str):
                path, _, line = source.partition(":")
                row = wheel.text(path).splitlines()[int(line) - 1]
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


def render_units(wheel: Wheel, family: str) -> dict[str, str]:
    paged, ragged, stem, variant, kept = FAMILIES[family]
    units: dict[str, str] = {}
    for mode, literal in enumerate(MASK_MODES):
        for kind, template in (("paged", paged), ("ragged", ragged)):
            source = jinja2.Template(wheel.text(f"flashinfer/data/csrc/{template}"))
            units[stem.format(kind=kind, mode=mode)] = source.render(
                mask_mode=literal, variant_name=variant, **COMMON)
    for name in kept:
        units[name] = wheel.text(f"flashinfer/data/csrc/{name}")
    return units


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    args = parser.parse_args()
    wheel = Wheel(args.wheel)
    version = args.wheel.name.split("-")[1]
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"flashinfer-{version}.json").write_text(json.dumps(
        {"wheel": wheel.name, "lines": cited_lines(wheel)}, indent=1) + "\n", encoding="utf-8")
    for family in FAMILIES:
        folder = FIXTURES / family
        folder.mkdir(exist_ok=True)
        for name, text in render_units(wheel, family).items():
            (folder / name).write_text(text, encoding="utf-8")
    print(f"wrote {FIXTURES}")


if __name__ == "__main__":
    main()
