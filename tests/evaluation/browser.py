"""Helpers of the headless-browser tests: Debian's chromium and chromium-driver driven by
selenium, installed with apt-get when missing (and possible), started headless with downloads
into a folder; the tests skip with a message saying why where no browser can be had."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver", "chromium-driver")


def _which(names) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def _install_chromium() -> str:
    """Try ``apt-get install chromium chromium-driver``; returns why it could not, or ''."""
    if shutil.which("apt-get") is None:
        return "apt-get is not available"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "not root, so apt-get cannot install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium", "chromium-driver"]):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(command)} failed: {exc}"
        if proc.returncode != 0:
            return f"{' '.join(command)} failed: {proc.stderr.strip()[-300:]}"
    return ""


def start_browser(downloads: Path):
    """Headless chromium (selenium) whose downloads land in ``downloads``; pytest.skip says why if none."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install selenium==4.51.0, the dev extra)")
    chromium, driver_path = _which(CHROMIUM), _which(DRIVER)
    if not (chromium and driver_path):
        why = _install_chromium()
        chromium, driver_path = _which(CHROMIUM), _which(DRIVER)
        if not (chromium and driver_path):
            pytest.skip(f"no chromium + chromedriver and none could be installed: {why or 'not found after install'}")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(downloads),
            "download.prompt_for_download": False,
            "download.directory_upgrade": True,
            "safebrowsing.enabled": False,
        },
    )
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    except Exception as exc:  # a browser that cannot start here (no shared memory, ...) is a skip, said why
        pytest.skip(f"chromium could not start headless: {type(exc).__name__}: {str(exc)[:300]}")
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    return driver


def wait_for_file(folder: Path, pattern: str, *, timeout_s: float = 20.0) -> Path:
    """The first finished download matching ``pattern`` in ``folder`` (waits up to ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = [p for p in folder.glob(pattern) if not p.name.endswith(".crdownload") and p.stat().st_size > 0]
        if done and not list(folder.glob("*.crdownload")):
            size = done[0].stat().st_size
            time.sleep(0.2)  # a download still being written grows; a finished one keeps its size
            if done[0].stat().st_size == size:
                return done[0]
            continue
        time.sleep(0.1)
    raise AssertionError(f"no download {pattern} in {folder} after {timeout_s} s: {sorted(folder.iterdir())}")
