"""Test tiers, applied at collection so that nobody has to remember them (see pyproject.toml).

- `notebooks`: every item nbval collects from a notebook (`*.ipynb`).
- `embedded`: every test that requests the `embedded` or `embedded_draft` fixture, directly or
  through another fixture. Tests that load the embedded model another way (a command's `main`,
  `load_pair()` with no name) carry the marker themselves.
- `slow` (over ~20 s on a 2-core CPU) is marked by hand where a test is defined.
- `browser`: tests/test_browser.py, JupyterLab in headless Chromium (marked in that module).

`make test` runs every tier; `make test-fast` deselects `embedded`, `notebooks`, `slow` and
`browser`. Files holding long items run first (`longest_files_first`).
This file lives at the root so it applies however pytest is pointed at tests/ or notebooks/.
"""

import pytest

EMBEDDED_FIXTURES = {"embedded", "embedded_draft"}
TEST_FILES_LISTED = 25


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
        if EMBEDDED_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.embedded)
    longest_files_first(items)


def longest_files_first(items) -> None:
    """Notebooks first, then files with a `slow` or `browser` item, then the rest; each file's
    items keep their order (a notebook's cells run in order). `make test`'s workers (pytest-xdist,
    `--dist loadfile --no-loadscope-reorder`) take whole files in this order: a long notebook
    started last would leave the other core idle while it ran, started first it has the short
    files fill in around it."""
    heavy = {}
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        tier = 0 if item.get_closest_marker("notebooks") else \
            1 if item.get_closest_marker("slow") or item.get_closest_marker("browser") else 2
        heavy[file] = min(heavy.get(file, 2), tier)
    items.sort(key=lambda item: heavy[item.nodeid.split("::", 1)[0]])  # stable


def pytest_terminal_summary(terminalreporter):
    """One line per notebook and their total: the time nbval spent executing each (≤ ~2 min each
    on a 2-core CPU), then the slowest test files, so where the suite spends its time shows in
    every CI log."""
    seconds = {}
    for reports in terminalreporter.stats.values():  # "" holds passed set-ups and tear-downs
        for report in reports:
            if isinstance(report, pytest.TestReport):
                path = report.nodeid.split("::", 1)[0]
                seconds[path] = seconds.get(path, 0.0) + report.duration
    notebooks = {path: spent for path, spent in seconds.items() if path.endswith(".ipynb")}
    if notebooks:
        terminalreporter.section("notebook run times (nbval)")
        for path, spent in sorted(notebooks.items()):
            terminalreporter.write_line(f"{spent:7.1f} s  {path}")
        terminalreporter.write_line(f"{sum(notebooks.values()):7.1f} s  all {len(notebooks)} notebooks")
    files = sorted(((spent, path) for path, spent in seconds.items()
                    if not path.endswith(".ipynb")), reverse=True)
    if len(files) > 1:
        # Set-up and tear-down included: a file's fixtures count where they are spent.
        terminalreporter.section("slowest test files")
        for spent, path in files[:TEST_FILES_LISTED]:
            terminalreporter.write_line(f"{spent:7.1f} s  {path}")
        terminalreporter.write_line(f"{sum(spent for spent, _ in files):7.1f} s  all {len(files)} files")
