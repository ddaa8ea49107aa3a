"""A mistyped `vllm serve` flag is never passed over: vLLM's parser reads a unique prefix
as its option (AS150) and refuses anything else (SE005 unrecognized, SE006 ambiguous),
and attn-select says so with a did-you-mean, never a traceback."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from selector.catalog import load_catalog
from selector.inputs.serve import parse_serve_command
from selector.inputs.serve.flags import release_flags, serve_flags
from tests.fuzz.test_config_fuzz import run_cli

ENGINE = "vllm==0.33.0"
TABLE = serve_flags(load_catalog(), ENGINE)
LONG = sorted(f for f in TABLE.parser_flags if f.startswith("--"))
ELSEWHERE = frozenset().union(*release_flags(load_catalog()).values()) | set(TABLE.flags)


@st.composite
def typos(draw: st.DrawFn) -> tuple[str, str]:
    """(a flag of the release, the same flag with one edit)."""
    flag = draw(st.sampled_from(LONG))
    body = flag[2:]
    at = draw(st.integers(0, len(body) - 1))
    letter = draw(st.sampled_from("abcdefghijklmnopqrstuvwxyz-"))
    edit = draw(st.sampled_from(["drop", "swap", "insert", "replace"]))
    if edit == "drop":
        body = body[:at] + body[at + 1:]
    elif edit == "swap":
        body = body[:at] + body[at + 1:at + 2] + body[at:at + 1] + body[at + 2:]
    elif edit == "insert":
        body = body[:at] + letter + body[at:]
    else:
        body = body[:at] + letter + body[at + 1:]
    return flag, "--" + body


@settings(max_examples=300, deadline=None)
@given(typos(), st.booleans())
def test_a_typo_is_read_as_vllm_reads_it_or_refused_with_did_you_mean(
        typo: tuple[str, str], with_value: bool) -> None:
    _flag, word = typo
    name = word.rstrip("-")
    assume(len(name) > 2 and word not in TABLE.parser_flags and word not in ELSEWHERE)
    assume(not word.replace("-", "").isdigit())
    argv = ["vllm", "serve", "qwen3-8b", word, *(["7"] if with_value else [])]
    try:
        command = parse_serve_command(argv, device="H100", catalog=load_catalog(), engine=ENGINE)
    except Exception as exc:  # only a bad value of the flag it stands for
        from selector.errors import InputError
        assert isinstance(exc, InputError) and exc.exit_code == 2 and exc.field, exc
        return
    notes = {n.code: n for n in command.notes}
    if "AS150" in notes:  # a unique prefix: vLLM reads it as that option
        assert word in notes["AS150"].message
    else:
        refusal = notes.get("SE005") or notes.get("SE006")
        assert refusal is not None and refusal.level == "error", command.notes
        assert word.split("=")[0] in refusal.message
        assert refusal.hint.startswith("did you mean --"), refusal


def test_the_issue_lines_are_refused_at_the_command_line() -> None:
    for words, message in [
        (["--kv-cache-dtyp", "fp8"],
         "ambiguous option: --kv-cache-dtyp could match --kv-cache-dtype, --kv-cache-dtype-skip-layers"),
        (["--kv-cach-dtype", "fp8"], "unrecognized arguments: --kv-cach-dtype fp8"),
        (["--speculative-config", '{"method": "eagel3", "num_speculative_tokens": 2}'],
         "input_value='eagel3'"),
    ]:
        code, out, err = run_cli(["check", "--engine", ENGINE, "--device", "H100", "--", "vllm",
                                  "serve", "Qwen/Qwen3-8B", *words])
        text = " ".join((out + err).split())
        assert code == 1, text
        assert message in text and "did you mean" in text and "Traceback" not in text


def test_a_flag_read_but_not_modelled_is_named() -> None:
    code, out, err = run_cli(["check", "--engine", ENGINE, "--device", "H100", "--", "vllm",
                              "serve", "Qwen/Qwen3-8B", "--seed", "10"])
    assert code == 0 and "AS104" in out + err and "--seed" in out + err
