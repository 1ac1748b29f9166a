"""Slider panels that work with a kernel and without one.

A notebook's sliders (ipywidgets) redraw through the kernel, so on a static page (the book,
`make book`, or a notebook viewed without running it) they would be dead. `Panel` gives one
display with two faces:

- in JupyterLab, once its cell runs, the live `ipywidgets.interactive`: every slider position
  redraws through the same `draw` function;
- everywhere else, **frames**: `draw` called at a coarse grid of positions when the notebook
  runs, each saved as a small PNG (and the text `draw` returns) in an HTML block whose own
  sliders step through them. The book's pages run its little script and show those sliders;
  a viewer that strips scripts (JupyterLab before the cell runs, GitHub) shows the note and the
  frame at the default position.

    panel = Panel(show, {"alpha": Slider("α", 0.0, 0.99, 0.01, 0.7, frames=(0.5, 0.7, 0.9)),
                         "gamma": Slider("γ", 1, 12, 1, 4, frames=(1, 2, 4, 8))})
    display(panel)        # live widget + frames + a plain-text note, one output

`draw(**values)` returns a Figure, a string, or (string, Figure). The frames are every
combination of the sliders' `frames` values (at most `MAX_FRAMES`): choose few per slider.

Drawing the frames takes a few seconds a panel. A live session whose outputs will not be saved
for a static page can skip them with the environment variable `SPECNB_PANEL_FRAMES=0`: the
static face is then the note alone (the browser test sets it; `make notebooks` must not).
"""

import base64
import html
import io
import itertools
import json
import os
from dataclasses import dataclass

MAX_FRAMES = 64
FRAME_DPI = 72
FRAME_COLORS = 64  # a plot needs few colours: a palette PNG is a quarter of the size
KERNEL_NOTE = ("🎚 Sliders: they need a running kernel to move freely; run this cell in "
               "JupyterLab (make lab). In the course's book they step through frames drawn "
               "when the notebook ran.")
BOOK_NOTE = ("🎚 Frames drawn when this notebook ran, at the positions below; in JupyterLab "
             "(make lab) the sliders take every value.")


@dataclass(frozen=True)
class Slider:
    """A slider from `low` to `high` in steps of `step`, starting at `value`; `frames`: the
    positions the static page steps through (default: `value` alone)."""
    description: str
    low: float
    high: float
    step: float
    value: float
    frames: tuple = ()

    def __post_init__(self):
        if not (self.low <= self.value <= self.high) or self.step <= 0:
            raise ValueError(f"slider {self.description!r}: need low <= value <= high and "
                             f"step > 0, got {self.low}, {self.value}, {self.high}, step "
                             f"{self.step}")
        outside = [v for v in self.frames if not self.low <= v <= self.high]
        if outside:
            raise ValueError(f"slider {self.description!r}: frames {outside} lie outside "
                             f"[{self.low}, {self.high}]")

    @property
    def integer(self) -> bool:
        return all(float(x).is_integer() for x in (self.low, self.high, self.step, self.value))

    def positions(self) -> list:
        """The frames' positions, sorted, with the starting value among them."""
        values = sorted(set(self.frames) | {self.value})
        return [int(v) for v in values] if self.integer else [float(v) for v in values]

    def start(self) -> int:
        """The index of the starting value among `positions()`."""
        return self.positions().index(int(self.value) if self.integer else float(self.value))

    def label(self, value) -> str:
        return str(int(value)) if self.integer else f"{value:g}"

    def widget(self):
        import ipywidgets

        kind = ipywidgets.IntSlider if self.integer else ipywidgets.FloatSlider
        number = int if self.integer else float
        return kind(value=number(self.value), min=number(self.low), max=number(self.high),
                    step=number(self.step), description=self.description,
                    style={"description_width": "initial"})  # labels in full


def _split(drawn):
    """(text, figure) from what `draw` returned: a Figure, a string or (string, Figure)."""
    from matplotlib.figure import Figure

    if isinstance(drawn, Figure):
        return "", drawn
    if isinstance(drawn, str):
        return drawn, None
    if isinstance(drawn, tuple) and len(drawn) == 2 and isinstance(drawn[0], str) \
            and isinstance(drawn[1], Figure):
        return drawn
    raise TypeError(f"draw must return a Figure, a str or (str, Figure), not {type(drawn)}")


def _png(figure, dpi: int) -> str:
    """The figure as a small palette PNG in base64 (the frames travel inside the notebook)."""
    import matplotlib.pyplot as plt
    from PIL import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    plt.close(figure)  # a pyplot figure would otherwise stay open (and show again)
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    small = io.BytesIO()
    image.quantize(colors=FRAME_COLORS, method=Image.Quantize.MEDIANCUT).save(
        small, format="PNG", optimize=True)
    return base64.b64encode(small.getvalue()).decode("ascii")


def _frame_html(text: str, png) -> str:
    body = f"<pre>{html.escape(text)}</pre>" if text else ""
    return body + (f'<img alt="frame" src="data:image/png;base64,{png}"/>' if png else "")


# The frames other than the first travel in a JSON <script> block, which a page that sanitizes
# HTML (JupyterLab before the cell runs, GitHub) drops with the scripts: there, only the note and
# the starting frame show. Where scripts run (the book), this builds the sliders from
# data-sliders and swaps the frame in. Idempotent: each panel is set up once.
SCRIPT = """<script>
(function () {
  document.querySelectorAll('.specnb-frames:not([data-ready])').forEach(function (panel) {
    panel.setAttribute('data-ready', '1');
    var sliders = JSON.parse(panel.getAttribute('data-sliders'));
    var frames = JSON.parse(panel.querySelector('.specnb-frames-data').textContent);
    var state = sliders.map(function (s) { return s.index; });
    var frame = panel.querySelector('.specnb-frame');
    function show() {
      var key = state.join(',');
      frame.setAttribute('data-key', key);
      frame.innerHTML = frames[key];
    }
    var controls = panel.querySelector('.specnb-frames-controls');
    sliders.forEach(function (s, i) {
      var row = document.createElement('label');
      row.className = 'specnb-frames-slider';
      row.style.display = 'block';
      var name = document.createElement('span');
      name.textContent = s.description + ' ';
      var input = document.createElement('input');
      input.type = 'range'; input.min = 0; input.max = s.labels.length - 1; input.step = 1;
      input.value = s.index;
      input.setAttribute('aria-label', s.description);
      var value = document.createElement('output');
      value.style.marginLeft = '0.5em';
      value.textContent = s.labels[s.index];
      input.addEventListener('input', function () {
        state[i] = Number(input.value);
        value.textContent = s.labels[state[i]];
        show();
      });
      row.append(name, input, value);
      controls.append(row);
    });
    panel.querySelector('.specnb-frames-note').textContent = panel.getAttribute('data-book-note');
    show();
  });
})();
</script>"""


class Panel:
    """Sliders over `draw`: the live widget in a kernel, frames on a static page (module)."""

    def __init__(self, draw, sliders: dict, *, dpi: int = FRAME_DPI):
        if not sliders or not all(isinstance(s, Slider) for s in sliders.values()):
            raise ValueError("sliders: {argument name: Slider(...)}, at least one")
        count = 1
        for slider in sliders.values():
            count *= len(slider.positions())
        if count > MAX_FRAMES:
            raise ValueError(f"{count} frames (every combination of the sliders' frames) is "
                             f"more than {MAX_FRAMES}: give the sliders fewer frames")
        self.draw, self.sliders, self.dpi = draw, dict(sliders), dpi

    def frames(self) -> list:
        """[(positions as a tuple of indices, text, PNG as base64 or None)], every combination."""
        names = list(self.sliders)
        grids = [self.sliders[n].positions() for n in names]
        out = []
        for indices in itertools.product(*(range(len(g)) for g in grids)):
            values = {n: g[i] for n, g, i in zip(names, grids, indices)}
            text, figure = _split(self.draw(**values))
            out.append((indices, text, None if figure is None else _png(figure, self.dpi)))
        return out

    def static_html(self) -> str:
        """The frames as an HTML block with its own sliders (module docstring)."""
        names = list(self.sliders)
        start = tuple(self.sliders[n].start() for n in names)
        meta = [{"description": self.sliders[n].description,
                 "labels": [self.sliders[n].label(v) for v in self.sliders[n].positions()],
                 "index": start[k]} for k, n in enumerate(names)]
        frames = {",".join(map(str, indices)): _frame_html(text, png)
                  for indices, text, png in self.frames()}
        first = ",".join(map(str, start))
        data = json.dumps(frames).replace("</", "<\\/")  # no "</script>" inside the block
        return (f'<div class="specnb-frames" data-sliders="{html.escape(json.dumps(meta))}" '
                f'data-book-note="{html.escape(BOOK_NOTE)}">'
                f'<div class="specnb-frames-note">{html.escape(KERNEL_NOTE)}</div>'
                f'<div class="specnb-frames-controls"></div>'
                f'<div class="specnb-frame" data-key="{first}">{frames[first]}</div>'
                f'<script type="application/json" class="specnb-frames-data">{data}</script>'
                f'</div>{SCRIPT}')

    def live(self):
        """The ipywidgets `interactive` over `draw` (needs a kernel to redraw)."""
        import ipywidgets
        import matplotlib.pyplot as plt
        from IPython.display import display

        def show(**values):
            text, figure = _split(self.draw(**values))
            if text:
                print(text)
            if figure is not None:
                display(figure)
                plt.close(figure)  # a pyplot figure would otherwise show a second time

        return ipywidgets.interactive(show, **{n: s.widget() for n, s in self.sliders.items()})

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.live()._repr_mimebundle_()
        if os.environ.get("SPECNB_PANEL_FRAMES", "1") == "0":  # nothing saved: no frames
            bundle["text/html"] = (f'<div class="specnb-frames-note">{html.escape(KERNEL_NOTE)}'
                                   f'</div>')
        else:
            bundle["text/html"] = self.static_html()
        bundle["text/plain"] = "[sliders: " + KERNEL_NOTE[2:] + "]"
        return bundle
