"""nbval settings for the notebooks: progress bars write to stderr, so never compare it; and
nbval saves nothing, so the slider panels draw no static frames."""

import os


def pytest_collectstart(collector):
    if str(getattr(collector, "path", "")).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "application/javascript", "stderr",
                                   "application/vnd.jupyter.widget-view+json")
        collector.setup = without_frames(collector.setup)


def without_frames(start_kernel):
    """nbval's setup, which starts the notebook's kernel, with SPECNB_PANEL_FRAMES=0 in the
    environment the kernel inherits (unless whoever runs the tests set it). A panel's frames,
    every combination of its sliders' frame values drawn for the book's static page, go only
    into its HTML output, which nbval neither compares nor saves; `make notebooks`, which saves
    them, does not run through here (specnb.viz.panel). The tests in this process keep their
    own environment."""
    def setup():
        if "SPECNB_PANEL_FRAMES" in os.environ:
            return start_kernel()
        os.environ["SPECNB_PANEL_FRAMES"] = "0"
        try:
            return start_kernel()
        finally:
            del os.environ["SPECNB_PANEL_FRAMES"]
    return setup
