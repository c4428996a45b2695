"""A PNG of the top of ``reports/summary.html`` (the picture in the README), taken with headless
chromium::

    python -m pipelines.evaluation.report.screenshot reports/summary.html docs/img/summary.png

Needs a ``chromium`` (Debian: ``apt-get install chromium``) on the PATH; says so when there is none.
The page is self-contained (styles inline, plots embedded), so nothing is fetched.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str:
    found = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if found is None:
        raise SystemExit(f"no headless browser found ({', '.join(BROWSERS)}); on Debian: apt-get install chromium")
    return found


def screenshot(page: Path, out: Path, *, width: int = 1280, height: int = 1400) -> Path:
    """Render ``page`` at ``width`` x ``height`` CSS pixels into ``out`` (PNG); returns ``out``."""
    if not page.is_file():
        raise SystemExit(f"{page} does not exist: run `dvc repro` first (the report stage writes it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        command = [
            browser(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--screenshot={out.resolve()}",
            page.resolve().as_uri(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"chromium failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", nargs="?", default="reports/summary.html")
    parser.add_argument("out", nargs="?", default="docs/img/summary.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1400)
    args = parser.parse_args(argv)
    out = screenshot(Path(args.page), Path(args.out), width=args.width, height=args.height)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
