"""The CPU-side smoke code imports and runs with torch blocked (sys.modules['torch'] = None)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    for name in ("torch", "flashinfer", "flash_attn", "flash_attn_interface", "vllm", "numpy"):
        sys.modules[name] = None  # any import of these now raises ImportError
    import selector.smoke.metadata as metadata
    import selector.smoke
    import selector.smoke.invariants
    import selector.cli.metadata
    import selector.cli.smoke
    from selector.errors import CannotRunHereError
    batch = metadata.load_batch_file(__import__("pathlib").Path("examples/batch-seed.json"))
    assert metadata.build_flashinfer_metadata(batch).paged_kv_indptr == [0, 8, 9, 12]
    from selector.catalog import load_catalog
    from selector.smoke.plan import bind_plan
    plan = bind_plan(load_catalog(), backend="FLASHINFER", kernel_block_size=16,
                     num_q_heads=32, num_kv_heads=8, head_size=128)
    try:
        selector.smoke.run_smoke([plan])
    except CannotRunHereError as error:
        assert "attn-select[gpu]" in str(error), error
        assert error.exit_code == 4
    else:
        raise AssertionError("run_smoke ran without torch")
    for heavy in ("torch", "flashinfer", "flash_attn"):
        assert sys.modules.get(heavy) is None
    print("ok")
""")


def test_smoke_package_imports_without_torch() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
