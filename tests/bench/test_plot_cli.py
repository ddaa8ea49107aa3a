"""The SVG plot (structure + golden), the bench CLI without a GPU, and the import rule."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from selector.bench.measurements import load_measurements
from selector.bench.plot import render_svg
from selector.cli import app, register_commands

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC = REPO / "tests" / "fixtures" / "bench" / "synthetic-h200-llama.json"
GOLDEN = REPO / "tests" / "fixtures" / "bench" / "synthetic-h200-llama.svg"
DEPLOYMENT = REPO / "tests" / "fixtures" / "smoke" / "llama-h200.yaml"
SVG = "{http://www.w3.org/2000/svg}"


def has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def classes(root: ET.Element, name: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == name]


def test_svg_structure() -> None:
    measurements = load_measurements(SYNTHETIC)
    root = ET.fromstring(render_svg(measurements))
    assert root.tag == f"{SVG}svg"
    shapes = measurements.shape_names()
    assert len(classes(root, "roofline")) == len(shapes)
    assert len(classes(root, "median")) == len(measurements.results)
    assert len(classes(root, "iqr")) == len(measurements.results)
    assert len(classes(root, "fraction")) == len(measurements.results)
    texts = [e.text or "" for e in root.iter(f"{SVG}text")]
    assert all(name in texts for name in shapes)
    assert any("4.26 TB/s copy" in t and "catalog H200: 4.8 TB/s" in t for t in texts)
    graph_marks = [e for e in classes(root, "median") if e.tag == f"{SVG}rect"]
    assert len(graph_marks) == 8  # decode shapes were graph-replayed: squares
    for fraction in classes(root, "fraction"):
        assert 0 <= float(fraction.get("height", "-1")) <= 110


def test_svg_golden(update_goldens: bool) -> None:
    text = render_svg(load_measurements(SYNTHETIC))
    if update_goldens:
        GOLDEN.write_text(text)
    assert GOLDEN.is_file(), f"missing golden {GOLDEN.name}: run pytest --update-goldens and review it"
    assert text == GOLDEN.read_text()


def test_svg_marks_failures_and_escapes_text() -> None:
    data = load_measurements(SYNTHETIC).to_json()
    data["results"][0]["error"] = "RuntimeError: <boom> & more"
    data["deployment"]["source"] = "a<b>&c.yaml"
    from selector.bench.measurements import parse_measurements

    root = ET.fromstring(render_svg(parse_measurements(data)))
    failed = classes(root, "failed")
    assert len(failed) == 1
    assert "<boom> & more" in "".join(failed[0].itertext())


def invoke(*args: str) -> object:
    register_commands(["bench"])
    return CliRunner().invoke(app, list(args))


@pytest.mark.skipif(has_cuda(), reason="checks the no-GPU path")
def test_bench_without_gpu_exits_4_and_says_how_to_install(tmp_path: Path) -> None:
    result = invoke("bench", str(DEPLOYMENT), "--output", str(tmp_path / "out"))
    assert result.exit_code == 4, result.output
    assert "attn-select[gpu]" in result.stderr
    assert "Traceback" not in result.output


def test_bench_bad_workload_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text("decode: {batch_sizes: [1], context_lengths: [-4]}\n")
    result = invoke("bench", str(DEPLOYMENT), "--workload", str(workload))
    assert result.exit_code == 2
    assert f"{workload}:1: field 'decode.context_lengths[0]'" in result.stderr


def test_bench_invalid_deployment_exits_1() -> None:
    result = invoke("bench", str(REPO / "examples" / "gpt-oss-20b-l40s-flashinfer.yaml"))
    assert result.exit_code == 1
    assert "vLLM would reject" in result.stderr


def test_bench_without_runnable_backend_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "triton.yaml"
    config.write_text("device: L40S\ndtype: bfloat16\n"  # sinks: only TRITON_ATTN is valid
                      "layer: {head_size: 64, num_heads: 64, num_kv_heads: 8, has_sink: true}\n")
    result = invoke("bench", str(config))
    assert result.exit_code == 2
    assert "has a kernel runner" in result.stderr


SCRIPT = textwrap.dedent("""
    import sys
    for name in ("torch", "flashinfer", "flash_attn", "flash_attn_interface", "vllm", "numpy"):
        sys.modules[name] = None
    from pathlib import Path
    import selector.cli.bench, selector.bench.runner, selector.bench.timing
    from selector.bench.measurements import load_measurements
    from selector.bench.plot import render_svg
    from selector.bench.policy import decide_for_deployment
    from selector.catalog import load_catalog
    from selector.pipeline.bench import bench_targets
    m = load_measurements(Path("tests/fixtures/bench/synthetic-h200-llama.json"))
    render_svg(m); decide_for_deployment(m)
    bench_targets(Path("tests/fixtures/smoke/llama-h200.yaml"), catalog=load_catalog())
    from selector.errors import CannotRunHereError
    from selector.bench.runner import device_environment
    try:
        targets = bench_targets(Path("tests/fixtures/smoke/llama-h200.yaml"), load_catalog())
        device_environment(targets.plans, lambda _: None, load_catalog())
    except CannotRunHereError as error:
        assert "attn-select[gpu]" in str(error)
    else:
        raise AssertionError("ran without torch")
    print("ok")
""")


def test_bench_cpu_parts_import_without_torch() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_check_does_not_import_the_bench() -> None:
    code = ("import sys; from selector.cli import app, register_commands; "
            "register_commands(['check']); "
            "from typer.testing import CliRunner; "
            "CliRunner().invoke(app, ['check', 'tests/fixtures/smoke/llama-h200.yaml']); "
            "print(sorted(m for m in sys.modules if m.startswith('selector.bench') "
            "or m in ('torch', 'flashinfer')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
