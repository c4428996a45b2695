"""The input error every stage reports as one line: an input file that exists but cannot be read as
the stage needs (a folder, not UTF-8, a malformed line, a missing column). Its message names the
file, the line where there is one, and the fix; :func:`pipelines.stage.run_stage` prints it and
exits 1, without a traceback."""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """An unreadable input file; the message says which file (and line) and how to fix it."""


class StageError(RuntimeError):
    """A stage that ran but must not count as a result (the message says what happened and where)."""


def read_input_text(path: Path | str, *, fix: str) -> str:
    """The UTF-8 text of ``path`` (a leading BOM dropped); :class:`InputError` when it is a folder or not
    UTF-8 (``fix`` says which params key to change for a wrong path)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a file; {fix}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{path}:{line}: not UTF-8 (invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
            "save the file as UTF-8"
        ) from None
