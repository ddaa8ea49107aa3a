"""Command lines as people paste them: a whole `vllm serve` line quoted as one argument, a
`docker run` of the vLLM image (its tag picks the engine release), `docker compose`."""

from __future__ import annotations

import json

from tests.fuzz.test_config_fuzz import run_cli


def _check(*words: str, engine: str | None = None) -> tuple[int, str]:
    argv = ["check", "--device", "H100", "--format", "json"]
    if engine:
        argv += ["--engine", engine]
    code, out, err = run_cli([*argv, "--", *words])
    return code, out + err


def test_a_whole_command_quoted_as_one_argument_is_split() -> None:
    code, output = _check("vllm serve Qwen/Qwen3-8B -tp 2 --max-model-len 4096")
    assert code == 0, output
    assert "no such file" not in output
    assert '"tensor_parallel_size": 2' in output


def test_the_image_tag_picks_the_profiled_release() -> None:
    code, output = _check("docker", "run", "--gpus", "all", "-p", "8000:8000",
                          "vllm/vllm-openai:v0.30.0", "--model", "Qwen/Qwen3-8B")
    assert code == 0, output
    assert "vllm==0.30.0" in output and "AS152" in output


def test_an_unprofiled_image_tag_is_a_warning_naming_the_profile_used() -> None:
    code, output = _check("docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.10.1",
                          "--model", "Qwen/Qwen3-8B", engine=None)
    assert code == 0, output
    assert "no such file" not in output
    assert "0.10.1" in output and "has no profile" in output and "AS152" in output


def test_engine_flag_wins_over_the_tag_with_a_warning() -> None:
    code, output = _check("docker", "run", "vllm/vllm-openai:v0.30.0", "--model",
                          "Qwen/Qwen3-8B", engine="vllm==0.33.0")
    assert code == 0, output
    assert "checked against vllm==0.33.0 (--engine)" in output


def test_docker_compose_says_to_pass_the_service_command() -> None:
    for words in (["docker", "compose", "up"], ["docker-compose", "up", "-d"]):
        code, output = _check(*words)
        assert code == 2, output
        assert "no such file" not in output and "command:" in output, output
        assert "Traceback" not in output


def test_json_reports_parse_for_a_container_line() -> None:
    code, output = _check("docker", "run", "vllm/vllm-openai:v0.30.0", "--model", "Qwen/Qwen3-8B")
    assert code == 0
    json.loads(output[output.index("{"):])
