"""Which FlashInfer kernel variants the smoke compiles (selector/smoke/flashinfer_jit.py).

The modules selected from are stand-ins written by attn-select, not FlashInfer's code
(``tests/fixtures/flashinfer_jit/standins-0.6.13.yaml``, rendered by
``tools.flashinfer_jit_facts.standin_module``): each states, of a FlashInfer 0.6.13 file it
cites (path:lines), only what the selection reads (a kernel unit's includes, constants and
explicit instantiations: template name, arguments by position, parameters, the mask-mode
literal; a host or binding file's references to the kernel symbols).
``python tools/flashinfer_jit_facts.py --check WHEEL`` asserts FlashInfer's own rendered units
state the same; where FlashInfer 0.6.13 imports (the GPU machine) the last test here checks
its installed files and selects from its real texts too. The data's citations are checked
against the single lines recorded from the wheel.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from selector.smoke.flashinfer_jit import (
    PREBUILT,
    STUB_RESULT,
    compile_planned_variants,
    load_variant_data,
    needed_variants,
    parse_unit,
    reduced_modules,
    release_planned_variants,
    select_units,
)
from tools.flashinfer_jit_facts import FlashInferFiles, check, render_units, standin_module

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flashinfer_jit"
DECODE, PREFILL = "BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper"
PAGED = "BatchPrefillWithPagedKVCacheDispatched"


def _module(family: str) -> dict[str, str]:
    return standin_module(family)


def _needs(entry_point: str, **plan: Any) -> frozenset[tuple[str, str]]:
    needs = needed_variants(load_variant_data(), entry_point, plan)
    assert needs is not None
    return needs


def test_the_data_cites_lines_of_the_flashinfer_it_was_read_from() -> None:
    data = load_variant_data()
    recorded = json.loads((FIXTURES / f"flashinfer-{data.flashinfer_version}.json")
                          .read_text(encoding="utf-8"))["lines"]
    cited = [(call.source, call.quote) for call in data.calls.values()]
    cited += [(call.mask_mode.source, call.mask_mode.quote) for call in data.calls.values()]
    cited.append((data.discovery["source"], data.discovery["quote"]))
    for source, quote in cited:
        assert quote in recorded[source], (source, quote)


@pytest.mark.parametrize("family", ["fa2", "fa3"])
def test_flashinfers_kernel_units_are_read_and_its_host_units_kept(family: str) -> None:
    for name, text in _module(family).items():
        unit = parse_unit(text)
        if "kernel_mask" not in name:
            assert unit is None, name  # host code and binding: compiled as they are
            continue
        assert unit is not None, name
        mode = int(re.search(r"mask_(\d)", name).group(1))  # type: ignore[union-attr]
        literal = ["MaskMode::kNone", "MaskMode::kCausal", "MaskMode::kCustom",
                   "MaskMode::kMultiItemScoring"][mode]
        assert {item.mask_mode for item in unit.instantiations} == {literal}
        assert len(unit.instantiations) == (3 if family == "fa2" else 2)  # CTA_TILE_Q / scheduler
        kind = "Paged" if "paged" in name else "Ragged"
        assert {item.kernel for item in unit.instantiations} == \
            {f"BatchPrefillWith{kind}KVCacheDispatched"}


def test_fa3_prefill_compiles_the_two_paged_causal_kernels_each_in_its_own_unit() -> None:
    selection = select_units(_module("fa3"), _needs(PREFILL, causal=True))
    assert selection is not None
    assert selection.kept_sources == ("batch_prefill_sm90.cu", "batch_prefill_sm90_jit_binding.cu")
    assert [(i.kernel, i.mask_mode) for i in selection.kept] == [(PAGED, "MaskMode::kCausal")] * 2
    assert {i.arguments[4] for i in selection.kept} == {"true", "false"}  # SAME_SCHEDULER...
    assert len(selection.stubbed) == 14
    kernels = [name for name, _ in selection.units if "stubs" not in name]
    assert len(kernels) == 2 and len(selection.units) == 3
    for name, text in selection.units[:2]:
        unit = parse_unit(text)  # a unit of one instantiation, FlashInfer's text
        assert unit is not None and len(unit.instantiations) == 1, name
        assert unit.instantiations[0] in selection.kept


def test_fa2_decode_compiles_the_three_tile_sizes_of_the_unmasked_paged_kernel() -> None:
    selection = select_units(_module("fa2"), _needs(DECODE))
    assert selection is not None
    assert [i.mask_mode for i in selection.kept] == ["MaskMode::kNone"] * 3
    assert sorted(i.arguments[0] for i in selection.kept) == ["128", "16", "64"]
    assert len(selection.stubbed) == 21


def test_one_module_for_decode_and_prefill_keeps_both_calls_variants() -> None:
    # below SM90 the prefill wrapper's "auto" is fa2 too: one module for both wrappers
    selection = select_units(_module("fa2"), _needs(DECODE) | _needs(PREFILL, causal=True))
    assert selection is not None
    assert sorted({i.mask_mode or "" for i in selection.kept}) == \
        ["MaskMode::kCausal", "MaskMode::kNone"]
    assert len(selection.kept) == 6 and len(selection.stubbed) == 18


def test_stubs_define_the_same_instantiations_and_return_an_error() -> None:
    selection = select_units(_module("fa2"), _needs(PREFILL, causal=False))
    assert selection is not None
    stubs = "\n".join(text for name, text in selection.units if "stubs" in name)
    assert stubs.count("template <> cudaError_t") == len(selection.stubbed) == 21
    assert stubs.count(f"return {STUB_RESULT};") == 21
    # the unit-local constant is written out (the stubs of four units share one file)
    assert "use_custom_mask" not in stubs.split("namespace flashinfer {", 1)[1]
    assert "DefaultAttention<(MaskMode::kCustom == MaskMode::kCustom), false, false, false>" \
        in stubs
    preamble = stubs.split("namespace flashinfer {", 1)[0]  # the units' own includes
    assert [line for line in preamble.splitlines() if line.startswith("#")] == [
        "#include <flashinfer/attention/prefill.cuh>", "#include \"batch_prefill_config.inc\""]


def test_prefill_mask_mode_follows_its_causal_argument() -> None:
    assert {mode for _, mode in _needs(PREFILL, causal=True)} == {"MaskMode::kCausal"}
    assert {mode for _, mode in _needs(PREFILL, causal=False)} == {"MaskMode::kNone"}
    data = load_variant_data()
    assert needed_variants(data, PREFILL, {"causal": True, "custom_mask": object()}) is None
    assert needed_variants(data, PREFILL, {}) is None
    assert needed_variants(data, "BatchPrefillWithRaggedKVCacheWrapper", {}) is None


def test_nothing_to_leave_out_or_nothing_matched_means_the_whole_module() -> None:
    module = _module("fa3")
    everything = frozenset((i.kernel, i.mask_mode or "") for text in module.values()
                           if (unit := parse_unit(text)) for i in unit.instantiations)
    assert select_units(module, everything) is None
    assert select_units(module, frozenset({("SomeOtherKernel", "MaskMode::kNone")})) is None
    assert select_units({"a.cu": "int main() { return 0; }\n"}, _needs(DECODE)) is None


# -- compile_planned_variants with a FlashInfer double -------------------------------


class MissingJITCacheError(RuntimeError):
    def __init__(self, message: str, spec: Any = None) -> None:
        self.spec = spec
        super().__init__(message)


@dataclass
class FakeSpec:
    name: str
    sources: list[Path]
    root: Path
    built: list[Any] = field(default_factory=list)
    """Every spec built (shared by a spec and the ones replaced from it)."""
    fail: bool = False
    unloadable: bool = False
    """A prebuilt library FlashInfer's loader rejects (built on another image)."""

    def load(self, path: Path) -> str:
        if self.unloadable:
            raise OSError(f"{path}: version `GLIBCXX_3.4.32' not found")
        return path.read_text()

    @property
    def jit_library_path(self) -> Path:
        return self.root / "cached_ops" / self.name / f"{self.name}.so"

    def build(self, verbose: bool) -> None:
        if self.fail:
            raise RuntimeError("Ninja build failed.\nnvcc: error")
        self.built.append(self)
        self.jit_library_path.parent.mkdir(parents=True, exist_ok=True)
        self.jit_library_path.write_text("library")


def _fake_flashinfer(tmp_path: Path, *, fail: bool = False, version: str = "0.6.13") -> Any:
    generated = tmp_path / "generated"
    specs: dict[str, FakeSpec] = {}
    for family, uri in (("fa2", "decode_module_fa2"), ("fa3", "prefill_module_sm90")):
        folder = generated / uri
        folder.mkdir(parents=True)
        for name, text in _module(family).items():
            (folder / name).write_text(text)
        specs[uri] = FakeSpec(uri, [folder / name for name in _module(family)], tmp_path,
                              fail=fail)
    env = SimpleNamespace(FLASHINFER_WORKSPACE_DIR=tmp_path, FLASHINFER_AOT_DIR=tmp_path / "aot")
    built: list[Any] = []

    class Wrapper:
        uri = ""

        def __init__(self, **construct: Any) -> None:
            self.construct = construct

        def plan(self, **arguments: Any) -> None:
            spec = specs[self.uri]
            aot = Path(env.FLASHINFER_AOT_DIR) / spec.name / f"{spec.name}.so"
            if aot.exists():
                return
            if os.environ.get("FLASHINFER_DISABLE_JIT"):
                raise MissingJITCacheError("JIT compilation is disabled", spec=spec)
            built.append(spec.name)  # FlashInfer's whole build

    decode = type("BatchDecodeWithPagedKVCacheWrapper", (Wrapper,), {"uri": "decode_module_fa2"})
    prefill = type("BatchPrefillWithPagedKVCacheWrapper", (Wrapper,),
                   {"uri": "prefill_module_sm90"})
    jit = SimpleNamespace(env=env, MissingJITCacheError=MissingJITCacheError)
    return SimpleNamespace(__version__=version, jit=jit, specs=specs, whole_builds=built,
                           BatchDecodeWithPagedKVCacheWrapper=decode,
                           BatchPrefillWithPagedKVCacheWrapper=prefill)


def _calls() -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    return {"decode": (DECODE, {"use_tensor_cores": True}, {"num_qo_heads": 32}),
            "prefill": (PREFILL, {}, {"causal": True})}


@pytest.fixture(autouse=True)
def _fresh_links(monkeypatch: pytest.MonkeyPatch) -> None:
    import selector.smoke.flashinfer_jit as module
    monkeypatch.setattr(module, "_LINKED", {})
    monkeypatch.setattr(module, "_ORIGINAL_AOT", [])
    monkeypatch.delenv("FLASHINFER_DISABLE_JIT", raising=False)


def test_only_the_planned_variants_are_built_and_flashinfer_finds_them(
        tmp_path: Path) -> None:
    flashinfer = _fake_flashinfer(tmp_path)
    (tmp_path / "aot" / "some_prebuilt").mkdir(parents=True)
    notes = compile_planned_variants(flashinfer, _calls())
    assert "FLASHINFER_DISABLE_JIT" not in os.environ
    assert len(notes) == 2, notes
    assert "compiled 3 of 24 kernel instantiations (MaskMode::kNone: what decode run)" in notes[0]
    assert "compiled 2 of 16 kernel instantiations (MaskMode::kCausal: what prefill run)" \
        in notes[1]
    by_name = {built.name.split("_attn_select_")[0]: built
               for spec in flashinfer.specs.values() for built in spec.built}
    assert [path.name for path in by_name["prefill_module_sm90"].sources] == [
        "attn_select_batch_prefill_paged_sm90_kernel_mask_1_0.cu",
        "attn_select_batch_prefill_paged_sm90_kernel_mask_1_1.cu", "attn_select_stubs_0.cu",
        "batch_prefill_sm90.cu", "batch_prefill_sm90_jit_binding.cu"]
    aot = Path(flashinfer.jit.env.FLASHINFER_AOT_DIR)
    for uri, spec in by_name.items():
        link = aot / uri / f"{uri}.so"
        assert link.resolve() == spec.jit_library_path.resolve()
    assert (aot / "some_prebuilt").is_symlink()  # FlashInfer's own AOT modules stay found
    # the wrappers' own plans now load them: no whole build
    for entry_point, construct, plan in _calls().values():
        getattr(flashinfer, entry_point)(**construct).plan(**plan)
    assert flashinfer.whole_builds == []
    # a second step of the same process finds them loaded: nothing more to build
    assert compile_planned_variants(flashinfer, _calls()) == []


def test_a_reduced_module_prebuilt_in_flashinfers_aot_folder_is_loaded_with_no_compile(
        tmp_path: Path) -> None:
    # flashinfer_jit_cache's folder (benchmarks/prebuild_flashinfer.py) holds the decode
    # module under its reduced name: it is linked as it is; the prefill module compiles
    flashinfer = _fake_flashinfer(tmp_path)
    modules, notes = reduced_modules(flashinfer, _calls())
    assert notes == [] and len(modules) == 2
    decode = next(module for module in modules if module.name == "decode_module_fa2")
    library = tmp_path / "aot" / decode.spec.name / f"{decode.spec.name}.so"
    library.parent.mkdir(parents=True)
    library.write_text("prebuilt")
    assert decode.prebuilt(flashinfer.jit.env) == library.resolve()
    notes = compile_planned_variants(flashinfer, _calls())
    assert notes[0].startswith(f"FlashInfer JIT: decode_module_fa2: {PREBUILT} 3 of 24 "
                               "kernel instantiations (MaskMode::kNone: what decode run)")
    assert "prefill_module_sm90: compiled 2 of 16" in notes[1]
    built = {spec.name for spec in flashinfer.specs["decode_module_fa2"].built}
    assert built == set(), "a prebuilt module was compiled again"
    aot = Path(flashinfer.jit.env.FLASHINFER_AOT_DIR)
    assert (aot / "decode_module_fa2" / "decode_module_fa2.so").resolve() == library.resolve()
    for entry_point, construct, plan in _calls().values():
        getattr(flashinfer, entry_point)(**construct).plan(**plan)
    assert flashinfer.whole_builds == []


def test_a_prebuilt_module_that_does_not_load_or_is_another_selection_is_compiled(
        tmp_path: Path) -> None:
    flashinfer = _fake_flashinfer(tmp_path)
    modules, _ = reduced_modules(flashinfer, _calls())
    decode = next(module for module in modules if module.name == "decode_module_fa2")
    for name in (decode.spec.name, "prefill_module_sm90_attn_select_0123456789"):
        (tmp_path / "aot" / name).mkdir(parents=True)
        (tmp_path / "aot" / name / f"{name}.so").write_text("prebuilt")
    flashinfer.specs["decode_module_fa2"].unloadable = True
    notes = compile_planned_variants(flashinfer, _calls())
    assert "decode_module_fa2: compiled 3 of 24" in notes[0]
    assert notes[0].endswith("not the prebuilt module (it does not load: OSError: "
                             f"{tmp_path / 'aot' / decode.spec.name / decode.spec.name}.so: "
                             "version `GLIBCXX_3.4.32' not found)"), notes[0]
    assert notes[1].endswith("not the prebuilt module (it holds 0123456789, another "
                             "selection)"), notes[1]
    assert {spec.name.split("_attn_select_")[0] for family in flashinfer.specs.values()
            for spec in family.built} == {"decode_module_fa2", "prefill_module_sm90"}


def test_another_flashinfer_version_or_a_failed_build_leaves_flashinfers_build(
        tmp_path: Path) -> None:
    older = _fake_flashinfer(tmp_path / "old", version="0.6.12")
    notes = compile_planned_variants(older, _calls())
    assert notes and "0.6.12: its whole JIT modules are compiled" in notes[0]
    assert all(not spec.built for spec in older.specs.values())
    failing = _fake_flashinfer(tmp_path / "fail", fail=True)
    aot_before = failing.jit.env.FLASHINFER_AOT_DIR
    notes = compile_planned_variants(failing, _calls())
    assert len(notes) == 2 and all("failed (RuntimeError: Ninja build failed.)" in n
                                   for n in notes), notes
    assert aot_before == failing.jit.env.FLASHINFER_AOT_DIR


def test_flashinfers_own_cached_module_is_used_as_it_is(tmp_path: Path) -> None:
    flashinfer = _fake_flashinfer(tmp_path)
    for spec in flashinfer.specs.values():
        spec.jit_library_path.parent.mkdir(parents=True)
        spec.jit_library_path.write_text("FlashInfer's whole module")
    assert compile_planned_variants(flashinfer, _calls()) == []


def test_a_test_double_without_a_jit_compiles_nothing() -> None:
    assert compile_planned_variants(SimpleNamespace(), _calls()) == []


def test_a_finished_run_gives_later_flashinfer_users_flashinfers_own_modules(
        tmp_path: Path) -> None:
    flashinfer = _fake_flashinfer(tmp_path)
    cleared: list[bool] = []
    flashinfer.prefill = SimpleNamespace(get_batch_prefill_module=SimpleNamespace(
        cache_clear=lambda: cleared.append(True)))
    original = flashinfer.jit.env.FLASHINFER_AOT_DIR
    assert len(compile_planned_variants(flashinfer, _calls())) == 2
    assert original != flashinfer.jit.env.FLASHINFER_AOT_DIR
    release_planned_variants(flashinfer)
    assert original == flashinfer.jit.env.FLASHINFER_AOT_DIR and cleared == [True]
    release_planned_variants(flashinfer)  # nothing more to undo
    assert cleared == [True]
    # the next run reduces again (the reduced builds are found by ninja; nothing compiles)
    assert len(compile_planned_variants(flashinfer, _calls())) == 2


def test_a_step_without_prefills_also_compiles_what_a_later_prefill_runs(
        tmp_path: Path) -> None:
    # one module may serve both wrappers (fa2 below SM90), and it is reduced once
    flashinfer = _fake_flashinfer(tmp_path)
    decode_only = {"decode": _calls()["decode"]}
    notes = compile_planned_variants(flashinfer, decode_only,
                                     {"prefill": (PREFILL, {"causal": True})})
    assert len(notes) == 1
    assert "compiled 6 of 24 kernel instantiations (MaskMode::kCausal, MaskMode::kNone" \
        in notes[0], notes


# -- FlashInfer's own files, where it is installed (the GPU machine) --------------------


def _installed_flashinfer() -> FlashInferFiles:
    flashinfer = pytest.importorskip("flashinfer", reason="FlashInfer is not installed: the "
                                     "stand-ins are checked against its wheel by "
                                     "tools/flashinfer_jit_facts.py --check")
    version = str(getattr(flashinfer, "__version__", "?"))
    if version != load_variant_data().flashinfer_version:
        pytest.skip(f"FlashInfer {version} installed; the stand-ins state "
                    f"{load_variant_data().flashinfer_version}")
    root = Path(flashinfer.__file__).resolve().parent.parent
    if not (root / "flashinfer" / "data" / "csrc").is_dir():
        pytest.skip(f"{root / 'flashinfer'} ships no data/csrc (not a wheel install)")
    return FlashInferFiles(root)


def _select_from_flashinfers_files(files: FlashInferFiles) -> None:
    assert check(files) == []
    for family, needs in (("fa2", _needs(DECODE) | _needs(PREFILL, causal=True)),
                          ("fa3", _needs(PREFILL, causal=True))):
        real = select_units(render_units(files, family), needs)
        ours = select_units(_module(family), needs)
        assert real is not None and ours is not None
        assert [(i.kernel, i.arguments, i.parameters) for i in real.kept] == \
            [(i.kernel, i.arguments, i.parameters) for i in ours.kept]
        assert [(i.kernel, i.arguments) for i in real.stubbed] == \
            [(i.kernel, i.arguments) for i in ours.stubbed]
        assert real.kept_sources == ours.kept_sources
        for name, text in real.units:
            unit = parse_unit(text)  # FlashInfer's text, one instantiation a unit
            assert "stubs" in name or (unit is not None and len(unit.instantiations) == 1)


def test_installed_flashinfers_units_select_as_the_stand_ins_do() -> None:
    _select_from_flashinfers_files(_installed_flashinfer())
