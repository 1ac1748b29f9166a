"""The course as a book (`make book`, specnb.course.book): the staging rules, then the built site
opened in headless Chromium (marker `browser`; tests/chromium.py says what it needs).

In the browser, every page must load with no console error, show at least as many images as
its notebook has image outputs, have its math typeset by the bundled MathJax (no `$…$` left in
the text), show a widget's frames (specnb.viz.panel) or else the one-line note where a widget
would be, and every internal link must resolve to a page and, where it names one, an anchor on
it. Every slider of every frame panel must step to another frame.
"""

import json
import re
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest
from chromium import browser  # noqa: F401 - the module-scoped fixture

from specnb.course import book

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BUILD_LIMIT_S = 120  # the bound for `make book`


# --- staging (no browser) -------------------------------------------------------------------

def test_widget_outputs_become_a_note_that_names_make_lab():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("interact(f)")])
    notebook.cells[0].outputs = [
        nbformat.v4.new_output("display_data", data={book.WIDGET_VIEW: {"model_id": "x"},
                                                     "text/plain": "[sliders]"}),
        nbformat.v4.new_output("stream", text="kept\n")]
    notebook.metadata["widgets"] = {"state": {}}
    static = book.static_notebook(notebook, {})
    first, second = static.cells[0].outputs
    assert book.WIDGET_VIEW not in first.data and "make lab" in first.data["text/html"]
    assert second.text == "kept\n" and "widgets" not in static.metadata
    assert book.WIDGET_VIEW in notebook.cells[0].outputs[0].data  # the original is untouched


def test_a_panels_frames_stay_and_its_live_widget_goes():
    frames = '<div class="specnb-frames" data-sliders="[]">…</div><script></script>'
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("display(panel)")])
    notebook.cells[0].outputs = [nbformat.v4.new_output(
        "display_data", data={book.WIDGET_VIEW: {"model_id": "x"}, "text/html": frames,
                              "text/plain": "[sliders]"})]
    (output,) = book.static_notebook(notebook, {}).cells[0].outputs
    assert output.data == {"text/html": frames, "text/plain": "[sliders]"}


def test_notebook_mentions_become_links_except_in_code_and_links():
    pages = {"05": "05_speculative_decoding", "10": "10_drafting"}
    text = ("As notebook 05 showed (Notebook 10 too), `notebook 05` stays code, "
            "[notebook 05](elsewhere.md) stays a link, notebook 99 has no page.")
    linked = book.link_mentions(text, pages)
    assert "[notebook 05](05_speculative_decoding.ipynb) showed" in linked
    assert "[Notebook 10](10_drafting.ipynb)" in linked
    assert "`notebook 05` stays" in linked and "[notebook 05](elsewhere.md)" in linked
    assert "notebook 99 has" in linked and "[notebook 99]" not in linked


def test_the_readme_table_must_list_every_notebook():
    readme = (ROOT / "README.md").read_text()
    names = [p.stem for p in NOTEBOOKS]
    rows = book.notebook_table(readme, names)
    assert [name for name, _ in rows] == names and all(question for _, question in rows)
    with pytest.raises(ValueError, match="13_new_notebook"):
        book.notebook_table(readme, names + ["13_new_notebook"])
    with pytest.raises(ValueError, match="no section"):
        book.readme_section("# title\n\n## Other\n", "The notebooks")


def test_the_front_page_links_every_notebook_and_lists_it_in_the_toc():
    readme = (ROOT / "README.md").read_text()
    rows = book.notebook_table(readme, [p.stem for p in NOTEBOOKS])
    page = book.front_page(readme, rows)
    assert book.TABLE_MARKER not in page
    for path in NOTEBOOKS:
        assert f"](notebooks/{path.stem}.ipynb)" in page and f"\nnotebooks/{path.stem}\n" in page


# --- the built book in a browser ------------------------------------------------------------

def image_outputs(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(1 for cell in cells for output in cell.get("outputs", [])
               if {"image/png", "image/svg+xml", "image/jpeg"} & set(output.get("data", {})))


def frame_panels(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(1 for cell in cells for output in cell.get("outputs", [])
               if book.FRAMES in "".join(output.get("data", {}).get("text/html", "")))


def widget_outputs(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return sum(1 for cell in cells for output in cell.get("outputs", [])
               if book.WIDGET_VIEW in output.get("data", {}))


@pytest.fixture(scope="module")
def site(tmp_path_factory, browser):  # noqa: F811 - browser first: no build when it is skipped
    out = tmp_path_factory.mktemp("book") / "html"
    started = time.perf_counter()
    index = book.build(out)
    seconds = time.perf_counter() - started
    assert seconds <= BUILD_LIMIT_S, f"the book took {seconds:.0f} s to build"
    return index.parent


PAGE_FACTS = """() => {
  const main = document.querySelector('article') || document.body;
  const text = main.cloneNode(true);
  text.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
  return {
    images: main.querySelectorAll('img, svg:not(mjx-container svg)').length,
    mathSource: main.querySelectorAll('.math').length,
    typeset: main.querySelectorAll('mjx-container').length,
    notes: main.querySelectorAll('.specnb-widget-note, .specnb-frames[data-ready]').length,
    links: Array.from(document.querySelectorAll('a[href]'), a => a.getAttribute('href')),
    ids: Array.from(document.querySelectorAll('[id]'), e => e.id),
    text: text.innerText,
  };
}"""


def page_facts(page, path: Path) -> tuple[dict, list]:
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri(), wait_until="load")
    if page.evaluate("() => !!document.querySelector('script[src*=mathjax]')"):
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                               timeout=60_000)
        page.evaluate("() => MathJax.startup.promise")  # resolves once the page is typeset
    return page.evaluate(PAGE_FACTS), errors


def test_every_page_loads_typeset_with_its_figures_and_links(site, browser):  # noqa: F811
    pages = [site / "index.html", site / "instructors.html"] + [
        site / "notebooks" / f"{path.stem}.html" for path in NOTEBOOKS]
    facts, problems = {}, []
    for path in pages:
        page = browser.new_page()
        facts[path], errors = page_facts(page, path)
        page.close()
        name = path.relative_to(site).as_posix()
        problems += [f"{name}: console error: {error}" for error in errors]
        raw = re.findall(r"\$[^$\n]{1,60}\$", facts[path]["text"])
        if raw:
            problems.append(f"{name}: math left as TeX: {raw[:3]}")
        if facts[path]["typeset"] < facts[path]["mathSource"]:
            problems.append(f"{name}: {facts[path]['mathSource']} formulas, "
                            f"{facts[path]['typeset']} typeset")
    for notebook in NOTEBOOKS:
        seen = facts[site / "notebooks" / f"{notebook.stem}.html"]
        if seen["images"] < image_outputs(notebook):
            problems.append(f"{notebook.stem}: {seen['images']} images on the page, "
                            f"{image_outputs(notebook)} in the notebook")
        if seen["notes"] != widget_outputs(notebook):
            problems.append(f"{notebook.stem}: {seen['notes']} widget notes or frame panels, "
                            f"{widget_outputs(notebook)} widgets in the notebook")
    assert sum(f["typeset"] for f in facts.values()) > 500  # the course is full of math
    assert sum(f["notes"] for f in facts.values()) >= 6  # six panels in 03, 06, 10, 12, 13

    # Every internal link leads to a built page, and its #anchor (if any) exists there.
    ids = {path.resolve(): set(f["ids"]) for path, f in facts.items()}
    checked = 0
    for path, seen in facts.items():
        for href in seen["links"]:
            url = urlparse(href)
            if url.scheme or href.startswith(("mailto:", "javascript:")) or not href.strip():
                continue
            target = (path.parent / unquote(url.path)).resolve() if url.path else path.resolve()
            checked += 1
            if not target.is_file():
                problems.append(f"{path.name}: link {href!r} leads to no file")
            elif url.fragment and target in ids and url.fragment not in ids[target]:
                problems.append(f"{path.name}: link {href!r}: no #{url.fragment} on that page")
    assert checked > 100
    assert not problems, "\n".join(problems)


VISIBLE_FRAME = """panel => {
  const frame = panel.querySelectorAll('.specnb-frame');
  return frame.length === 1 ? frame[0].innerHTML : `${frame.length} frames visible`;
}"""


def test_every_slider_in_the_book_steps_through_its_frames(site, browser):  # noqa: F811
    """Each panel's sliders (specnb.viz.panel) on each page: one frame shows at a time, and
    moving any slider shows another (its figure or its text changes)."""
    moved, problems = 0, []
    for notebook in NOTEBOOKS:
        expected = frame_panels(notebook)
        if not expected:
            continue
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((site / "notebooks" / f"{notebook.stem}.html").as_uri(), wait_until="load")
        panels = page.locator(".specnb-frames[data-ready]")
        if panels.count() != expected:
            problems.append(f"{notebook.stem}: {panels.count()} working panels, {expected} in "
                            f"the notebook")
        for index in range(panels.count()):
            panel = panels.nth(index)
            sliders = panel.locator("input[type=range]")
            if sliders.count() == 0:
                problems.append(f"{notebook.stem}: panel {index} has no sliders")
            for number in range(sliders.count()):
                slider = sliders.nth(number)
                before = panel.evaluate(VISIBLE_FRAME)
                at_end = slider.input_value() == slider.get_attribute("max")
                slider.focus()
                page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
                after = panel.evaluate(VISIBLE_FRAME)
                if "frames visible" in after or after == before:
                    problems.append(f"{notebook.stem}: panel {index}, slider {number}: the "
                                    f"frame did not change ({after[:40]})")
                moved += 1
        problems += [f"{notebook.stem}: {error}" for error in errors]
        page.close()
    assert moved >= 14  # notebooks 03, 06, 10, 12 and 13: fourteen sliders in six panels
    assert not problems, "\n".join(problems)
