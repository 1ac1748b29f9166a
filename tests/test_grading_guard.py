"""Grading that a determined student cannot fool cheaply (specnb.course.grading_guard).

Every attempt below earned full marks under the grader before it (a trial by a student who
wanted the points without the understanding); each must now get 0 on the test cell it targets,
for the reason stated (the guard's verdict, or the honest failure of a wrong answer that the
attempt tried to hide), while an honest solution keeps its points. They run on assignment 02
(batched verify, whose library function is a drop-in answer once wrapped), graded together.
"""

import importlib
import io
import json
import marshal
import pathlib
import types

import nbformat
import pytest

from specnb.course import assignments, grading_guard

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "assignments" / "source"
NAME = "02_batched_verify.ipynb"
SOLUTION_ID, TEST_ID = "ex2-verify", "ex2-verify-tests"
LIBRARY = ROOT / "specnb" / "core" / "verify.py"

# The student's answer wraps whatever `lib` their route reached: the library's verify returns a
# Verdict, the exercise asks for its `[B, γ+1]` tokens. Names are spelled so that the static scan
# ("Writing it yourself") does not see them: the run-time guard has to.
SIGNATURE = "def verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, generator):\n"
WRAP = SIGNATURE + ("    return lib(target_probs, draft_probs, draft_token_ids, bonus_token_ids, "
                    "generator=generator).tokens\n")
PICK = "[v for n, v in {space}.items() if n == 'ver' + 'ify'][0]"
WRONG = SIGNATURE + ("    import torch\n    return torch.full((target_probs.shape[0], "
                     "target_probs.shape[1] + 1), -1)\n")
COPY_FILE = "open({name!r}, 'w').write(open(" + repr(str(LIBRARY)) + ").read().replace(" \
    "'from .', 'from specnb.core.'))\n"
# (student, solution cell, files shipped beside the notebook, what the report must say)
LIBRARY_USE, A_COPY = "the library's own", "a copy of"
WRONG_ANSWER = "gave a wrong answer"
ATTEMPTS = [
    ("resolve-name", "import pkgutil\nlib = pkgutil.resolve_name('specnb.core.verify:' + 'ver' "
                     "'ify')\n" + WRAP, {}, LIBRARY_USE),
    ("pickle", "import pickle\nlib = pickle.loads(b'cspecnb.core.verify\\nver' b'ify\\n.')\n"
     + WRAP, {}, LIBRARY_USE),
    ("marshal", "import marshal, sys, types\n"  # a new function from a copy of the code
                "module = sys.modules.get('specnb.core.' + 'ver' + 'ify')\n"
                f"original = {PICK.format(space='vars(module)')}\n"
                "code = marshal.loads(marshal.dumps(original.__code__))\n"
                "lib = types.FunctionType(code, dict(vars(module)))\n"
                "lib.__kwdefaults__ = original.__kwdefaults__\n" + WRAP, {}, A_COPY),
    ("imp-load-source", "import warnings\nwarnings.simplefilter('ignore')\nimport imp\n"
                        + COPY_FILE.format(name="loadable.py") +
                        "copy = imp.load_source('loadable', 'loadable.py')\n"
                        f"lib = {PICK.format(space='vars(copy)')}\n" + WRAP, {}, A_COPY),
    ("sys-modules-get", "import sys\nmodule = sys.modules.get('specnb.core.' + 'ver' + 'ify')\n"
                        f"lib = {PICK.format(space='vars(module)')}\n" + WRAP, {}, LIBRARY_USE),
    ("gc-scan", "import gc, types\nimport specnb.core\n"
                "lib = [o for o in gc.get_objects() if isinstance(o, types.FunctionType) and "
                "o.__name__ == 'ver' + 'ify' and o.__module__ == 'specnb.core.' + 'ver' + 'ify']"
                "[0]\n" + WRAP, {}, LIBRARY_USE),
    ("exec-via-builtins", "b = globals()['__buil' + 'tins__']\nrun = b.__dict__.get('exe' + 'c')\n"
                          "space = {'__name__': 'specnb.core.copy', '__package__': 'specnb.core'}\n"
                          f"run(open({str(LIBRARY)!r}).read(), space)\n"
                          f"lib = {PICK.format(space='space')}\n" + WRAP, {}, A_COPY),
    ("helper-written-by-python", COPY_FILE.format(name="my_helpers.py") +
     "from my_helpers import Verdict\nimport my_helpers\n"
     f"lib = {PICK.format(space='vars(my_helpers)')}\n" + WRAP, {}, A_COPY),
    ("helper-written-by-echo", f"!sed 's/from \\./from specnb.core./' {LIBRARY} > echoed.py\n"
     f"import echoed\nlib = {PICK.format(space='vars(echoed)')}\n" + WRAP, {}, A_COPY),
    ("helper-from-subprocess", "import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
     "'import inspect, sys, specnb.core; m = sys.modules[\"specnb.core.verify\"]; "
     "open(\"sub.py\", \"w\").write(inspect.getsource(m)"
     ".replace(\"from .\", \"from specnb.core.\"))'], check=True)\n"
     f"import sub\nlib = {PICK.format(space='vars(sub)')}\n" + WRAP, {}, A_COPY),
    ("helpers-shipped-beside", "import helpers\n"
     f"lib = {PICK.format(space='vars(helpers)')}\n" + WRAP,
     {"helpers.py": LIBRARY.read_text().replace("from .", "from specnb.core.")},
     "name 'verify' is not defined"),  # `import helpers` failed: the file is not there
    ("reference-solution", "import json\nfrom specnb.course.assignments import SOURCE_DIR\n"
                           f"cells = json.load(open(SOURCE_DIR / {NAME!r}))['cells']\n"
                           "code = [''.join(c['source']) for c in cells if "
                           "c['metadata'].get('nbgrader', {}).get('solution')][0]\n"
                           "open('ref.py', 'w').write('import torch\\n' + code)\n"
                           f"import ref\nlib2 = {PICK.format(space='vars(ref)')}\n"
                           + SIGNATURE + "    return lib2(target_probs, draft_probs, "
                           "draft_token_ids, bonus_token_ids, generator)\n", {}, A_COPY),
    ("input-transformer", WRONG + "get_ipython().input_transformers_post.append(\n"
                          "    lambda lines: ['pass\\n'] if any('checks.' in l for l in lines) "
                          "else lines)\n", {}, WRONG_ANSWER),
    ("custom-exception-handler", WRONG + "get_ipython().set_custom_exc((Exception,), "
                                 "lambda *args, **kwargs: None)\n", {}, WRONG_ANSWER),
    ("checks-replaced", WRONG + "checks.check_verify = lambda *args, **kwargs: None\n", {},
     WRONG_ANSWER),
    ("pre-run-cell-hook", WRONG + "def quiet(info):\n"
                          "    checks.check_verify.__code__ = (lambda *a, **k: None).__code__\n"
                          "get_ipython().events.register('pre_run_cell', quiet)\n", {},
     WRONG_ANSWER),
    ("run-cell-replaced", WRONG + "import types\nshell = get_ipython()\n"
                          "async def fake(self, *args, **kwargs):\n"
                          "    return await type(self).run_cell_async(self, 'pass', "
                          "*args[1:], **kwargs)\n"
                          "shell.run_cell_async = types.MethodType(fake, shell)\n", {},
     WRONG_ANSWER),
]


def submission(folder: pathlib.Path, solution: str, files: dict) -> None:
    notebook = nbformat.read(SOURCE / NAME, as_version=4)
    (cell,) = [c for c in notebook.cells if assignments.grading(c).get("grade_id") == SOLUTION_ID]
    cell.source = solution
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / NAME)
    for name, text in files.items():
        (folder / name).write_text(text)


def honest_solution() -> str:
    """The reference with its locals renamed: the same logic, written by someone else."""
    notebook = nbformat.read(SOURCE / NAME, as_version=4)
    source = next(c.source for c in notebook.cells
                  if assignments.grading(c).get("grade_id") == SOLUTION_ID)
    lines = [line for line in source.split("\n") if "### " not in line]
    return "\n".join(lines).replace("coins", "accepted").replace("excess", "surplus")


@pytest.mark.slow  # one kernel per attempt: about 10 s each on a 2-core CPU
@pytest.mark.embedded
def test_every_gaming_attempt_scores_zero_and_an_honest_solution_full(tmp_path):
    submission(tmp_path / "honest", honest_solution(), {})
    for student, code, files, _ in ATTEMPTS:
        submission(tmp_path / student, code, files)
    report = io.StringIO()
    results = assignments.grade([tmp_path], SOURCE, timeout=120, stream=report)
    by_student = {pathlib.Path(p).parent.name: rows for p, rows in results.items()}
    assert by_student["honest"] == [(TEST_ID, 10.0, 10.0, None)], report.getvalue()
    problems = []
    for student, _, files, fragment in ATTEMPTS:
        ((_, got, _, message),) = [r for r in by_student[student] if r[0] == TEST_ID]
        if got != 0 or fragment not in (message or ""):
            problems.append(f"{student}: {got} points, {message!r} (expected {fragment!r})")
        # Nothing it wrote stayed in its folder: each ran in a throw-away copy.
        left = sorted(p.name for p in (tmp_path / student).iterdir())
        if left != sorted([NAME, *files]):
            problems.append(f"{student}: left {left} in its folder")
    assert not problems, "\n".join(problems)


# --- the pieces, without a kernel ---------------------------------------------------------------

def test_a_copy_has_the_fingerprint_of_the_original_and_a_rewrite_does_not():
    verify = importlib.import_module("specnb.core.verify")  # the module, not the function
    original = grading_guard.fingerprint(verify.verify.__code__)
    assert original is not None
    copy = marshal.loads(marshal.dumps(verify.verify.__code__))
    assert grading_guard.fingerprint(copy) == original
    relocated = compile("\n\n" + LIBRARY.read_text(), "/tmp/elsewhere.py", "exec")
    inner = [c for c in relocated.co_consts if getattr(c, "co_name", "") == "verify"]
    assert grading_guard.fingerprint(inner[0]) == original  # file and lines do not matter
    renamed = compile(LIBRARY.read_text().replace("generator", "rng"), "x.py", "exec")
    inner = [c for c in renamed.co_consts if getattr(c, "co_name", "") == "verify"]
    assert grading_guard.fingerprint(inner[0]) != original
    # The guard fingerprints only code whose key a forbidden code shares: every copy shares it.
    assert grading_guard.code_key(copy) == grading_guard.code_key(verify.verify.__code__)
    assert grading_guard.code_key(inner[0]) != grading_guard.code_key(verify.verify.__code__)


def test_small_functions_are_not_fingerprinted_so_honest_one_liners_are_safe():
    def ratio(p, q):
        return min(1.0, p / q)
    assert grading_guard.fingerprint(ratio.__code__) is None


def test_code_objects_reach_methods_nested_functions_and_dict_values():
    class Thing:
        def method(self):
            def inner():
                return 1
            return inner

        @staticmethod
        def static():
            return 2

    names = {c.co_name for c in grading_guard.code_objects(Thing)}
    assert {"method", "inner", "static"} <= names
    assert {c.co_name for c in grading_guard.code_objects({"a": Thing.static})} == {"static"}
    assert isinstance(grading_guard.code_objects(Thing.method)[0], types.CodeType)


def test_the_reference_solution_is_fingerprinted_from_the_source_cells():
    notebook = json.loads((SOURCE / NAME).read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"]
             if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    found = grading_guard.reference_fingerprints(cells)
    assert ["the reference solution's verify", None] in [value[:2] for value in found.values()]


def test_handed_names_and_module_names_come_from_the_cells():
    from specnb.course.guarded_client import handed_names, specnb_module_names

    assert handed_names("checks.check_verify(verify, seed=generator)") == ["generator", "verify"]
    assert specnb_module_names(["from specnb.course import checks\nimport torch"]) == {
        "checks": "specnb.course.checks"}
