"""The widget notebooks in a real JupyterLab, in a real (headless) browser.

nbval executes the notebooks' code but never renders a widget. This module starts JupyterLab on a
free loopback port with throwaway settings (autosave off, so the tracked notebooks are never
rewritten), opens every notebook that uses ipywidgets (or specnb.viz.panel) in Chromium through
Playwright and, per notebook: checks that before anything runs each widget's saved output reads as
a note (the panels' frames show without their sliders: a notebook's HTML is sanitized until it
runs); runs the code cells its widgets need (the first cell and every cell that defines a name
they read: tests/notebook_cells.py; nbval has run every cell already, so the races and benchmarks
the widgets do not read are not run twice); waits until no prompt shows `[*]` and the kernel is
idle; checks that no cell shows an error, no widget shows "Error displaying widget" and the
browser logged no console error; then moves each slider with the arrow keys, clicks each
`interact_manual` button and checks that the widget's output (its text and its image) changed.
Screenshots of the key states go to `.ci/artifacts/browser/` (ignored by git; CI keeps it).

It needs Chromium and the Python package playwright (`.ci/run` installs both when missing):

    apt-get install -y chromium          # Debian/Ubuntu, as root (or: sudo apt-get ...)
    .venv/bin/pip install -e '.[test]'   # playwright comes with the test extra

Playwright's own browser download (`playwright install`) is not used: it needs the internet at
test time. `SPECNB_CHROMIUM=/path/to/chrome` picks another Chromium build (tests/chromium.py).
Without either, every test here is skipped with that message, never silently.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from chromium import browser  # noqa: F401 - the module-scoped fixture, shared with test_book
from notebook_cells import cells_the_widgets_need, notebook_cells

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / ".ci" / "artifacts" / "browser"
# A busy 2-core machine: one run of a widget notebook took 55 s, another stalled for minutes while a
# benchmark ran. These bound a hang; a healthy run needs a fraction of them.
SERVER_START_S = 120
RUN_ALL_S = 600
WIDGET_UPDATE_S = 180
UI_S = 60

pytestmark = [pytest.mark.browser, pytest.mark.embedded]


def widget_notebooks() -> list[str]:
    """Notebooks whose code imports ipywidgets or specnb.viz.panel (its live face is an
    ipywidgets `interactive`): the ones a browser has to render."""
    names = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if re.search(r"^\s*(import ipywidgets|from ipywidgets import|from specnb\.viz\.panel "
                     r"import)", code, re.MULTILINE):
            names.append(path.name)
    return names


def test_the_widget_notebooks_are_found():
    assert {"03_deriving_the_acceptance_rule.ipynb", "06_when_speculation_pays.ipynb",
            "10_timing.ipynb", "12_bending_the_rules.ipynb",
            "13_token_trees.ipynb"} <= set(widget_notebooks())


# --- the browser and the server -------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_settings(settings_dir: Path) -> None:
    """User settings of the throwaway JupyterLab: nothing saved, nothing fetched from the web,
    and every cell in the page (JupyterLab 4 otherwise renders only the cells near the view, so
    a long notebook's widget cell may not exist in the page yet)."""
    overrides = {
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                         "checkForUpdates": False},
        "@jupyterlab/extensionmanager-extension/plugin": {"enabled": False},
    }
    for plugin, values in overrides.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, browser):
    """One JupyterLab for the module: (base URL, token). Its settings live in a temp folder."""
    home = tmp_path_factory.mktemp("jupyterlab")
    write_settings(home / "settings")
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "PYDEVD_DISABLE_FILE_VALIDATION": "1",
           # The kernels draw the live widgets; the static frames are for saved pages only.
           "SPECNB_PANEL_FRAMES": "0"}
    port, token = free_port(), os.urandom(16).hex()
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={NOTEBOOKS}", "--LabApp.expose_app_in_browser=True",
               "--LanguageServerManager.autodetect=False"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = (home / "server.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start; its log:\n"
                                f"{(home / 'server.log').read_text()[-3000:]}")
                time.sleep(1)
        yield base, token
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the kernels it started
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


# --- one notebook ---------------------------------------------------------------------------

# Read through the exposed app (`expose_app_in_browser`): the kernel's own status and the cell
# models, which the DOM alone cannot tell reliably (the indicator reads idle before a kernel).
NOTEBOOK_STATE_JS = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    if (!panel || !panel.content || !panel.content.widgets) return null;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    const cells = panel.content.widgets.filter(c => c.model.type === 'code');
    return {
        kernel: kernel ? kernel.status : null,
        running: cells.filter(c => c.promptNode && c.promptNode.textContent.includes('*')).length,
        counts: cells.map(c => c.model.executionCount),
        errors: cells.flatMap((c, i) => c.model.outputs.toJSON()
            .filter(o => o.output_type === 'error')
            .map(o => `cell ${i}: ${o.ename}: ${o.evalue}`)),
    };
}"""


def notebook_state(page) -> dict:
    return page.evaluate(NOTEBOOK_STATE_JS)


def wait_until(predicate, timeout_s: float, what: str, poll_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


# Run one cell at a time through JupyterLab's own command (as Ctrl+Enter does); each awaits its
# execution, so the cells run in order.
RUN_CELLS_JS = """async (indices) => {
    const app = window.jupyterapp;
    const notebook = app.shell.currentWidget.content;
    for (const index of indices) {
        notebook.activeCellIndex = index;
        await app.commands.execute('notebook:run-cell');
    }
}"""


def run_cells(page, cells: list) -> tuple[float, list]:
    """Run the code cells the widgets need (tests/notebook_cells.py), in order, and wait for
    them to finish; returns (seconds, their positions among the code cells)."""
    wait_until(lambda: (notebook_state(page) or {}).get("kernel") == "idle", RUN_ALL_S,
               "the kernel to start")
    indices = cells_the_widgets_need(cells)
    code_positions = [position for position, index in enumerate(
        i for i, cell in enumerate(cells) if cell["cell_type"] == "code") if index in indices]
    start = time.monotonic()
    page.evaluate(RUN_CELLS_JS, indices)

    def finished():
        state = notebook_state(page)
        return state["running"] == 0 and state["kernel"] == "idle"

    wait_until(lambda: finished() and (time.sleep(1) or finished()), RUN_ALL_S,
               "every cell to finish (no [*] left, kernel idle)")
    state = notebook_state(page)
    assert not state["errors"], f"error outputs: {state['errors']}"
    not_run = [k for k in code_positions if state["counts"][k] is None]
    assert not not_run, f"code cells {not_run} did not run"
    return time.monotonic() - start, code_positions


def widget_output(interact) -> dict:
    """What an `interact` widget shows: its text and the data of its images (once loaded)."""
    out = interact.locator(".widget-output")
    out.locator("img").evaluate_all(
        "imgs => Promise.all(imgs.map(i => i.decode().catch(() => null)))")
    return {"text": out.inner_text(),
            "images": out.locator("img").evaluate_all("imgs => imgs.map(i => i.src)")}


def changed(before: dict):
    """A check that the output is new: each part that was there (text, images) is there and
    differs; from an empty output, anything at all. It waits out the half-drawn states."""
    def check(interact):
        now = widget_output(interact)
        if not (before["text"].strip() or before["images"]):
            return now if now["text"].strip() or now["images"] else None
        text, text_before = now["text"].strip(), before["text"].strip()
        text_ok = not text_before or text not in ("", text_before)
        images_ok = not before["images"] or (now["images"] and now["images"] != before["images"])
        return now if text_ok and images_ok else None
    return check


def screenshot(page, notebook: str, state: str, locator=None) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{Path(notebook).stem}-{state}.png"
    (locator or page).screenshot(path=str(path))
    return path


@pytest.fixture(scope="module")
def tracked_notebooks():
    """The notebooks' bytes before the browser opens them: after, they must be the same."""
    before = {path.name: path.read_bytes() for path in NOTEBOOKS.glob("*.ipynb")}
    yield
    rewritten = [name for name, data in before.items()
                 if (NOTEBOOKS / name).read_bytes() != data]
    assert not rewritten, f"JupyterLab rewrote {rewritten} (autosave must be off)"


class LabPage:
    """One JupyterLab page for the module: loading the app costs a few seconds of the browser's
    CPU, so each notebook opens in it (as from the file browser) and is closed after its test.
    The console errors of loading the app count for the first notebook's test. A test that
    leaves the page unusable makes the next one load it again."""

    def __init__(self, browser, base: str, token: str):
        self.browser, self.url = browser, f"{base}/lab?reset&token={token}"
        self.context = self.page = None
        self.console_errors = []

    def get(self):
        if self.page is None:
            self.context = self.browser.new_context(viewport={"width": 1400, "height": 1000})
            self.page = self.context.new_page()
            self.page.on("console", lambda m: self.console_errors.append(m.text)
                         if m.type == "error" else None)
            self.page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))
            self.page.set_default_timeout(UI_S * 1000)
            self.page.goto(self.url)
            self.page.wait_for_function("() => window.jupyterapp", timeout=UI_S * 1000)
            self.page.evaluate("async () => { await window.jupyterapp.restored; }")
        return self.page

    def open(self, notebook: str):
        page = self.get()
        page.evaluate("async path => { await window.jupyterapp.commands.execute("
                      "'docmanager:open', {path}); }", notebook)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=UI_S * 1000)
        return page

    def close_notebook(self):
        """Shut the kernel down (the next notebook gets the CPU) and close without saving."""
        try:
            self.page.evaluate("""async () => {
                const panel = window.jupyterapp.shell.currentWidget;
                if (panel && panel.sessionContext) await panel.sessionContext.shutdown();
                if (panel) panel.dispose();
            }""")
            self.page.wait_for_selector(".jp-Notebook", state="detached", timeout=UI_S * 1000)
        except Exception:  # noqa: BLE001 - a page in an unknown state: the next test reloads
            self.quit()
        self.console_errors.clear()  # the test has judged its own

    def quit(self):
        if self.context is not None:
            self.context.close()
        self.context = self.page = None


@pytest.fixture(scope="module")
def lab_page(browser, lab):
    holder = LabPage(browser, *lab)
    yield holder
    holder.quit()


@pytest.mark.parametrize("notebook", widget_notebooks())
def test_widgets_render_and_respond(notebook, lab_page, tracked_notebooks):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    console_errors = lab_page.console_errors
    shots = []
    page = lab_page.open(notebook)
    try:
        # Before anything runs, a saved widget output reads as the one-line note, not as the
        # widget's raw repr `interactive(children=(FloatSlider(...`.
        wait_until(lambda: (notebook_state(page) or {}).get("kernel") == "idle", RUN_ALL_S,
                   "the kernel to start")
        notes = page.locator(".jp-OutputArea-output", has_text="they need a running kernel")
        try:
            notes.first.wait_for(timeout=UI_S * 1000)
        except PlaywrightTimeout:
            pytest.fail("no note where the saved widget output is")
        notes.first.scroll_into_view_if_needed()
        shots.append(screenshot(page, notebook, "opened"))
        text = page.locator(".jp-Notebook").inner_text()
        assert "interactive(children=" not in text and "Error displaying widget" not in text
        seconds, ran = run_cells(page, notebook_cells(NOTEBOOKS / notebook))
        print(f"\n{notebook}: the {len(ran)} code cells the widgets need ({ran}) took "
              f"{seconds:.0f} s")
        state = notebook_state(page)
        assert not state["errors"], f"error outputs: {state['errors']}"
        assert page.locator(".jp-OutputArea-output[data-mime-type="
                            "'application/vnd.jupyter.error']").count() == 0
        page.wait_for_timeout(1000)  # let the widget views render
        assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()

        interacts = page.locator(".widget-interact")
        assert interacts.count() >= 1, "no interact widget rendered"
        for index in range(interacts.count()):
            interact = interacts.nth(index)
            interact.scroll_into_view_if_needed()
            sliders = interact.locator(".jupyter-widgets.widget-slider")
            buttons = interact.locator("button")
            assert sliders.count() >= 1, "an interact widget without sliders"
            if buttons.count():  # interact_manual: nothing shows before the first click
                buttons.first.click()
                wait_until(lambda: changed({"text": "", "images": []})(interact),
                           WIDGET_UPDATE_S, "the first output of the interact_manual widget")
            shots.append(screenshot(page, notebook, f"widget{index}-before", interact))
            for slider_index in range(sliders.count()):
                slider = sliders.nth(slider_index)
                label = slider.locator(".widget-label").inner_text()
                readout = slider.locator(".widget-readout")
                value_before = readout.inner_text()
                before = widget_output(interact)
                handle = slider.locator(".noUi-handle")
                handle.focus()
                for _ in range(3):
                    handle.press("ArrowRight")
                page.wait_for_timeout(300)
                if readout.inner_text() == value_before:  # at its maximum: the other way
                    for _ in range(3):
                        handle.press("ArrowLeft")
                wait_until(lambda: readout.inner_text() != value_before, UI_S,
                           f"slider {label!r} to move")
                if buttons.count():
                    buttons.first.click()
                after = wait_until(lambda: changed(before)(interact), WIDGET_UPDATE_S,
                                   f"the output (text and image) to change after moving {label!r}")
                print(f"{notebook}: moved {label!r} {value_before} -> {readout.inner_text()}: "
                      f"text {'changed' if after['text'] != before['text'] else 'none'}, "
                      f"{len(after['images'])} new image(s)")
                # The label is readable in full: nothing cut off with an ellipsis.
                assert slider.locator(".widget-label").evaluate(
                    "e => e.scrollWidth <= e.clientWidth"), f"slider label {label!r} is cut"
            shots.append(screenshot(page, notebook, f"widget{index}-after", interact))
        state = notebook_state(page)
        assert not state["errors"], f"error outputs after moving the sliders: {state['errors']}"
        assert "Error displaying widget" not in page.locator(".jp-Notebook").inner_text()
        assert not console_errors, f"browser console errors: {console_errors}"
    finally:
        shots.append(screenshot(page, notebook, "page"))
        print(f"{notebook}: screenshots in {ARTIFACTS}: {', '.join(p.name for p in shots)}")
        lab_page.close_notebook()
