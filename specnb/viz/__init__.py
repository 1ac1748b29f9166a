"""Plots, token traces and widget callbacks for the notebooks: pure, unit-tested functions.

One module per topic; a notebook imports what it shows, e.g. `from specnb.viz import trace`.
Functions return matplotlib figures or plain data and print nothing, so a notebook's checked
cell and its widget cell call the same code. They draw from results and records only: nothing
here runs a model or times anything (that is `specnb.bench` and `specnb.core.latency`), and
nothing here imports those modules, the loops or the model loaders.
"""
