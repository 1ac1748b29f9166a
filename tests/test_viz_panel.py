"""specnb.viz.panel: one display, a live widget in a kernel and frames on a static page.

The frames are checked as data (one per combination, the starting one visible, the text and the
image each frame drew) and, in headless Chromium (marker `browser`), as a page: moving a slider
shows another frame, and the panel's note says what the book shows.
"""

import json
import re

import matplotlib
import pytest
from chromium import browser  # noqa: F401 - the module-scoped fixture
from matplotlib.figure import Figure

from specnb.course.book import WIDGET_VIEW
from specnb.viz.panel import BOOK_NOTE, KERNEL_NOTE, MAX_FRAMES, Panel, Slider

matplotlib.use("Agg")


def bar(height, width=1):
    fig = Figure(figsize=(3, 2))
    fig.subplots().bar([0], [height], width=width / 4)
    return f"height {height}, width {width}", fig


def two_sliders():
    return Panel(bar, {"height": Slider("height", 0.0, 2.0, 0.1, 1.0, frames=(0.5, 2.0)),
                       "width": Slider("width", 1, 4, 1, 2, frames=(1, 4))})


def frames_of(page_html: str) -> dict:
    """{key: (text, PNG)} from the JSON block, and the key of the frame the HTML shows."""
    block = re.search(r'<script type="application/json" class="specnb-frames-data">(.*?)</script>',
                      page_html).group(1)
    frames = {}
    for key, body in json.loads(block).items():
        text, png = re.fullmatch(r'<pre>([^<]*)</pre><img alt="frame" '
                                 r'src="data:image/png;base64,([^"]+)"/>', body).groups()
        frames[key] = (text, png)
    shown = re.search(r'<div class="specnb-frame" data-key="([^"]*)">(.*?)</div>', page_html)
    assert shown.group(2) == json.loads(block)[shown.group(1)]
    return frames, shown.group(1)


def test_one_frame_per_combination_and_the_starting_one_shown():
    frames, shown = frames_of(two_sliders().static_html())
    assert len(frames) == 9  # (0.5, 1.0, 2.0) × (1, 2, 4): the starting values join the frames
    assert shown == "1,1" and frames[shown][0] == "height 1.0, width 2"
    assert frames["0,0"][0] == "height 0.5, width 1" and frames["2,2"][0] == "height 2.0, width 4"
    assert len({png for _, png in frames.values()}) == 9  # every frame drew its own figure


def test_a_text_cannot_close_the_json_block():
    panel = Panel(lambda n: f"</script><b>{n}</b>", {"n": Slider("n", 0, 2, 1, 0, frames=(2,))})
    page_html = panel.static_html()
    assert page_html.count("</script>") == 2  # the JSON block's and the script's own
    assert "&lt;/script&gt;&lt;b&gt;0&lt;/b&gt;" in page_html


def test_the_sliders_positions_and_labels_travel_as_data():
    html = two_sliders().static_html()
    assert "data-sliders=\"[{&quot;description&quot;: &quot;height&quot;, &quot;labels&quot;: " \
           "[&quot;0.5&quot;, &quot;1&quot;, &quot;2&quot;], &quot;index&quot;: 1}" in html
    assert "&quot;labels&quot;: [&quot;1&quot;, &quot;2&quot;, &quot;4&quot;]" in html
    assert KERNEL_NOTE.split(";")[0] in html and "<script>" in html


def test_the_bundle_holds_the_widget_the_frames_and_a_note(monkeypatch):
    monkeypatch.delenv("SPECNB_PANEL_FRAMES", raising=False)  # the default: frames drawn
    bundle = two_sliders()._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and 'class="specnb-frames"' in bundle["text/html"]
    assert "running kernel" in bundle["text/plain"]


def test_a_session_that_saves_nothing_can_skip_the_frames(monkeypatch):
    drawn = []
    panel = Panel(lambda height: drawn.append(height) or bar(height),
                  {"height": Slider("height", 0.0, 2.0, 0.1, 1.0, frames=(0.5, 2.0))})
    monkeypatch.setenv("SPECNB_PANEL_FRAMES", "0")
    bundle = panel._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and "running kernel" in bundle["text/html"]
    live_draws = len(drawn)  # the widget's own first draw, if it makes one
    assert "specnb-frames-data" not in bundle["text/html"] and live_draws <= 1
    monkeypatch.setenv("SPECNB_PANEL_FRAMES", "1")
    assert "specnb-frames-data" in panel._repr_mimebundle_()["text/html"]
    assert len(drawn) == 2 * live_draws + 3  # and now the three frames (0.5, 1.0, 2.0)


@pytest.mark.parametrize("make, message", [
    (lambda: Slider("x", 0, 1, 0.1, 2), "low <= value <= high"),
    (lambda: Slider("x", 0, 1, 0, 0.5), "step > 0"),
    (lambda: Slider("x", 0, 1, 0.1, 0.5, frames=(0.2, 3)), r"frames \[3\] lie outside"),
    (lambda: Panel(bar, {}), "at least one"),
    (lambda: Panel(bar, {"height": (0, 1)}), "Slider"),
    (lambda: Panel(bar, {"height": Slider("h", 0, 100, 1, 0, frames=tuple(range(1, 9))),
                         "width": Slider("w", 0, 100, 1, 0, frames=tuple(range(1, 9)))}),
     f"81 frames .* more than {MAX_FRAMES}"),
])
def test_bad_sliders_fail_with_a_message(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_draw_that_returns_something_else_fails_with_a_message():
    panel = Panel(lambda height: [height], {"height": Slider("h", 0, 1, 0.5, 0.5)})
    with pytest.raises(TypeError, match="Figure, a str or"):
        panel.static_html()


@pytest.mark.browser
def test_moving_a_slider_on_a_static_page_shows_another_frame(browser, tmp_path):  # noqa: F811
    page_file = tmp_path / "panel.html"
    page_file.write_text(f"<html><body>{two_sliders().static_html()}</body></html>",
                         encoding="utf-8")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    frame = page.locator(".specnb-frame")
    assert frame.count() == 1 and frame.inner_text() == "height 1.0, width 2"
    assert page.locator(".specnb-frames-note").inner_text() == BOOK_NOTE
    sliders = page.locator(".specnb-frames input[type=range]")
    assert sliders.count() == 2
    sliders.nth(0).focus()
    page.keyboard.press("ArrowRight")
    assert frame.inner_text() == "height 2.0, width 2"
    sliders.nth(1).focus()
    page.keyboard.press("Home")
    assert frame.inner_text() == "height 2.0, width 1"
    assert page.locator(".specnb-frames output").all_inner_texts() == ["2", "1"]
    assert not errors
    page.close()
