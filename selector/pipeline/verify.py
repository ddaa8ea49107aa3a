"""``verify LOG [DEPLOYMENT]`` through the stages: the log read, the deployment it names
(or the one given) checked as ``check`` checks it, and the two compared."""

from __future__ import annotations

from pathlib import Path

from selector.catalog import Catalog
from selector.checkrun import CheckOptions
from selector.compare.startup_log import StartupLog, read_startup_log
from selector.compare.verify import VerifyResult, compare_log, serve_argv_of_log
from selector.errors import InputError
from selector.pipeline.check import check_files, check_serve

__all__ = ["verify_log"]


def _engine(log: StartupLog, engine: str | None, source: str, catalog: Catalog) -> str:
    if engine:
        return engine
    version = log.version
    known = catalog.engine_dirs
    if version is None:
        raise InputError("the log names no vLLM release (no engine config or API server "
                         "version line)", file=source, field="--engine",
                         hint="pass the release it ran, one of: " + ", ".join(sorted(known)))
    name = f"vllm=={version}"
    if name not in known:
        raise InputError(f"the log is from vLLM {version}, which has no engine profile here",
                         file=source, line=log.facts["version"].line, field="version",
                         hint="known: " + ", ".join(sorted(known)))
    return name


def verify_log(path: str, catalog: Catalog, deployment: str | None = None, *,
               model: str | None = None, device: str | None = None,
               engine: str | None = None) -> list[VerifyResult]:
    """Compare the start-up log at ``path`` with the tool's prediction of ``deployment``
    (a deployment file) or, without one, of the log's own non-default args (the model
    replaced by ``model``, a preset or a folder holding config.json), on ``device``."""
    log = read_startup_log(path)
    engine_name = _engine(log, engine, path, catalog)
    devices = (device,) if device else ()
    options = CheckOptions(engine=engine_name, devices=devices)
    if deployment is not None:
        records, errors = check_files([deployment], catalog, options)
        if errors:
            raise errors[0]
        label = deployment
    else:
        if log.args is None and model is None:
            raise InputError("the log has no non-default args line to take the deployment "
                             "from", file=path, hint="pass a DEPLOYMENT file, or --model "
                             "with the flags the log ran")
        if not device:
            raise InputError("verify needs the GPU the log ran on", file=path,
                             field="--device", hint="add e.g. --device H200")
        logged_model = str((log.args or {}).get("model") or "")
        chosen = model or logged_model
        if not chosen:
            raise InputError("the log's args name no model", file=path, line=log.args_line,
                             field="model", hint="pass --model PRESET or a folder with "
                             "config.json")
        argv = serve_argv_of_log(log, chosen)
        _, records = check_serve(argv, catalog, options,
                                 model=chosen if Path(chosen).exists() or model else None)
        label = " ".join(argv)
    return [compare_log(log, record, deployment=label) for record in records]
