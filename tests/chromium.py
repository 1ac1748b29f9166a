"""Headless Chromium for the browser tests (test_browser.py, test_book.py), through Playwright.

The system Chromium is used (`apt-get install -y chromium`, which `.ci/run` does when missing),
not Playwright's own download, which needs the internet at test time. `SPECNB_CHROMIUM=/path`
picks another build. Without Chromium or playwright every test that asks for `browser` is
skipped with that message, never silently.
"""

import os
import shutil
from pathlib import Path

import pytest

INSTALL_HINT = ("install Chromium (`apt-get install -y chromium` as root on Debian/Ubuntu, which "
                "`.ci/run` does, or set SPECNB_CHROMIUM=/path/to/chromium) and playwright "
                "(`.venv/bin/pip install -e '.[test]'`, which `make test` does)")


def find_chromium() -> str | None:
    override = os.environ.get("SPECNB_CHROMIUM")
    if override:
        return override if Path(override).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not installed: {INSTALL_HINT}")
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(f"no Chromium found (SPECNB_CHROMIUM={os.environ.get('SPECNB_CHROMIUM')}, "
                    f"PATH): {INSTALL_HINT}")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=args)
        yield browser
        browser.close()
