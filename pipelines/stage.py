"""What every DVC stage shares: argument parsing, logging, strict params, tracking, metrics, and
one way of failing.

A stage file is then only its own logic::

    def main(argv=None) -> int:
        return run_stage(lambda: _run(argv), argv)

    def _run(argv) -> int:
        args, cfgs = stage_setup_sections("generate_ram2c", {"ram2c": Ram2cConfig, "retrieval": RetrievalConfig}, argv)
        with stage_run("generate_ram2c", {k: c.model_dump() for k, c in cfgs.items()}) as run:
            metrics = generate(cfgs["ram2c"], cfgs["retrieval"])
            write_metrics(Path(cfgs["ram2c"].outputs.reports_dir) / "metrics.json", metrics, run)
        return 0

:func:`run_stage` turns a user error into one ``error: ...`` line on stderr and an exit code, no
traceback (``--debug`` shows it): :class:`ConfigError` -> 2; a missing input
(``FileNotFoundError``), an unreadable one (:class:`InputError`: a malformed line, not UTF-8, a missing
column; or a path that is a folder, under a file, or not permitted), an :class:`LLMError` (server down,
missing API key, corrupt cache) or a :class:`StageError` (failure budget exceeded, empty evaluation
set) -> 1. SIGTERM and SIGINT (Ctrl-C) stop the stage at once: unfinished outputs removed, one line,
exit 143 / 130. At its start a stage removes the temporaries a SIGKILLed run left beside its outs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from pipelines.config import ConfigError, load_section
from pipelines.errors import InputError, StageError
from pipelines.io import remove_open_temporaries, remove_stale_temporaries_under, write_json_atomic
from pipelines.llm.types import LLMError
from pipelines.params_doc import help_epilog
from pipelines.tracking import StageRun, redact_values
from pipelines.workspace import check_queued_run

T = TypeVar("T", bound=BaseModel)

log = logging.getLogger("edumas")


def setup_logging(level: str | None = None) -> None:
    """Readable logs on stderr; level from ``EDUMAS_LOG_LEVEL`` (default INFO)."""
    logging.basicConfig(
        level=(level or os.environ.get("EDUMAS_LOG_LEVEL", "INFO")).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for noisy in ("httpx", "urllib3", "chromadb", "datasets", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


TIMINGS_DIR = Path("reports/timings")  # <stage>.json: the wall time of its last successful run (ablation estimates)
_started: dict[str, Any] = {}  # the stage this process runs and when it started (stage_setup_sections)


def stage_timing_name(stage: str, section: str, default_section: str) -> str:
    """``train`` run on ``--section train.sft`` is DVC's ``train@sft``; other stages keep their name."""
    return stage if section == default_section else f"{stage}@{section.rsplit('.', 1)[-1]}"


def _record_timing() -> None:
    """``reports/timings/<stage>.json`` (``stage``, ``wall_s``, ``finished``) after a successful run."""
    if not _started:
        return
    name, wall = _started.pop("stage"), time.monotonic() - _started.pop("at")
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        write_json_atomic(TIMINGS_DIR / f"{name}.json", {"stage": name, "wall_s": round(wall, 1), "finished": finished})
    except OSError as exc:  # a read-only folder costs the estimate, never the stage
        log.warning("could not record the stage time: %s", exc)


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM or SIGINT (Ctrl-C), so every ``atomic_open`` on the way out
    removes its temporary file and the request cache keeps the calls that finished (a BaseException:
    no ``except Exception`` of a stage swallows it). ``args[0]`` is the signal number."""


TERMINATED_EXIT_CODE = 128 + signal.SIGTERM
INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT  # 130, as a shell reports Ctrl-C
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


STOP_GRACE_S = 3.0  # then a stop that waits on a worker thread (a model generating) exits anyway
_stopping = threading.Lock()  # held by whichever of the stage and the watchdog exits first


def _exit_stopped(signum: int) -> None:
    """One line on stderr, then exit ``128 + signum`` at once (worker threads must not hold the exit)."""
    _stopping.acquire()  # the second caller waits here for the first one's os._exit
    name = "SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM"
    print(
        f"error: stopped by {name}; the outputs on disk are whole (unfinished files were removed) and "
        "a rerun repeats no finished LLM call",
        file=sys.stderr,
    )
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(128 + signum)


def _watchdog(signum: int) -> None:
    time.sleep(STOP_GRACE_S)  # the stage is still unwinding: asyncio.run waits on its executor's threads
    remove_open_temporaries()
    _exit_stopped(signum)


def _raise_terminated(signum: int, frame: Any) -> None:
    threading.Thread(target=_watchdog, args=(signum,), name="edumas-stop", daemon=True).start()
    raise Terminated(signum)


def _on_sigterm_raise() -> Callable[[], None]:
    """Install the SIGTERM and SIGINT handler (main thread only; asyncio.run then leaves SIGINT to it);
    returns what restores the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in STOP_SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def stage_outputs(stage: str, dvc_file: Path = Path("dvc.yaml")) -> list[Path]:
    """The outs, metrics and plots ``dvc_file`` lists for ``stage`` (templated ``${...}`` paths left
    out; none without the file or the stage)."""
    try:
        spec = yaml.safe_load(dvc_file.read_text(encoding="utf-8"))["stages"][stage.split("@")[0]]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return []
    spec = spec.get("do", spec) if isinstance(spec, dict) else {}
    entries = [*spec.get("outs", []), *spec.get("metrics", []), *spec.get("plots", [])]
    paths = [next(iter(e)) if isinstance(e, dict) else e for e in entries]
    return [Path(p) for p in paths if isinstance(p, str) and "${" not in p]


def remove_stale_stage_temporaries(stage: str, dvc_file: Path = Path("dvc.yaml")) -> list[Path]:
    """At a stage's start: remove the ``.tmp`` files a SIGKILLed run left beside or under its outputs
    (only those of a dead writer, see :func:`pipelines.io.remove_stale_temporaries_under`)."""
    removed = [t for out in stage_outputs(stage, dvc_file) for t in remove_stale_temporaries_under(out)]
    if removed:
        log.info("removed %d temporary file(s) a killed run of %s left: %s", len(removed), stage,
                 ", ".join(map(str, removed[:5])))
    return removed


def stage_setup_sections(
    stage: str,
    sections: dict[str, type[BaseModel]],
    argv: list[str] | None = None,
    *,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Parse ``--params`` / ``--section`` / ``--debug`` (and what ``add_arguments`` adds),
    configure logging, load several sections.

    ``sections`` maps section name -> model; ``--section`` renames the first one (the stage's own).
    Raises :class:`ConfigError` (file, line and fix in its message).
    """
    first = next(iter(sections))
    parser = argparse.ArgumentParser(
        prog=f"stages.{stage}",
        description=f"DVC stage {stage}",
        epilog=help_epilog(sections),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--section", default=first, help=f"params section (default: {first})")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    setup_logging()
    _started.update(stage=stage_timing_name(stage, args.section, first), at=time.monotonic())
    remove_stale_stage_temporaries(stage)
    check_queued_run()  # a queued DVC experiment must see the workspace's cache, knowledge bases and ../shared
    cfgs = {}
    for index, (name, model) in enumerate(sections.items()):
        cfgs[name] = load_section(args.section if index == 0 else name, model, Path(args.params))
    log.info("stage %s: params sections %s of %s", stage, ", ".join([args.section, *list(sections)[1:]]), args.params)
    return args, cfgs


def stage_setup(
    stage: str, section: str, model: type[T], argv: list[str] | None = None
) -> tuple[argparse.Namespace, T]:
    """Parse ``--params`` (and ``--section``), configure logging, load the section strictly.

    A :class:`ConfigError` ends the process with exit code 2 and the message alone (it already
    says the file, line and fix), not a traceback.
    """
    try:
        args, cfgs = stage_setup_sections(stage, {section: model}, argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return args, cfgs[section]


def _missing_input(exc: FileNotFoundError) -> str:
    name = exc.filename or str(exc)
    return f"input not found: {name}; run the stage that makes it (dvc repro), or fix the path in params.yaml"


def _unusable_path(exc: OSError) -> str:
    name = exc.filename or str(exc)
    return f"{name}: {exc.strerror or type(exc).__name__}; fix the path in params.yaml (a file where a file is read)"


def run_stage(body: Callable[[], int | None], argv: list[str] | None = None) -> int:
    """Run a stage body; a user error becomes one ``error: ...`` line and an exit code (see the
    module docstring). ``--debug`` in ``argv`` (default ``sys.argv``) also prints the traceback."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    restore = _on_sigterm_raise()
    try:
        code = 0 if (code := body()) is None else int(code)
        if code == 0:
            _record_timing()
        return code
    except Terminated as exc:
        _exit_stopped(exc.args[0] if exc.args else signal.SIGTERM)
    except SystemExit as exc:  # argparse (--help, bad flags) and stage_setup's config exit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ConfigError as exc:
        error, message, code = exc, str(exc), 2
    except FileNotFoundError as exc:
        error, message, code = exc, _missing_input(exc), 1
    except (IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        error, message, code = exc, _unusable_path(exc), 1
    except (InputError, LLMError, StageError) as exc:
        error, message, code = exc, str(exc), 1
    finally:
        restore()
    if debug:
        traceback.print_exception(error)
    print(f"error: {message}", file=sys.stderr)
    return code


def write_metrics(path: Path | str, metrics: dict[str, Any], run: StageRun | None = None) -> None:
    """Write metrics JSON for DVC (atomically, key-looking strings redacted) and log them to the stage's W&B run."""
    metrics = redact_values(metrics)
    write_json_atomic(path, metrics)
    if run is not None:
        run.log_metrics(metrics)
    log.info("metrics written to %s", path)
