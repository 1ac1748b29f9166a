"""nbval settings for the notebooks: progress bars write to stderr, so never compare it; and
nbval saves nothing, so the slider panels draw no static frames."""

import os


def pytest_collectstart(collector):
    if str(getattr(collector, "path", "")).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "application/javascript", "stderr",
                                   "application/vnd.jupyter.widget-view+json")
        # A panel's frames (every combination of its sliders' frame values, drawn for the
        # book's static page) go only into its HTML output, which nbval neither compares nor
        # saves. The kernels nbval starts inherit this; `make notebooks`, which saves the
        # outputs, does not run through pytest and draws them (specnb.viz.panel).
        os.environ.setdefault("SPECNB_PANEL_FRAMES", "0")
