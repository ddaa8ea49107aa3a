"""The platform axis: ``schemas/platforms.yaml`` is the registry of
``selector/platforms/``; every device names a platform and the architecture its
platform's module gives it; an engine profile states a platform's sections in
``platforms/<name>.yaml`` and is loaded per platform; backends name their platforms;
a wired backend's rules may depend on the platform alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from selector.catalog import CatalogError, _load_catalog_files, load_catalog
from selector.errors import InputError
from selector.platforms import PLATFORM_MODULES, capability_int, platform_module
from selector.schema.platform import PLATFORM_SECTIONS
from selector.util.resources import schemas_dir


def test_the_registry_equals_platforms_yaml() -> None:
    listed = yaml.safe_load((schemas_dir() / "platforms.yaml").read_text(encoding="utf-8"))
    names = [p["name"] for p in listed["platforms"]]
    assert list(PLATFORM_MODULES) == names
    catalog = load_catalog()
    assert [p.name for p in catalog.platforms] == names
    for name in names:
        assert name == platform_module(name).NAME


def test_every_device_names_a_known_platform_and_its_arch() -> None:
    catalog = load_catalog()
    platforms = {p.name for p in catalog.platforms}
    for device in catalog.devices:
        assert device.platform in platforms, device.name
        module = platform_module(device.platform)
        assert module.check_device(device) == "", device.name
        assert module.arch_of(capability_int(device)) == device.arch


@pytest.mark.parametrize(("text", "cc"), [
    ("9.0", 90), ("sm_90", 90), ("sm90", 90), ("90", 90), ("9", 90), ("12.1", 121),
    (" SM_100 ", 100), (90, 90), (9, 90), ([12, 0], 120), ((8, 6), 86),
])
def test_cuda_reads_a_capability_once(text: object, cc: int) -> None:
    cuda = platform_module("cuda")
    assert cuda.parse_capability(text) == cc
    assert cuda.parse_capability(cuda.capability_text(cc)) == cc


@pytest.mark.parametrize("text", ["gfx942", "9.x", "", True, [9], 9.0])
def test_cuda_refuses_what_is_no_capability(text: object) -> None:
    with pytest.raises(ValueError):
        platform_module("cuda").parse_capability(text)


def test_every_backend_names_its_platforms_and_loads_per_platform() -> None:
    catalog = load_catalog()
    platforms = {p.name for p in catalog.platforms}
    for name in catalog.engine_names:
        for platform in platforms:
            engine = catalog.engine(name, platform)
            assert engine.platform == platform == engine.profile.platform
            for spec in (*engine.backends.values(), *engine.wired.values()):
                assert platform in spec.platforms, (name, spec.name)


def test_an_engine_without_the_platform_says_so(schemas: Path) -> None:
    (schemas / "platforms.yaml").write_text(yaml.safe_dump({"platforms": [
        *yaml.safe_load((schemas / "platforms.yaml").read_text())["platforms"],
        {"name": "dummy", "vendor": "Nobody", "vllm_platform": "DummyPlatform",
         "capability_kind": "sm_XY", "device_control_env_var": "DUMMY_VISIBLE_DEVICES",
         "torch_probe": "dummy", "out_of_memory": "torch.OutOfMemoryError: dummy out of memory", "runtime": "DUMMY",
         "environment_basis": "the dummy image", "environment_summary": "no packages"}]}))
    catalog = _load_catalog_files(schemas)
    with pytest.raises(InputError, match=r"has no dummy platform"):
        catalog.engine(catalog.default_engine, "dummy")
    with pytest.raises(InputError, match=r"unknown platform 'rocmm'"):
        catalog.engine(catalog.default_engine, "rocmm")


def test_a_device_of_an_unknown_platform_is_refused(schemas: Path) -> None:
    path = schemas / "devices.yaml"
    path.write_text(path.read_text().replace("name: H100, ", "name: H100, platform: nope, ", 1)
                    .replace("platform: nope, aliases: [H100-SXM, H100 SXM, H100-SXM5-80GB, "
                             "H100-80G, NVIDIA H100 80GB HBM3], platform: cuda,",
                             "aliases: [H100-SXM], platform: nope,", 1))
    with pytest.raises(CatalogError, match=r"device H100: unknown platform 'nope'"):
        _load_catalog_files(schemas)


def test_a_device_whose_arch_is_not_its_capability_is_refused(schemas: Path) -> None:
    path = schemas / "devices.yaml"
    path.write_text(path.read_text().replace('arch: sm_90, capability: "9.0", '
                                             'architecture: Hopper, memory_gib: 80, '
                                             'hbm_bandwidth_tbs: 3.35',
                                             'arch: sm_89, capability: "9.0", '
                                             'architecture: Hopper, memory_gib: 80, '
                                             'hbm_bandwidth_tbs: 3.35', 1))
    with pytest.raises(CatalogError, match=re.escape("write arch: sm_90")):
        _load_catalog_files(schemas)


@pytest.mark.parametrize("section", PLATFORM_SECTIONS)
def test_a_platform_section_in_profile_yaml_is_refused(schemas: Path, section: str) -> None:
    catalog = _load_catalog_files(schemas)
    path = catalog.engine_dirs[catalog.default_engine] / "profile.yaml"
    document = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**document, section: []}, sort_keys=False))
    with pytest.raises(CatalogError, match=rf"{section} belong to a platform: state them in "
                                            r"platforms/<platform>\.yaml"):
        _load_catalog_files(schemas).engine(catalog.default_engine)


def test_a_backend_of_an_unknown_platform_is_refused(schemas: Path) -> None:
    base = _load_catalog_files(schemas)
    path = base.engine_dirs[base.engine_names[0]] / "backends" / "FLASH_ATTN.yaml"
    path.write_text(path.read_text().replace("platforms: [cuda, rocm]", "platforms: [cuda, rocm, nope]"))
    with pytest.raises(CatalogError, match=r"FLASH_ATTN\.yaml: platforms names \['nope'\]"):
        _load_catalog_files(schemas).engine(base.engine_names[0])


def test_a_backend_of_another_platform_is_not_loaded(schemas: Path) -> None:
    base = _load_catalog_files(schemas)
    path = base.engine_dirs[base.engine_names[0]] / "backends" / "TRITON_ATTN.yaml"
    (schemas / "platforms.yaml").write_text(yaml.safe_dump({"platforms": [
        *yaml.safe_load((schemas / "platforms.yaml").read_text())["platforms"],
        {"name": "dummy", "vendor": "Nobody", "vllm_platform": "DummyPlatform",
         "capability_kind": "sm_XY", "device_control_env_var": "DUMMY_VISIBLE_DEVICES",
         "torch_probe": "dummy", "out_of_memory": "torch.OutOfMemoryError: dummy out of memory", "runtime": "DUMMY",
         "environment_basis": "the dummy image", "environment_summary": "no packages"}]}))
    path.write_text(path.read_text().replace("platforms: [cuda, rocm]", "platforms: [dummy]"))
    with pytest.raises(CatalogError, match=r"priority list names unknown backend 'TRITON_ATTN'"):
        _load_catalog_files(schemas).engine(base.engine_names[0])


def test_wired_rules_may_depend_on_the_platform_alone(schemas: Path) -> None:
    base = _load_catalog_files(schemas)
    oldest = base.engine_names[0]
    path = base.engine_dirs[oldest] / "backends" / "DEEPSEEK_V32_INDEXER.yaml"
    text = path.read_text()
    assert "platform != 'rocm'" in text  # the shipped rule is conditional
    assert _load_catalog_files(schemas).engine(oldest).wired["sparse_indexer"] \
        .kernel_block_sizes[0].sizes == (64,)
    path.write_text(text.replace("platform != 'rocm'", "platform == 'rocm'"))
    with pytest.raises(CatalogError, match=r"on cuda 0 kernel_block_sizes rule\(s\) apply"):
        _load_catalog_files(schemas).engine(oldest)
    path.write_text(text.replace("platform != 'rocm'", "cc >= 90"))
    with pytest.raises(CatalogError, match=r"unknown name\(s\) \['cc'\]"):
        _load_catalog_files(schemas).engine(oldest)
    path.write_text(text.replace('{when: "platform != \'rocm\'", sizes: [64]}',
                                 '{when: "platform != \'rocm\'", sizes: [64]}\n'
                                 '  - {when: "platform == \'rocm\'", sizes: [1, 64]}'))
    spec = _load_catalog_files(schemas).engine(oldest).wired["sparse_indexer"]
    assert [(v.when, v.sizes) for v in spec.kernel_block_sizes] == [(True, (64,))]


def _with_dummy_platform(schemas: Path) -> None:
    """A second platform in platforms.yaml with one device (an MI300X-like 9.4)."""
    listed = yaml.safe_load((schemas / "platforms.yaml").read_text())["platforms"]
    (schemas / "platforms.yaml").write_text(yaml.safe_dump({"platforms": [*listed, {
        "name": "dummy", "vendor": "Nobody", "vllm_platform": "DummyPlatform",
        "capability_kind": "sm_XY", "device_control_env_var": "DUMMY_VISIBLE_DEVICES",
        "torch_probe": "dummy", "out_of_memory": "torch.OutOfMemoryError: dummy out of memory", "runtime": "DUMMY",
         "environment_basis": "the dummy image", "environment_summary": "no packages"}]}))
    path = schemas / "devices.yaml"
    path.write_text(path.read_text() + '  - {name: DUMMY-1, platform: dummy, arch: sm_94, '
                    'capability: "9.4", architecture: Dummy, memory_gib: 192, '
                    'hbm_bandwidth_tbs: 5.3, bf16_dense_tflops: 1307}\n')


def test_a_device_of_another_platform_never_takes_cudas_rules(
        schemas: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A 9.4 device of another platform is not CUDA 9.x: the engine is loaded for its
    platform, which no release states yet, and the error names the device's line."""
    from selector import platforms
    from selector.inputs.config import load_deployment, resolve_target

    _with_dummy_platform(schemas)
    monkeypatch.setitem(platforms.PLATFORM_MODULES, "dummy", "selector.platforms.cuda")
    catalog = _load_catalog_files(schemas)
    deployment = tmp_path / "d.yaml"
    deployment.write_text("layer: {num_heads: 8, head_size: 128}\ndevice: DUMMY-1\n")
    with pytest.raises(InputError) as caught:
        resolve_target(load_deployment(str(deployment)), catalog)
    assert "has no dummy platform" in caught.value.message
    assert (caught.value.file, caught.value.field, caught.value.line) == (
        str(deployment), "device", 2)
    deployment.write_text("layer: {num_heads: 8, head_size: 128}\n"
                          "device: {capability: '9.4', platform: dummy}\n")
    with pytest.raises(InputError, match="has no dummy platform"):
        resolve_target(load_deployment(str(deployment)), catalog)
    deployment.write_text("layer: {num_heads: 8, head_size: 128}\ndevice: {capability: '9.4'}\n")
    target = resolve_target(load_deployment(str(deployment)), catalog)
    assert (target.platform, target.cc, target.device_name) == ("cuda", 94, "sm_94")


def test_an_unknown_platform_of_a_device_by_capability_is_located(tmp_path: Path) -> None:
    from tests.fuzz.test_config_fuzz import run_cli

    path = tmp_path / "d.yaml"
    path.write_text("layer: {num_heads: 8, head_size: 128}\n"
                    "device: {capability: '9.4', platform: rocmm}\n")
    code, _, err = run_cli(["check", str(path)])
    assert code == 2, err
    assert f"{path}:2: field 'device': unknown platform 'rocmm'" in err


def test_dtype_auto_reads_the_bfloat16_capability_from_the_data(schemas: Path) -> None:
    """``--dtype auto`` picks float16 below ``checks.bfloat16.min_cc`` of startup.yaml
    (vLLM's check_if_supports_dtype), not below a number in Python."""
    from selector.inputs.serve.parse import parse_serve_command

    shipped = load_catalog()
    engine = shipped.default_engine
    argv = ["vllm", "serve", "gemma-2-9b"]
    command = parse_serve_command(argv, device="H100", catalog=shipped, engine=engine)
    assert command.for_device("A100", shipped).deployment.dtype == "bfloat16"
    assert command.for_device("T4", shipped).deployment.dtype == "float16"
    catalog = _load_catalog_files(schemas)
    path = catalog.engine_file(engine, "startup.yaml")
    assert path is not None
    path.write_text(path.read_text().replace("bfloat16: {code: SU001, min_cc: 80,",
                                             "bfloat16: {code: SU001, min_cc: 90,"))
    catalog = _load_catalog_files(schemas)
    command = parse_serve_command(argv, device="H100", catalog=catalog, engine=engine)
    assert command.for_device("A100", catalog).deployment.dtype == "float16"
    assert command.for_device("H100", catalog).deployment.dtype == "bfloat16"


def _profile_expressions(document: dict[str, object]) -> list[str]:
    texts: list[str] = []
    for fact in document.get("facts") or []:  # type: ignore[attr-defined]
        texts += [str(fact[k]) for k in ("value",) if isinstance(fact.get(k), str)]
        for step in fact.get("steps") or []:
            texts += [str(step[k]) for k in ("when", "set") if isinstance(step.get(k), str)]
    for check in document.get("checks") or []:  # type: ignore[attr-defined]
        if isinstance(check.get("fails_when"), str):
            texts.append(check["fails_when"])
    return texts


def test_the_shared_profile_reads_no_platforms_fact() -> None:
    """What a platform's libraries decide (CUDA's FlashAttention versions, TRT-LLM, ...)
    lives in its platforms/<name>.yaml: no fact or check of a profile.yaml reads a name
    that a platform file defines (its environment facts or its facts)."""
    from selector import expr

    engines = schemas_dir() / "engines"
    owned: dict[str, str] = {}
    for path in sorted(engines.glob("*/platforms/*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name in document.get("environment") or {}:
            owned[name] = str(path.relative_to(engines))
        for fact in document.get("facts") or []:
            owned[fact["name"]] = str(path.relative_to(engines))
    assert "fa_version" in owned and "trtllm_platform_decode" in owned and "env_fa2_built" in owned
    found = []
    for path in sorted(engines.glob("*/profile.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for name in [f["name"] for f in document.get("facts") or [] if not f.get("remove")]:
            if name in owned:
                found.append(f"{path.parent.name}: fact {name} (defined in {owned[name]})")
        for text in _profile_expressions(document):
            found += [f"{path.parent.name}: {text!r} reads {name} ({owned[name]})"
                      for name in sorted(expr.names_in(expr.parse(text))) if name in owned]
    assert not found, "\n".join(found)


def test_a_cuda_fact_has_the_other_platforms_own_answer() -> None:
    """The FlashAttention / TRT-LLM facts that the CUDA backends read (pinned on an AMD GPU
    vLLM's ROCm platform validates them too) are each platform's own: CUDA's expression
    there, vLLM's constant answer on ROCm (get_flash_attn_version returns None there,
    fa_utils.py; no FlashInfer)."""
    catalog = load_catalog()
    names = {"fa_version", "fa2_supported", "trtllm_platform_decode"}
    for release in ("vllm==0.25.1", "vllm==0.33.0"):
        cuda = {f.name: f.value for f in catalog.engine(release, "cuda").profile.facts}
        rocm = {f.name: f.value for f in catalog.engine(release, "rocm").profile.facts}
        assert names <= set(cuda) and names <= set(rocm)
        assert all(isinstance(cuda[n], str) for n in names)
        assert {n: rocm[n] for n in names} == {"fa_version": None, "fa2_supported": False,
                                              "trtllm_platform_decode": False}
