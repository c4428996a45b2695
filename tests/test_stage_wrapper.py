"""run_stage: a user error is one ``error: ...`` line and an exit code; --debug adds the traceback."""

import pytest

from pipelines.config import ConfigError, StrictModel
from pipelines.llm.types import LLMError
from pipelines.stage import StageError, run_stage, stage_setup_sections


def raising(exc):
    def body():
        raise exc

    return body


@pytest.mark.parametrize(
    "exc, code, line",
    [
        (ConfigError("params.yaml:3: tagging.x: unknown key"), 2, "error: params.yaml:3: tagging.x: unknown key"),
        (
            FileNotFoundError(2, "No such file or directory", "data/tagging/demo.jsonl"),
            1,
            "error: input not found: data/tagging/demo.jsonl; run the stage that makes it (dvc repro), "
            "or fix the path in params.yaml",
        ),
        (LLMError("http://localhost:9/v1 cannot be reached"), 1, "error: http://localhost:9/v1 cannot be reached"),
        (StageError("7 of 10 samples failed"), 1, "error: 7 of 10 samples failed"),
    ],
)
def test_user_errors_are_one_line(capsys, exc, code, line):
    assert run_stage(raising(exc), []) == code
    err = capsys.readouterr().err
    assert err.strip() == line and "Traceback" not in err


def test_debug_shows_the_traceback_and_other_errors_propagate(capsys):
    assert run_stage(raising(LLMError("down")), ["--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith("error: down")
    with pytest.raises(ZeroDivisionError):
        run_stage(lambda: 1 / 0, [])
    assert run_stage(lambda: None, []) == 0 and run_stage(lambda: 3, []) == 3


class A(StrictModel):
    x: int = 1


class B(StrictModel):
    y: str = "b"


def test_stage_setup_loads_several_sections(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("main:\n  x: 5\nalt:\n  x: 6\nother:\n  y: z\n")
    args, cfgs = stage_setup_sections("demo", {"main": A, "other": B}, ["--params", str(params)])
    assert cfgs["main"].x == 5 and cfgs["other"].y == "z" and not args.debug
    _, cfgs = stage_setup_sections("demo", {"main": A, "other": B}, ["--params", str(params), "--section", "alt"])
    assert cfgs["main"].x == 6
    params.write_text("main:\n  x: 5\n")
    with pytest.raises(ConfigError, match="section 'other' is missing"):
        stage_setup_sections("demo", {"main": A, "other": B}, ["--params", str(params), "--debug"])
