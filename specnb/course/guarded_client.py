"""The grader's side of `grading_guard`: run a submission and judge its test cells from evidence
the student's code does not control.

`GuardHooks` adds to any nbclient NotebookClient three silent requests around the cells (used by
`GuardedClient` here and by nbgrader's `GuardedExecute`, specnb/course/nbgrader_check.py): before
the first cell `grading_guard.install` (before any student code), around each auto-graded test
cell `arm` and `disarm`. They travel as `user_expressions` of an empty, silent execute request,
which IPython evaluates without any input transformer. A test cell's verdict is the kernel's
execute reply (`status`), whatever its outputs show, plus what the call guard saw while it ran.
"""

import ast
import json
import pathlib

from nbclient import NotebookClient
from nbclient.util import ensure_async

from . import grading_guard
from .grading_guard import library_fingerprints, reference_fingerprints

# The guard goes into the kernel as a module of its own, from its file's text: importing it as
# specnb.course.grading_guard would import all of specnb (torch, transformers: seconds) into
# kernels that may not need it.
GUARD_NAME = "_specnb_grading_guard"
LOAD = ("(lambda m: (setattr(m, '__file__', {file!r}), __import__('builtins').exec({code!r}, "
        "m.__dict__), __import__('sys').modules.__setitem__(m.__name__, m), 'loaded')[-1])("
        "__import__('types').ModuleType(" + repr(GUARD_NAME) + "))")
GUARD = "__import__(" + repr(GUARD_NAME) + ").{call}"


def specnb_module_names(sources: list[str]) -> dict:
    """{name: module} for each specnb module the given cells import (`from specnb.course import
    checks` → {"checks": "specnb.course.checks"}): the names test cells call the checks by."""
    import importlib.util

    names = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specnb"):
                for alias in node.names:
                    module = f"{node.module}.{alias.name}"
                    try:
                        found = importlib.util.find_spec(module) is not None
                    except (ImportError, ValueError):  # `from specnb.x.y import function`
                        found = False
                    if found:
                        names[alias.asname or alias.name] = module
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("specnb") and alias.asname:
                        names[alias.asname] = alias.name
    return names


def handed_names(source: str) -> list[str]:
    """The plain names a test cell passes as arguments: `checks.check_verify(verify)` → verify."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return sorted({arg.id for node in ast.walk(tree) if isinstance(node, ast.Call)
                   for arg in list(node.args) + [k.value for k in node.keywords]
                   if isinstance(arg, ast.Name)})


def guard_config(forbidden: list[str], solution_sources: list[str], setup_sources: list[str]):
    """What `grading_guard.install` needs: the forbidden targets, the fingerprints of their code
    and of the reference solution's functions, the specnb modules the fixed cells import."""
    prints = library_fingerprints(forbidden)
    prints.update(reference_fingerprints(solution_sources))
    return {"forbidden": sorted(forbidden), "prints": prints,
            "names": specnb_module_names(setup_sources)}


class GuardHooks:
    """The guard's hooks for any nbclient NotebookClient (nbclient's own, or nbconvert's and
    nbgrader's execute preprocessors, which are NotebookClients too): `guard_notebook` before
    each notebook, `guard_before` / `guard_after` as its on_cell_execute / on_cell_executed.
    After the run, `verdicts[cell_index]` = (reply status, [violations])."""

    def guard_notebook(self, config: dict, tests: dict) -> None:
        """Arm for one notebook: `config` from `guard_config`, `tests` = {cell_index: (grade_id,
        [names the cell hands to the checks])}. A client that runs several notebooks (nbgrader's
        Execute is one object for a whole autograde) calls it before each."""
        self.guard = config
        self.tests = tests
        self.installed = False
        self.verdicts: dict = {}
        self.problems: dict = {}

    async def _ask(self, call: str, expression: str | None = None):
        """Evaluate grading_guard.<call> in the kernel, untouched by input transformers."""
        expression = expression or GUARD.format(call=call)
        msg_id = await ensure_async(self.kc.execute(
            "", silent=True, store_history=False, user_expressions={"r": expression}))
        reply = await self.async_wait_for_reply(msg_id)
        result = (reply or {}).get("content", {}).get("user_expressions", {}).get("r", {})
        if result.get("status") != "ok":
            return None
        return ast.literal_eval(result["data"]["text/plain"])

    async def guard_before(self, cell, cell_index):
        if not self.installed:
            self.installed = True
            path = pathlib.Path(grading_guard.__file__)
            loaded = await self._ask("", LOAD.format(file=str(path), code=path.read_text()))
            answer = await self._ask(f"install({json.dumps(self.guard)!r})") \
                if loaded == "loaded" else None
            if answer != "installed":
                self.problems["install"] = "the grading guard could not be installed"
        if cell_index in self.tests:
            grade_id, handed = self.tests[cell_index]
            answer = await self._ask(f"arm({grade_id!r}, {json.dumps(handed)!r})")
            if answer != "armed":
                self.problems[cell_index] = "the grading guard could not be armed before it"

    async def guard_after(self, cell, cell_index, execute_reply):
        if cell_index not in self.tests:
            return
        status = (execute_reply or {}).get("content", {}).get("status", "missing")
        found = await self._ask("disarm()")
        violations = json.loads(found) if isinstance(found, str) else [
            "the grading guard could not be read after it"]
        if cell_index in self.problems:
            violations.insert(0, self.problems[cell_index])
        if "install" in self.problems:
            violations.insert(0, self.problems["install"])
        self.verdicts[cell_index] = (status, violations)


class GuardedClient(GuardHooks, NotebookClient):
    """Executes like NotebookClient; `verdicts[cell_index]` = (reply status, [violations])."""

    def __init__(self, notebook, config: dict, tests: dict, **kwargs):
        super().__init__(notebook, on_cell_execute=self.guard_before,
                         on_cell_executed=self.guard_after, **kwargs)
        self.guard_notebook(config, tests)
