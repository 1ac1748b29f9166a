"""Sphinx configuration of the course book (`make book`; sources staged by specnb.course.book).

Sphinx with MyST-NB and the book theme is the stack Jupyter Book 1 wraps; used directly, it
installs from PyPI alone and builds offline. Jupyter Book 2 (mystmd) downloads its site theme at
build time, which CI and students without internet cannot do.
"""

project = "specnb: speculative and parallel decoding, taught executably"
author = "the specnb authors"
copyright = "the specnb authors, Apache-2.0"

extensions = [
    "myst_nb",  # notebooks (with their committed outputs) and MyST markdown pages
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site: math renders with no CDN
]

# The committed outputs are the lesson: never execute at build time.
nb_execution_mode = "off"
# $…$ and $$…$$ as in Jupyter; amsmath for aligned derivations.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
# Each notebook's first heading is the page title; later H1s in markdown cells are sections.
suppress_warnings = ["myst.header"]

html_theme = "sphinx_book_theme"
html_title = "specnb"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": True,  # the .ipynb, to run it in JupyterLab
    "repository_url": "",
    "home_page_in_toc": True,
}
html_static_path = ["_static"]
html_css_files = ["specnb.css"]
html_last_updated_fmt = None
# Without a default the theme logs "invalid theme mode" to the console on its first visit.
html_context = {"default_mode": "light"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
