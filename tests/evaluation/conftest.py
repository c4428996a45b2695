"""A real headless browser for the form and trace-browser tests (see tests/evaluation/browser.py)."""

import pytest

from tests.evaluation.browser import start_browser


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """``(driver, downloads)``: headless chromium whose downloads land in the folder ``downloads``."""
    downloads = tmp_path_factory.mktemp("downloads")
    driver = start_browser(downloads)
    yield driver, downloads
    driver.quit()
