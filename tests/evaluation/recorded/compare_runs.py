"""Compare the outputs of two finished project runs (e.g. the smoke profile's ``dvc repro`` before and
after a refactor, both made with ``python -m tests.evaluation.recorded.record``'s ``smoke_run``)::

    PYTHONPATH=$PWD python -m tests.evaluation.recorded.compare_runs BEFORE_DIR AFTER_DIR [--replayed]

``--replayed``: AFTER_DIR is a copy of BEFORE_DIR (its request cache included) whose stages were rerun
with the new code (``dvc repro -s -f STAGE``); a request of the new code is then served from the cache
only when it is byte for byte a request the old code made, so the ``cached`` flags of trace rows and
the ``cache_hits`` of usage files are expected to differ, and the command also checks that every call
of the rerun was such a hit (``usage.json`` totals: calls == cache_hits).

Every file under the output folders is compared byte for byte. A JSON or JSON-lines file that differs
is parsed and its differing key paths are listed; where every one of them is a clock reading (a key
naming seconds, wall time, a timestamp or a rate) the file counts as ``same but clocks``, as does a
text file whose differing lines all carry a date and time. Exit code 0
when every file is identical or differs in clocks only, 1 otherwise (the differing paths printed).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

OUTPUT_FOLDERS = ("data/generated", "data/train", "data/evaluate", "reports", "models")
CLOCK_KEY = re.compile(
    r"(^|_)(wall|seconds|secs|elapsed|duration|latency|started|finished|timestamp|time|date|"
    r"per_s|per_second|throughput|runtime|recorded)(_|$)|_s$|^s$",
    re.IGNORECASE,
)
SKIPPED_SUFFIXES = (".png", ".html", ".safetensors", ".bin", ".pt", ".pth", ".onnx", ".sqlite3", ".gguf")


def files_under(root: Path) -> set[str]:
    found = set()
    for folder in OUTPUT_FOLDERS:
        base = root / folder
        if base.is_dir():
            found |= {str(p.relative_to(root)) for p in base.rglob("*") if p.is_file()}
    return found


def _parsed(path: Path) -> object:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def differing_paths(a: object, b: object, prefix: str = "") -> list[str]:
    """Key paths (``systems.team.wall_s``, ``[3].usage``) where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                out.append(where)
            else:
                out += differing_paths(a[key], b[key], where)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in differing_paths(x, y, f"{prefix}[{i}]")]
    return [] if a == b else [prefix or "<whole file>"]


def is_clock(path: str) -> bool:
    return any(CLOCK_KEY.search(k) for k in _keys(path))


REPLAY_KEYS = ("cached", "cache_hits")
STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(\.\d+)?")


def clock_lines_only(a: Path, b: Path) -> bool:
    """Two text files of the same lines but for the date and time stamps in them."""
    left, right = a.read_text(encoding="utf-8").splitlines(), b.read_text(encoding="utf-8").splitlines()
    return len(left) == len(right) and all(
        STAMP.sub("", x) == STAMP.sub("", y) for x, y in zip(left, right, strict=True)
    )


def _keys(path: str) -> list[str]:
    return [k for k in re.split(r"[.\[\]]", path) if k and not k.isdigit()]


def expected(path: str, *, replayed: bool) -> bool:
    """A differing key path that does not count: a clock, or with ``replayed`` a cache flag or count."""
    return is_clock(path) or (replayed and (_keys(path) or [""])[-1] in REPLAY_KEYS)


def unreplayed_calls(after: Path) -> list[str]:
    """``usage.json`` files of ``after`` whose calls were not all cache hits."""
    found = []
    for name in sorted(files_under(after)):
        if name.endswith("usage.json"):
            total = json.loads((after / name).read_text(encoding="utf-8")).get("total") or {}
            if total.get("calls", 0) != total.get("cache_hits", 0):
                found.append(f"{name}: {total.get('calls')} calls, {total.get('cache_hits')} from the cache")
    return found


def compare(before: Path, after: Path, *, replayed: bool = False) -> tuple[dict[str, int], list[str]]:
    """Counts per verdict and the lines describing real differences."""
    counts = {"identical": 0, "same but clocks": 0, "binary skipped": 0, "differs": 0}
    problems: list[str] = []
    names_before, names_after = files_under(before), files_under(after)
    for name in sorted(names_before ^ names_after):
        problems.append(f"only in {'before' if name in names_before else 'after'}: {name}")
        counts["differs"] += 1
    for name in sorted(names_before & names_after):
        a, b = before / name, after / name
        if a.read_bytes() == b.read_bytes():
            counts["identical"] += 1
        elif name.endswith(SKIPPED_SUFFIXES):
            counts["binary skipped"] += 1
        elif name.endswith((".json", ".jsonl")):
            paths = differing_paths(_parsed(a), _parsed(b))
            real = [p for p in paths if not expected(p, replayed=replayed)]
            if real:
                counts["differs"] += 1
                problems.append(f"{name}: {len(real)} paths differ, e.g. {real[:5]}")
            else:
                counts["same but clocks"] += 1
        elif clock_lines_only(a, b):
            counts["same but clocks"] += 1
        else:
            counts["differs"] += 1
            problems.append(f"{name}: text differs")
    if replayed:
        problems += [f"not replayed: {line}" for line in unreplayed_calls(after)]
    return counts, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--replayed", action="store_true", help="AFTER reran on BEFORE's request cache")
    args = parser.parse_args(argv)
    counts, problems = compare(args.before, args.after, replayed=args.replayed)
    print("; ".join(f"{verdict}: {n}" for verdict, n in counts.items()))
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
