"""The course as a static HTML book: `make book` (= `python -m specnb.course.book`).

    python -m specnb.course.book [--out book/_build/html]

Nothing is executed: the pages show the notebooks' committed outputs. The build copies what the
book shows into a staging folder (`book/_build/source/`, so the tracked files are never
rewritten) and runs Sphinx there with `book/conf.py`:

- `index.md`: `book/index.md` (the front page: the learning path) with the table of notebooks
  taken from README.md's "The notebooks", each name linked to its page;
- `instructors.md`: `assignments/README.md` (releasing and grading the assignments);
- `notebooks/*.ipynb`: each notebook with two changes a static page needs. A widget's output
  (sliders need a running kernel) shows its frames where it has them (`specnb.viz.panel`: the
  page's own sliders step through figures drawn when the notebook ran), else a one-line note
  that says so and how to start JupyterLab, instead of a blank space; "notebook 05" in the
  prose becomes a link to that page.

Warnings fail the build (`-W`): a broken link or a missing figure is an error, not a message
lost in the log.
"""

import argparse
import copy
import pathlib
import re
import shutil
import sys
import time

import nbformat

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FRAMES = 'class="specnb-frames"'  # a `specnb.viz.panel.Panel`'s static face
TABLE_MARKER = "<!-- specnb.course.book writes the table here from README.md \"The notebooks\" -->"
WIDGET_NOTE = ("<div class=\"specnb-widget-note\">🎚 <b>Interactive:</b> in a running notebook "
               "this cell shows sliders (they need a kernel, which a book page does not have). "
               "Run the notebook with <code>make lab</code> to move them.</div>")
# "notebook 05", "Notebooks 05", but not inside `code` or an existing [link](...).
MENTION = re.compile(r"(`[^`]*`|\[[^\]]*\]\([^)]*\))|\b([Nn]otebook) (\d\d)\b")


def readme_section(text: str, title: str) -> str:
    """The body of README's `## title` section (up to the next `## `), without its heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise ValueError(f"README.md has no section '## {title}'")
    return match.group(1).strip()


def notebook_table(readme: str, names: list[str]) -> list[tuple[str, str]]:
    """[(notebook name, the question it answers)] from README's table, checked against `names`.

    The README is the one place that says what each notebook answers; a notebook missing from
    it (or a row naming no notebook) is an error, so the book and the README cannot drift.
    """
    table = readme_section(readme, "The notebooks")
    rows = re.findall(r"^\| `(\d\d_[a-z0-9_]+)` \| (.+?) \|$", table, re.M)
    listed = [name for name, _ in rows]
    if sorted(listed) != sorted(names):
        raise ValueError(f"README.md's notebook table lists {sorted(listed)}, notebooks/ holds "
                         f"{sorted(names)}: update the table")
    return rows


def page_title(name: str) -> str:
    number, _, words = name.partition("_")
    return f"{number} {words.replace('_', ' ').capitalize()}"


def link_mentions(text: str, pages: dict) -> str:
    """Link each "notebook NN" of a markdown cell to that notebook's page (relative link)."""
    def replace(match):
        if match.group(1):  # code or a link already: unchanged
            return match.group(1)
        page = pages.get(match.group(3))
        whole = match.group(0)
        return f"[{whole}]({page}.ipynb)" if page else whole
    return MENTION.sub(replace, text)


def static_notebook(notebook, pages: dict):
    """A copy of `notebook` for a static page: widget outputs replaced by their frames or a
    note (see module)."""
    notebook = copy.deepcopy(notebook)
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = link_mentions(cell.source, pages)
        for index, output in enumerate(cell.get("outputs", [])):
            data = output.get("data", {})
            if WIDGET_VIEW in data and FRAMES in data.get("text/html", ""):
                cell.outputs[index] = nbformat.v4.new_output(
                    "display_data", data={"text/html": data["text/html"],
                                          "text/plain": data.get("text/plain", "")})
            elif WIDGET_VIEW in data:
                cell.outputs[index] = nbformat.v4.new_output(
                    "display_data", data={"text/html": WIDGET_NOTE,
                                          "text/plain": "[interactive: run this notebook with "
                                                        "`make lab`]"})
    return notebook


def front_page(readme: str, rows) -> str:
    template = (BOOK / "index.md").read_text(encoding="utf-8")
    if TABLE_MARKER not in template:
        raise ValueError(f"book/index.md lost its marker line {TABLE_MARKER!r}")
    table = ["| notebook | question it answers |", "| --- | --- |"]
    table += [f"| [{page_title(name)}](notebooks/{name}.ipynb) | {question} |"
              for name, question in rows]
    toctree = ["```{toctree}", ":hidden:", ":caption: Notebooks", ""]
    toctree += [f"notebooks/{name}" for name, _ in rows]
    toctree += ["```", "", "```{toctree}", ":hidden:", ":caption: Course", "", "instructors",
                "```"]
    return template.replace(TABLE_MARKER, "\n".join(table + [""] + toctree))


def instructors_page() -> str:
    """assignments/README.md, whose title is "For instructors", as it is."""
    page = (ROOT / "assignments" / "README.md").read_text(encoding="utf-8")
    if not page.startswith("# For instructors\n"):
        raise ValueError("assignments/README.md must start with '# For instructors'")
    return page


def stage(source: pathlib.Path) -> list[str]:
    """Write the book's pages into `source` (emptied first); return the notebook names."""
    if source.exists():
        shutil.rmtree(source)
    (source / "notebooks").mkdir(parents=True)
    readme = README.read_text(encoding="utf-8")
    names = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    rows = notebook_table(readme, names)
    pages = {name[:2]: name for name in names}
    (source / "index.md").write_text(front_page(readme, rows), encoding="utf-8")
    (source / "instructors.md").write_text(instructors_page(), encoding="utf-8")
    for name in names:
        notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nbformat.write(static_notebook(notebook, pages), source / "notebooks" / f"{name}.ipynb")
    return names


def build(out: pathlib.Path, quiet: bool = True) -> pathlib.Path:
    """Stage and build the book into `out`; return its index.html. Raises on any warning."""
    from sphinx.cmd.build import build_main

    source = BOOK / "_build" / "source"
    stage(source)
    args = ["-b", "html", "-c", str(BOOK), "-W", "--keep-going", "-j", "1",
            "-d", str(BOOK / "_build" / "doctrees"), str(source), str(out)]
    if quiet:
        args.insert(0, "-q")
    status = build_main(args)
    if status != 0:
        raise RuntimeError(f"sphinx-build failed (status {status}); its messages are above")
    return out / "index.html"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specnb.course.book",
                                     description="Build the course as a static HTML book "
                                                 "(committed outputs; nothing is executed).")
    parser.add_argument("--out", type=pathlib.Path, default=BOOK / "_build" / "html",
                        help="where the HTML goes (default: book/_build/html)")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        index = build(args.out.resolve(), quiet=not args.verbose)
    except (RuntimeError, ValueError) as error:
        print(f"book: {error}", file=sys.stderr)
        return 1
    print(f"book built in {time.perf_counter() - started:.0f} s: open {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
