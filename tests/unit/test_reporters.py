"""The one registry of ``check`` reporters: the CLI's ``--format`` choices and the docs
come from it, and a new format is one module in ``selector/report/formats/``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from selector.catalog import load_catalog
from selector.check.records import CheckRecord, CheckReport
from selector.cli.check import CheckFormat
from selector.docsgen import generate
from selector.report.formats import REPORTERS, reporter

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_choices_are_the_registry_in_order() -> None:
    assert [f.value for f in CheckFormat] == list(REPORTERS)
    assert next(iter(REPORTERS)) == "text"
    assert {"text", "json", "sarif", "junit", "github", "markdown"} <= set(REPORTERS)


def test_every_reporter_loads_and_renders_an_input_error() -> None:
    record = CheckRecord(source="bad.yaml", artifact="bad.yaml", device="H100", engine=None,
                         status="error", failed=True)
    report = CheckReport(records=[record], catalog=load_catalog())
    for name, entry in REPORTERS.items():
        assert reporter(name) is entry
        render = entry.load()
        if entry.prints:
            import io

            from rich.console import Console

            buffer = io.StringIO()
            assert render(report, Console(file=buffer, width=100)) is None
        else:
            out = render(report, None)
            assert isinstance(out, str) and out, name


def test_the_docs_list_every_format() -> None:
    page = next(f.text for f in generate(load_catalog()) if f.path == "docs/support-matrix.md")
    for entry in REPORTERS.values():
        assert f"- `--format {entry.name}`:" in page


def test_a_new_format_is_one_module(tmp_path: Path) -> None:
    """A copy of the package with one more module: the CLI offers and runs the format,
    and the docs list it (no other file is edited)."""
    import shutil

    import selector.report.formats as formats

    package = tmp_path / "selector" / "report" / "formats"
    shutil.copytree(Path(formats.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (package / "count.py").write_text(textwrap.dedent('''
        SUMMARY = "How many records."

        def render(report, console):
            return f"{len(report.records)} record(s)\\n"
    '''), encoding="utf-8")
    script = textwrap.dedent(f'''
        import sys
        import selector.report
        selector.report.__path__.insert(0, {str(package.parent)!r})
        from selector.report.formats import REPORTERS
        assert REPORTERS["count"].summary == "How many records.", REPORTERS
        sys.argv = ["attn-select", "check", "--format", "count",
                    {str(ROOT / "examples" / "llama-3.1-8b-h100.yaml")!r}]
        from selector.cli import main
        main()
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout == "1 record(s)\n"
