"""The README's picture of summary.html: headless chromium renders a page to a PNG of the asked size."""

from __future__ import annotations

import shutil
import struct

import pytest

from pipelines.evaluation.report.screenshot import BROWSERS, screenshot
from tests.evaluation.browser import _install_chromium


def test_a_page_becomes_a_png_of_the_asked_size(tmp_path):
    if not any(map(shutil.which, BROWSERS)):
        why = _install_chromium()
        if not any(map(shutil.which, BROWSERS)):
            pytest.skip(f"no chromium and none could be installed: {why or 'not found after install'}")
    page = tmp_path / "summary.html"
    page.write_text("<html><body style='background:#fff'><h1>edumas results</h1></body></html>", encoding="utf-8")
    out = screenshot(page, tmp_path / "img" / "summary.png", width=640, height=360)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (640, 360)


def test_a_missing_page_says_how_to_make_it(tmp_path):
    with pytest.raises(SystemExit, match="run `dvc repro` first"):
        screenshot(tmp_path / "summary.html", tmp_path / "out.png")
