"""nbval settings for the notebooks: progress bars write to stderr, so never compare it."""


def pytest_collectstart(collector):
    if str(getattr(collector, "path", "")).endswith(".ipynb"):
        collector.skip_compare += ("text/html", "application/javascript", "stderr",
                                   "application/vnd.jupyter.widget-view+json")
