"""Grading that holds by construction (specnb.course.judge): the verdict is computed outside the
student's kernel, on plain data, and the kernel has neither the library's answers nor the
reference solutions, nor a way out of its folder.

`ATTEMPTS` are ways to earn points without the work, one or more of each class that fooled the
grader in its student's kernel: (1) forging the verdict inside the kernel, in every untouched
notebook; (2) reaching into the checks from the student's function, or patching what they use;
(3) reaching the library's answers from the kernel; (4) the same job under another name, and the
reference solutions on disk. Each must score 0 on the test it targets; the limits (a hang, a
hang that ignores interrupts, a fork, a memory hog, a write outside the folder) score 0 for that
test and the others are still graded. A judge that trusts the kernel's reply (the grader before
this one) must give the forged verdict its points: the test could fail.
"""

import asyncio
import io
import json
import pathlib
import textwrap

import nbformat
import pytest
import torch

from specnb.course import assignments
from specnb.course.judge import confine, wire
from specnb.course.judge.build import withhold
from specnb.course.judge.judge import Judge

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = ROOT / "assignments" / "source"
NAMES = sorted(p.name for p in SOURCE.glob("*.ipynb"))

# (1) One cell added to an untouched notebook: every error of a later cell disappears and every
# later cell (test cells included) compiles to `pass`; a kernel that runs test cells replies
# "ok" to each. The code scan sees nothing to object to.
FORGE = textwrap.dedent("""\
    shell = get_ipython()
    shell.set_custom_exc((BaseException,), lambda *args, **kwargs: None)
    shell.input_transformers_post.append(lambda lines: ['pass\\n'])
    """)

VERIFY = "def verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, generator):\n"
WRAP = VERIFY + ("    return lib(target_probs, draft_probs, draft_token_ids, bonus_token_ids, "
                 "generator=generator).tokens\n")
LOOKUP = "def ngram_lookup(tokens, n_max, n_min, k):\n"
STACK = VERIFY + textwrap.indent(textwrap.dedent("""\
    import sys
    frame = sys._getframe(1)
    while frame is not None and 'expected' not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals['expected']
    """), "    ")
# A wrong sampler (keeps every draft), with what would judge it patched to say "fine".
KEEP_ALL = textwrap.dedent("""\
    import scipy.stats, specnb.stats
    specnb.stats.chi2_pvalue = lambda *args, **kwargs: 1.0
    scipy.stats.chi2.sf = lambda *args, **kwargs: 1.0
    def verify_one(target_probs, draft_probs, draft_token, generator):
        return int(draft_token)
    """)
TYPED_TIMES = textwrap.dedent("""\
    from specnb.core import timed as clock
    device = target.device
    rows = []
    ar_seconds = 0.4
    for gamma in sorted({1, predicted_best, GAMMA}):
        spec_seconds = 0.3
        b = 1.3
        rows.append({"gamma": gamma, "ar_seconds": ar_seconds, "spec_seconds": spec_seconds,
                     "measured": ar_seconds / spec_seconds,
                     "predicted": speedup(alpha_hat, gamma, c_hat), "checking_cost": b,
                     "predicted_checked": speedup_checked(alpha_hat, gamma, c_hat, b)})
        clock.MEASURED += [ar_seconds, spec_seconds]
    """)
# The library's modules reached without an import statement the code scan would read: the
# answer-free copy in the kernel has to hold.
MODULE = ("b = globals()['__buil' + 'tins__']\n"
          "def module(name):\n    return b.__dict__.get('__imp' + 'ort__')(name, fromlist=['x'])\n")
REPO_FILE = "open(" + repr(str(ROOT / "specnb" / "core" / "verify.py")) + ").read()"


# (student, notebook, {solution grade id: code}, [added cells], {test id: message fragment, or
# None: graded as usual and full marks})
ATTEMPTS = [
    *[(f"forged-{name[:2]}", name, {}, [FORGE], {}) for name in NAMES],
    ("stack-walk", "02_batched_verify.ipynb", {"ex2-verify": STACK}, [],
     {"ex2-verify-tests": "CheckFailed: verify"}),
    ("patched-statistics", "01_acceptance_test.ipynb", {"ex1-verify-one": KEEP_ALL}, [],
     {"ex1-verify-one-tests": "gave a wrong answer"}),
    # The reference with its timing cell forged: every other test cell is graded as usual and
    # earns its points (tests/test_assignments.py leaves this reference run to this attempt).
    ("typed-timings", "05_alpha_c_and_gamma.ipynb", {"ex5-timing": TYPED_TIMES}, [],
     {**dict.fromkeys(assignments.auto_graded(nbformat.read(
         SOURCE / "05_alpha_c_and_gamma.ipynb", as_version=4))),
      "ex5-timing-tests": "timed by the grader"}),
    ("resolve-name", "02_batched_verify.ipynb", {"ex2-verify": "import pkgutil\nlib = pkgutil."
     "resolve_name('specnb.core.verify:' + 'ver' 'ify')\n" + WRAP}, [],
     {"ex2-verify-tests": "the library's own"}),
    ("from-a-thread", "02_batched_verify.ipynb", {"ex2-verify": VERIFY + textwrap.indent(
        textwrap.dedent("""\
        import threading
        out = []
        def run():
            try:
                lib = module('specnb.core.verify').__dict__.get('ver' + 'ify')
                out.append(lib(target_probs, draft_probs, draft_token_ids, bonus_token_ids,
                               generator=generator).tokens)
            except Exception as error:
                out.append(error)
        thread = threading.Thread(target=run)
        thread.start(); thread.join()
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]
        """), "    ")}, [MODULE], {"ex2-verify-tests": "used specnb.core.verify.verify"}),
    ("repo-source", "02_batched_verify.ipynb", {"ex2-verify": VERIFY +
     f"    code = {REPO_FILE}\n"}, [], {"ex2-verify-tests": "PermissionError"}),
    ("subprocess", "02_batched_verify.ipynb", {"ex2-verify": VERIFY + "    import subprocess\n"
     "    subprocess.run(['true'])\n"}, [], {"ex2-verify-tests": "Operation not permitted"}),
    ("tree-of-one-chain", "02_batched_verify.ipynb", {"ex2-verify": VERIFY + textwrap.indent(
        textwrap.dedent("""\
        batch, gamma, _ = target_probs.shape
        parents = module('specnb.core.tree').chain_parents(batch, gamma)
        tree = module('specnb.core.tree_verify').__dict__.get('tree_' + 'verify')
        return tree(target_probs, draft_probs, draft_token_ids, parents,
                    generator=generator).tokens
        """), "    ")}, [MODULE], {"ex2-verify-tests": "the library's own"}),
    ("continuations", "03_ngram_lookup.ipynb", {"ex3-ngram-lookup": LOOKUP + textwrap.indent(
        textwrap.dedent("""\
        found = module('specnb.core.ngram').__dict__.get('ngram_' + 'continuations')(
            tokens, n_max=n_max, n_min=n_min, k=k, limit=1)
        return list(found[0]) if found else []
        """), "    ")}, [MODULE], {"ex3-ngram-lookup-tests": "used specnb.core.ngram.ngram_continuations"}),
    ("reference-notebook", "03_ngram_lookup.ipynb", {"ex3-ngram-lookup": LOOKUP +
     "    import json\n    return json.load(open(" + repr(str(SOURCE / "03_ngram_lookup.ipynb"))
     + "))\n"}, [], {"ex3-ngram-lookup-tests": "PermissionError"}),
    ("memory-hog", "03_ngram_lookup.ipynb", {"ex3-ngram-lookup": LOOKUP +
     "    return list(bytearray(64 * 2 ** 30))\n"}, [], {"ex3-ngram-lookup-tests": "MemoryError"}),
    ("writes-outside", "04_jacobi.ipynb", {"ex4-jacobi-step": "def jacobi_step(lm, prefix, "
     "guesses):\n    open('/tmp/specnb-escaped.txt', 'w').write('out')\n"}, [],
     {"ex4-jacobi-step-tests": "PermissionError"}),
    ("rollback-by-the-cache", "07_batches_and_heads.ipynb", {"ex7-rollback": textwrap.dedent("""\
        import types
        def rollback_mask(valid, num_tokens):
            cache = module('specnb.core.batch_kv').__dict__.get('Batched' + 'CachedLM')
            fake = types.SimpleNamespace(valid=valid, lengths=valid.sum(1), _host_lengths=None,
                                         _tidy=lambda crop: None)
            cache.rollback(fake, num_tokens)  # the library's method on a stand-in object
            return fake.valid
        """)}, [MODULE], {"ex7-rollback-tests": "used specnb.core.batch_kv.drop_last_real",
                          "ex7-positions-tests": None}),
    ("star-tree-siblings", "08_relaxing_and_branching.ipynb", {"ex8-siblings": textwrap.dedent("""\
        def try_siblings(p, candidates, generator):
            tree = module('specnb.core.tree_verify').__dict__.get('tree_' + 'verify')
            k = len(candidates)
            target = torch.cat([p[None], torch.full((k, len(p)), 1.0 / len(p),
                                                    dtype=p.dtype)])[None]
            return int(tree(target, None, torch.tensor([candidates]), torch.full((1, k), -1),
                            generator=generator).tokens[0, 0])
        """)}, [MODULE], {"ex8-siblings-tests": "the library's own",
                          "ex8-typical-tests": None}),
    # A hang that ignores interrupts (once: a file in the kernel's folder remembers it): the
    # kernel is restarted, the cells before replayed, and the next test is graded as usual. It
    # sleeps rather than spins: the judge sees the same silence, and the other worker keeps the
    # core for the half minute it waits.
    ("hangs", "06_testing_a_sampler.ipynb", {"ex6-laws": textwrap.dedent("""\
        import os, signal, time
        def law_resample_from_p(p, q):
            if not os.path.exists('hung'):
                open('hung', 'w').close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                while True:
                    time.sleep(1)
            return p
        def law_greedy_draft(p, q):
            return p
        """)}, [], {"ex6-laws-tests": "ran over", "ex6-chi2-tests": None}),
]


def submission(folder: pathlib.Path, name: str, solutions: dict, added: list) -> None:
    source = nbformat.read(SOURCE / name, as_version=4)
    notebook = assignments.student_version(source) if not solutions else source
    for cell in notebook.cells:
        code = solutions.get(assignments.grading(cell).get("grade_id"))
        if code is not None:
            cell.source = code
    notebook.cells[2:2] = [nbformat.v4.new_code_cell(code) for code in added]
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / name)


@pytest.mark.slow  # one confined kernel per attempt, two at a time
@pytest.mark.embedded
def test_every_attempt_scores_zero_and_the_other_tests_are_still_graded(tmp_path, monkeypatch):
    # The hang ignores the interrupt whatever the grace: waiting 10 s for it only holds a core.
    monkeypatch.setattr(Judge, "stop_grace_s", 2.0)
    escaped = pathlib.Path("/tmp/specnb-escaped.txt")
    escaped.unlink(missing_ok=True)
    for student, name, solutions, added, _ in ATTEMPTS:
        submission(tmp_path / student, name, solutions, added)
    report = io.StringIO()
    results = assignments.grade([tmp_path], SOURCE, timeout=20, stream=report, jobs=2)
    by_student = {pathlib.Path(p).parent.name: rows for p, rows in results.items()}
    problems = []
    for student, name, solutions, _, targets in ATTEMPTS:
        rows = {row[0]: row for row in by_student[student] if row[1] is not None}
        for test_id, (_, got, points, message) in rows.items():
            if test_id in targets and targets[test_id] is None:  # graded despite the others
                if got != points:
                    problems.append(f"{student}: {test_id} {got}/{points}: {message}")
            elif (not targets or test_id in targets) and got != 0:
                problems.append(f"{student}: {test_id} earned {got}: {message}")
            elif targets.get(test_id) and targets[test_id] not in (message or ""):
                problems.append(f"{student}: {test_id}: {message!r} lacks {targets[test_id]!r}")
        if not targets and sum(r[1] for r in rows.values()) != 0:
            problems.append(f"{student}: a forged verdict earned points")
    assert not escaped.exists(), "a kernel wrote outside its folder"
    assert not problems, "\n".join(problems) + "\n" + report.getvalue()


class TrustingJudge(Judge):
    """The broken judge: runs a test cell in the student's kernel and believes its reply."""

    async def _judge_cell(self, cell, cell_index):
        reply = await super(Judge, self).async_execute_cell(cell, cell_index)
        status = (reply or {}).get("outputs", [])
        errors = [o for o in status if o.get("output_type") == "error"]
        self.verdicts[cell_index] = (not errors, None if not errors else errors[0]["ename"])


@pytest.mark.slow
def test_a_judge_that_trusts_the_kernel_gives_the_forged_verdict_its_points(tmp_path,
                                                                             monkeypatch):
    name = "03_ngram_lookup.ipynb"
    submission(tmp_path / "forged", name, {}, [FORGE])
    # The real judge gives this very submission 0 (ATTEMPTS' "forged-03", graded above).
    monkeypatch.setattr("specnb.course.judge.judge.Judge._judge_cell", TrustingJudge._judge_cell)
    rows = assignments.grade_notebook(tmp_path / "forged" / name, SOURCE / name, timeout=60)
    assert [r[1] for r in rows] == [3.0]  # trusting the kernel: full marks for no work


def judged(cells: list, tests: dict, timed_cells: dict, tmp_path) -> Judge:
    """A notebook of `cells` (grade id, source) executed by an unconfined judge whose set-up
    defines the two failures a check raises; `tests` = {cell index: grade id}."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade_id": grade_id}})
        for grade_id, source in cells])
    judge = Judge(nb, tests, setup="from specnb.course.checks.report import CheckFailed, "
                  "ClockDisagreed\n", timed_cells=timed_cells, kernel_name="python3",
                  timeout=60, allow_errors=True, shutdown_kernel="immediate",
                  resources={"metadata": {"path": str(tmp_path)}})
    asyncio.run(judge.async_execute())  # as assignments.execute runs it (`execute` skips set-up)
    return judge


# The timed cell counts its runs in the kernel; the test's "clock" disagrees with its first run.
CLOCKED = [("timed", "runs = globals().get('runs', 0) + 1"),
           ("timed-tests", "if runs < 2:\n    raise ClockDisagreed('a busy moment')"),
           ("counted", "counted = globals().get('counted', 0) + 1"),
           ("counted-tests", "if counted < 2:\n    raise CheckFailed('a wrong answer')"),
           ("after", "print(runs, counted)")]
CLOCKED_TESTS = {1: "timed-tests", 3: "counted-tests"}


def test_a_test_whose_clock_disagreed_is_graded_again_after_its_cell_runs_again(tmp_path):
    """A `ClockDisagreed` (a busy machine can raise it against correct code) costs a re-run of
    the timed cell, not the points; any other failure is final, its cell run once."""
    judge = judged(CLOCKED, CLOCKED_TESTS, {"timed-tests": "timed", "counted-tests": "counted"},
                   tmp_path)
    assert judge.verdicts[1] == (True, None)
    assert "the grader ran that cell again" in judge.nb.cells[1].outputs[0]["text"]
    assert judge.verdicts[3] == (False, "CheckFailed: a wrong answer")
    assert judge.nb.cells[4].outputs[0]["text"] == "2 1\n"


def test_without_the_re_run_the_disagreeing_clock_costs_the_points(tmp_path, monkeypatch):
    monkeypatch.setattr(Judge, "clock_retries", 0)  # the broken judge the test above must catch
    judge = judged(CLOCKED, CLOCKED_TESTS, {"timed-tests": "timed"}, tmp_path)
    assert judge.verdicts[1] == (False, "ClockDisagreed: a busy moment")
    assert judge.nb.cells[4].outputs[0]["text"] == "1 1\n"


# --- the pieces, without a kernel ---------------------------------------------------------------

def test_plain_data_crosses_and_comes_back_equal():
    from specnb.methods.results import DraftedToken, GenerationResult, Iteration, Stats

    run = GenerationResult("speculative", [[1, 2]], Stats(drafted=3), [
        Iteration(drafted=[DraftedToken(5, 0.5, 0.25, 0.5, 0.4, "accepted")])])
    value = {"a": [1, 2.5, float("nan"), 2 ** 70, None, True], "t": (torch.arange(6).view(2, 3),
             torch.tensor([0.5], dtype=torch.bfloat16)), "s": {3, 4}, "run": run}
    back = wire.Decoder().decode(wire.Encoder().encode(value))
    assert back["a"][:2] == [1, 2.5] and back["a"][3:] == [2 ** 70, None, True]
    assert back["a"][2] != back["a"][2]  # nan
    assert torch.equal(back["t"][0], value["t"][0]) and back["t"][1].dtype == torch.bfloat16
    assert back["s"] == {3, 4} and back["run"] == run


def test_a_generator_continues_its_stream_across_the_wall():
    here, local = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    encoder = wire.Encoder()
    decoder = wire.Decoder()
    there = decoder.decode(encoder.encode([here, here]))  # the same generator, twice
    assert there[0] is there[1]
    drawn_there = torch.rand(4, generator=there[0])
    encoder.update_generators(decoder.generator_states())
    assert torch.equal(drawn_there, torch.rand(4, generator=local))
    assert torch.equal(torch.rand(4, generator=here), torch.rand(4, generator=local))


@pytest.mark.parametrize("text, fragment", [
    ('{"t": "pickle", "v": "x"}', "tagged 'pickle'"),
    ('{"t": "handle", "id": 1, "m": []}', "a callable where data was expected"),
    ('{"t": "dc", "c": "Popen", "f": {}}', "of class 'Popen'"),
    ('{"t": "dc", "c": "Stats", "f": {"evil": 1}}', "unknown fields"),
    ('{"t": "tensor", "id": 1, "d": "float64", "s": [4], "b": "AAAA"}', "with 3 bytes"),
    ('{"t": "tensor", "id": 1, "d": "object", "s": [1], "b": ""}', "malformed"),
    ('{"t": "int", "v": "' + "9" * 500 + '"}', "400 digits"),
    ("[" * 40 + "]" * 40, "nested too deep"),
])
def test_anything_but_plain_data_is_refused(text, fragment):
    with pytest.raises(wire.WireError, match=fragment):
        wire.Decoder().decode(text)
    with pytest.raises(wire.WireError, match="more than"):
        wire.Decoder(max_bytes=10).decode(json.dumps(list(range(10))))


def test_a_function_is_not_data_unless_it_is_sent_as_a_handle():
    with pytest.raises(wire.WireError, match="not plain data"):
        wire.Encoder().encode(object())
    message = wire.Encoder().encode({"f": print})
    got = wire.Decoder(remote=lambda key, methods: ("stand-in", key, methods)).decode(message)
    assert got == {"f": ("stand-in", 1, [])}


def test_an_answer_is_replaced_whole_by_a_withheld_stand_in():
    source = textwrap.dedent("""\
        import torch

        @torch.no_grad()
        def verify(x):
            return x + 1


        TABLE = {1: 2}


        class Drafter:
            pass
        """)
    text = withhold(source, {"verify": "m:verify", "TABLE": "m:TABLE", "Drafter": "m:Drafter"})
    assert "x + 1" not in text and "{1: 2}" not in text and "pass" not in text
    space = {}
    exec(text, space)
    with pytest.raises(Exception, match="m.verify is withheld while your work is graded"):
        space["verify"](1)
    with pytest.raises(Exception, match="withheld"):
        space["TABLE"][1]
    with pytest.raises(ValueError, match="not defined at the top"):
        withhold(source, {"missing": "m:missing"})


def test_a_call_back_into_the_grader_must_be_small():
    from specnb.course.judge.judge import _check_small

    _check_small({"args": [[1, 2, 3], 20_000], "kwargs": {"keep": 4}})
    for huge in ([10 ** 9], [list(range(5000))], [torch.zeros(10_000)]):
        with pytest.raises(ValueError, match="grader allows"):
            _check_small({"args": huge})


def test_this_machine_can_confine_a_kernel():
    """The grader refuses to grade where it cannot confine (assignments.grade says why)."""
    assert confine.available() is None


def test_the_kernels_copy_of_specnb_lacks_the_answers_and_its_walls_hold(tmp_path):
    """Assignment 02's copy, imported by a confined Python as a grading kernel would."""
    import subprocess
    import sys

    from specnb.course.judge.build import answer_free_package
    from specnb.course.judge.judge import readable_paths

    source = nbformat.read(SOURCE / "02_batched_verify.ipynb", as_version=4)
    package = answer_free_package(assignments.write_yourself(source), tmp_path / "package")
    text = (package / "specnb" / "core" / "verify.py").read_text()
    assert "\ndef verify(" not in text and "\ndef acceptance_overlap(" in text  # a helper stays
    folder = tmp_path / "room"
    folder.mkdir()
    config = {"read": readable_paths(package, folder), "write": [str(folder)],
              "memory_bytes": 4 * 2 ** 30}
    probe = textwrap.dedent(f"""\
        import os
        from specnb.core.verify import acceptance_overlap, verify
        print(type(verify).__name__, acceptance_overlap.__name__)
        try:
            verify(1, 2, 3, 4)
        except Exception as error:
            print(type(error).__name__)
        for path in ({str(ROOT / "specnb" / "core" / "verify.py")!r},
                     {str(SOURCE / "02_batched_verify.ipynb")!r}):
            try:
                open(path).read()
                print("read")
            except PermissionError:
                print("unreadable")
        open("mine.txt", "w").write("ok")
        try:
            open({str(tmp_path / "outside.txt")!r}, "w")
            print("wrote outside")
        except PermissionError:
            print("outside refused")
        try:
            os.fork()
            print("forked")
        except PermissionError:
            print("no fork")
        """)
    result = subprocess.run(
        [sys.executable, str(pathlib.Path(confine.__file__)), json.dumps(config), "--",
         sys.executable, "-c", probe], cwd=folder, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin", "HOME": str(folder)})
    assert result.stdout.split("\n")[:-1] == [
        "Withheld acceptance_overlap", "AnswerWithheld", "unreadable", "unreadable",
        "outside refused", "no fork"], \
        result.stdout + result.stderr[-2000:]
    assert (folder / "mine.txt").read_text() == "ok" and not (tmp_path / "outside.txt").exists()
