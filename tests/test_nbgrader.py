"""The course under real nbgrader: the layout command, `nbgrader generate_assignment`,
`nbgrader autograde` and `nbgrader validate`, and nbgrader's points against `grade`'s.

The end-to-end test lays out a course (`python -m specnb.course.assignments nbgrader-course`),
releases all eight assignments and autogrades, in one call: the reference solutions (full marks
on every auto-graded cell), a student with a plausible mistake in each assignment (`MISTAKEN`:
nbgrader's own released notebook with some answers written in, so the cells they left score 0
from the released stubs), one who imports the library's own residual (0 on the cells
`specnb.write_yourself` lists: `LibraryUseCheck` at work), one who hides a failing check with
`set_custom_exc`, and three of tests/test_judge.py's gaming attempts (a forged verdict, the
library's answer from a thread, the same job under another name): the judge runs the test
cells, so nbgrader scores what it found. Per auto-graded cell, nbgrader's points must be the
expected ones and, for the mistakes and the library import, those `grade_notebook` gives the
same file. test_assignments.py asserts that `grade` gives the reference full marks (but for
exercise 5's, whose only full run is the one here: tests/test_judge.py has `grade` score it with
the timing forged) and the untouched student versions zero; the mistaken students carry those
stubs through nbgrader, so an untouched student version is not autograded a second time. nbgrader runs from this
environment's bin without activating it; the course config gives kernels one thread.
"""

import copy
import os
import pathlib
import pkgutil
import runpy
import subprocess
import sys
import time
from unittest import mock

import nbformat
import pytest

from specnb.course import assignments
from test_judge import ATTEMPTS

SOURCE = pathlib.Path(__file__).resolve().parent.parent / "assignments" / "source"
NAMES = sorted(p.stem for p in SOURCE.glob("*.ipynb"))
BIN = pathlib.Path(sys.executable).parent  # the environment's bin: nbgrader, alembic, python

# One student's answers per assignment, in their own words, with one plausible mistake each; the
# exercises they left are the released stubs. {assignment: ({solution cell: code}, the test
# cells that score 0)}.
MISTAKEN = {
    "01_acceptance_test": ({
        "ex1-overlap": "predicted_overlap = 0.5",
        "ex1-accept-probability": """
def accept_probability(p_x, q_x):
    if q_x > 0:
        return p_x / q_x if p_x < q_x else 1.0
    return float(p_x > 0)""",
        "ex1-residual": """
def residual_distribution(target_probs, draft_probs):
    return torch.clamp(target_probs - draft_probs, min=0)  # not normalized""",
        "ex1-verify-one": """
def verify_one(target_probs, draft_probs, draft_token, generator):
    keep = accept_probability(float(target_probs[draft_token]), float(draft_probs[draft_token]))
    if float(torch.rand(1, generator=generator)) < keep:
        return int(draft_token)
    weights = residual_distribution(target_probs, draft_probs)
    return int(torch.multinomial(weights, 1, generator=generator))""",
    }, {"ex1-residual-tests"}),
    "02_batched_verify": ({"ex2-verify": """
def verify(target_probs, draft_probs, draft_token_ids, bonus_token_ids, generator):
    batch, gamma, _ = target_probs.shape
    out = torch.full((batch, gamma + 1), -1, dtype=torch.long)
    for b in range(batch):
        for i in range(gamma):
            token = int(draft_token_ids[b, i])
            p, q = float(target_probs[b, i, token]), float(draft_probs[b, i, token])
            if float(torch.rand(1, generator=generator)) < (min(1.0, p / q) if q > 0 else 1.0):
                out[b, i] = token
                continue
            excess = torch.clamp(target_probs[b, i] - draft_probs[b, i], min=0)
            out[b, i] = int(torch.multinomial(excess / excess.sum(), 1, generator=generator))
            break
    return out  # forgot the bonus token when every draft passes"""}, {"ex2-verify-tests"}),
    "03_ngram_lookup": ({"ex3-ngram-lookup": """
def ngram_lookup(tokens, n_max, n_min, k):
    tokens = [int(t) for t in tokens]
    for n in range(min(n_max, len(tokens) - 1), n_min, -1):  # off by one: n_min never tried
        tail = tokens[-n:]
        best = []
        for start in reversed(range(len(tokens) - n)):
            if tokens[start:start + n] == tail and len(tokens[start + n:start + n + k]) > len(best):
                best = tokens[start + n:start + n + k]
        if best:
            return best
    return []"""}, {"ex3-ngram-lookup-tests"}),
    "04_jacobi": ({
        "ex4-jacobi-step": """
def jacobi_step(lm, prefix, guesses):
    new = [int(t) for t in lm.logits(prefix + guesses[:-1], keep=len(guesses))[0].argmax(-1)]
    converged = 1
    while converged < len(guesses) and guesses[converged - 1] == new[converged - 1]:
        converged += 1
    return new, converged""",
        "ex4-jacobi-decode": """
def jacobi_decode(lm, prompt, block, max_new_tokens):
    out, guesses = [], [prompt[-1]] * block
    while len(out) < max_new_tokens:
        new, converged = jacobi_step(lm, prompt + out, guesses)
        out += new[:converged]
        guesses = new[converged:] + [new[-1]] * converged
    return out  # may run past max_new_tokens""",
    }, {"ex4-jacobi-decode-tests"}),
    "05_alpha_c_and_gamma": ({
        "ex5-alpha": """
def alpha_from_trace(result):
    total, count = 0.0, 0
    for iteration in result.trace:
        for position in iteration.drafted:
            if position.status != "unverified":
                total, count = total + position.overlap, count + 1
    return total / count if count else float("nan")""",
        "ex5-expected-tokens": """
def expected_tokens(alpha, gamma):
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)  # alpha = 1 divides by zero""",
        "ex5-gamma-guess": "gamma_star_guess, why_gamma_grows = 5, \"b\"",
    }, {"ex5-cost-ratio-tests", "ex5-expected-tokens-tests", "ex5-formula-tests",
        "ex5-bootstrap-tests", "ex5-predict-tests", "ex5-checking-tests", "ex5-timing-tests"}),
    "06_testing_a_sampler": ({
        "ex6-no-min": "no_min_is_exact = True",
        "ex6-chi2": """
def chi2_pvalue(counts, probs):
    counts = torch.as_tensor(counts, dtype=torch.float64)
    expected = torch.as_tensor(probs, dtype=torch.float64) * counts.sum()
    seen = expected > 0
    statistic = float(((counts[seen] - expected[seen]) ** 2 / expected[seen]).sum())
    return float(chi2.sf(statistic, int(seen.sum())))  # one degree of freedom too many""",
        "ex6-find": """
def find_broken(samplers, target_probs, generator):
    found = set()
    for name, sample in samplers.items():
        counts = torch.bincount(sample(20_000, generator), minlength=len(target_probs))
        if chi2_pvalue(counts.tolist(), target_probs.tolist()) < 1e-3:
            found.add(name)
    return found""",
    }, {"ex6-laws-tests", "ex6-chi2-tests"}),
    "07_batches_and_heads": ({
        "ex7-rollback": """
def rollback_mask(valid, num_tokens):
    out = valid.clone()
    for row, n in enumerate(num_tokens.tolist()):
        if n:
            out[row, -n:] = False  # the last n slots, holes or not
    return out""",
        "ex7-positions": """
def acceptance_by_position(result, gamma):
    reached, accepted, beyond, drafts = [0] * gamma, [0] * gamma, [0] * gamma, 0
    for iteration in result.trace:
        if not iteration.drafted:
            continue
        drafts += 1
        for i, d in enumerate(iteration.drafted):
            if d.status != "unverified":
                reached[i] += 1
                accepted[i] += d.status == "accepted"
        for i in range(sum(d.status == "accepted" for d in iteration.drafted)):
            beyond[i] += 1
    return ([a / r if r else math.nan for a, r in zip(accepted, reached)],
            [b / drafts for b in beyond])""",
        "ex7-length": """
def mean_acceptance_length(per_draft):
    return 1 + sum(per_draft)""",
    }, {"ex7-rollback-tests"}),
    "08_relaxing_and_branching": ({
        "ex8-predict": "predicted_law = [0.8, 0.2, 0.0, 0.0]  # the threshold alone",
        "ex8-typical": """
def typical_law(p, q, posterior_threshold, posterior_alpha):
    bar = min(posterior_threshold, posterior_alpha * math.exp(float(torch.special.entr(p).sum())))
    law = torch.where(p > bar, q, torch.zeros_like(q))  # exp(+H): the sign is wrong
    law[p.argmax()] += q[p <= bar].sum()
    return law""",
        "ex8-siblings": """
def try_siblings(p, candidates, generator):
    r = p.clone()
    for x in candidates:
        if float(torch.rand((), generator=generator, dtype=torch.float64)) < float(r[x]):
            return x
        r[x] = 0
        r = r / r.sum()
    return int(torch.multinomial(r, 1, generator=generator))""",
    }, {"ex8-predict-tests", "ex8-typical-tests", "ex8-detect-tests"}),
}
# The library's own residual: `specnb.write_yourself` voids the residual and verify_one cells.
LIBRARY = ("01_acceptance_test", {
    "ex1-accept-probability": MISTAKEN["01_acceptance_test"][0]["ex1-accept-probability"],
    "ex1-residual": "from specnb.core.verify import residual_distribution",
}, {"ex1-residual-tests", "ex1-verify-one-tests"})
# A wrong lookup whose failing check the student's handler keeps out of the outputs.
SWALLOWED = ("03_ngram_lookup", {"ex3-ngram-lookup": """
get_ipython().set_custom_exc((Exception,), lambda *args, **kwargs: None)

def ngram_lookup(tokens, n_max, n_min, k):
    return []"""})
# Gaming attempts (tests/test_judge.py has them all), here under nbgrader's autograde with
# specnb's JudgedExecute: each student answers assignment 02's verify one way (or leaves it and
# forges the verdict); its test cell must score 0 and show why.
GAMED, TEST_ID = "02_batched_verify", "ex2-verify-tests"
GAMING = {student: (solutions, added, targets.get(TEST_ID, "is not defined"))
          for student, name, solutions, added, targets in ATTEMPTS
          if student in ("forged-02", "from-a-thread", "tree-of-one-chain")}


def nbgrader_env() -> dict:
    """This environment, not activated, with its bin first on PATH (nbgrader runs `alembic`)."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def nbgrader(course: pathlib.Path, *args) -> str:
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=nbgrader_env(),
                          capture_output=True, text=True, timeout=1800)
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{log[-4000:]}"
    return log


def answered(released, answers: dict):
    """A copy of a notebook with the given solution cells replaced: {grade_id: code}."""
    notebook, answers = copy.deepcopy(released), dict(answers)
    for cell in notebook.cells:
        if assignments.grading(cell).get("grade_id") in answers:
            cell.source = answers.pop(assignments.grading(cell)["grade_id"]).strip()
    assert not answers, f"no such solution cells: {sorted(answers)}"
    return notebook


def outputs_in(notebook, grade_id: str) -> list:
    (cell,) = [c for c in notebook.cells if assignments.grading(c).get("grade_id") == grade_id]
    return cell.outputs


def submit(course: pathlib.Path, student: str, name: str, notebook) -> pathlib.Path:
    path = course / "submitted" / student / name / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def nbgrader_scores(course: pathlib.Path, student: str, name: str, grade_ids) -> dict:
    """{grade_id: auto_score} of one autograded notebook, read from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "specnb") as gradebook:
        return {grade_id: gradebook.find_grade(grade_id, name, name, student).auto_score
                for grade_id in grade_ids}


def our_rows(path: pathlib.Path, name: str) -> dict:
    """{grade_id: (points, message)} that `grade` gives the auto-graded cells of a notebook."""
    return {grade_id: (got, message) for grade_id, got, _, message in
            assignments.grade_notebook(path, SOURCE / f"{name}.ipynb", timeout=300)
            if got is not None}


def outputs_of(course: pathlib.Path, student: str, name: str, grade_id: str) -> list:
    """The outputs of a cell of an autograded notebook."""
    return outputs_in(nbformat.read(course / "autograded" / student / name / f"{name}.ipynb",
                                    as_version=4), grade_id)


@pytest.mark.slow  # 21 notebook runs under nbgrader, 9 under `grade`: ~3 min on 2 busy cores
@pytest.mark.embedded  # exercise 5 loads the embedded pair
def test_nbgrader_autograde_agrees_with_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", nbgrader_env()["PATH"])  # for the gradebook read below
    clock = [time.monotonic()]

    def lap(what: str) -> None:
        clock.append(time.monotonic())
        print(f"{what}: {clock[-1] - clock[-2]:.0f} s")

    course = tmp_path / "course"
    assignments.main(["nbgrader-course", str(course)])
    nbgrader(course, "generate_assignment", "*")
    lap("layout and generate_assignment")
    sources = {name: nbformat.read(SOURCE / f"{name}.ipynb", as_version=4) for name in NAMES}
    released = {name: nbformat.read(course / "release" / name / f"{name}.ipynb", as_version=4)
                for name in NAMES}
    submitted = {}  # (student, assignment) -> (path, test cells that score 0 or None)
    for name in NAMES:
        submitted["reference", name] = (submit(course, "reference", name, sources[name]), set())
        answers, failing = MISTAKEN[name]
        submitted["mistaken", name] = (
            submit(course, "mistaken", name, answered(released[name], answers)), failing)
    name, answers, voided = LIBRARY
    submitted["library", name] = (submit(course, "library", name,
                                         answered(released[name], answers)),
                                  voided | {"ex1-overlap-tests"})  # and the stub left there
    name, answers = SWALLOWED
    submitted["swallowed", name] = (submit(course, "swallowed", name,
                                           answered(released[name], answers)), None)
    for student, (solutions, added, _) in GAMING.items():
        notebook = answered(released[GAMED], solutions)
        notebook.cells[2:2] = [nbformat.v4.new_code_cell(code) for code in added]
        submitted[student, GAMED] = (submit(course, student, GAMED, notebook), {TEST_ID})
    nbgrader(course, "autograde", "*")  # every student and assignment in one process
    lap("autograde")

    problems = []  # every disagreement, reported together
    for (student, name), (path, failing) in submitted.items():
        points = assignments.auto_graded(sources[name])
        theirs = nbgrader_scores(course, student, name, points)
        if failing is None:  # swallowed: the outputs show nothing, the kernel replied "error"
            assert theirs == dict.fromkeys(points, 0.0)
            (error,) = [o for o in outputs_of(course, student, name, "ex3-ngram-lookup-tests")
                        if o.output_type == "error"]
            assert error.ename == "CheckFailed"
            continue
        expected = {g: 0.0 if g in failing else p for g, p in points.items()}
        if theirs != expected:
            problems.append(f"{student} {name}: nbgrader {theirs}, expected {expected}")
            problems += [f"  {grade_id} printed: {error.ename}: {error.evalue}"  # why, for CI
                         for grade_id in points if theirs.get(grade_id) != expected[grade_id]
                         for error in outputs_of(course, student, name, grade_id)
                         if error.output_type == "error"]
        if student in ("mistaken", "library"):  # test_assignments.py covers the reference
            ours = our_rows(path, name)
            problems += [f"{student} {name} {grade_id}: nbgrader {theirs[grade_id]}, grade "
                         f"{got} ({message})" for grade_id, (got, message) in ours.items()
                         if theirs.get(grade_id) != got]
    assert not problems, "\n".join(problems)
    # The hand-graded answer, by nbgrader's own rule (utils.py, `determine_grade`): left as
    # released (the mistaken student did not touch it) it scores 0, answered it waits for a
    # person (`grade` lists both as "manual").
    assert "ex5-reflection" not in MISTAKEN["05_alpha_c_and_gamma"][0]
    reflection = {student: nbgrader_scores(course, student, "05_alpha_c_and_gamma",
                                           ["ex5-reflection"])["ex5-reflection"]
                  for student in ("reference", "mistaken")}
    assert reflection == {"reference": None, "mistaken": 0.0}
    lap("grade on the mistaken and library notebooks")
    # The library user's voided cells show `grade`'s reason; nbgrader's feedback prints it.
    name, _, voided = LIBRARY
    reasons = assignments.library_use_messages(
        nbformat.read(submitted["library", name][0], as_version=4), sources[name])
    for grade_id in voided:
        (error,) = outputs_of(course, "library", name, grade_id)
        assert (error.ename, error.evalue) == ("LibraryUse", reasons[grade_id])
    # So do the gaming attempts' test cells: the withheld answer, or the stub's honest failure
    # that the forged verdict tried to hide.
    for student, fragment in [(s, attempt[2]) for s, attempt in GAMING.items()]:
        errors = [o for o in outputs_of(course, student, GAMED, TEST_ID)
                  if o.output_type == "error"]
        shown = " ".join(f"{e.ename}: {e.evalue}" for e in errors)
        assert fragment in shown, (student, shown)


def test_nbgrader_validate_passes_a_source_notebook_and_catches_a_wrong_one(tmp_path):
    """`nbgrader validate` under the course config, on the quickest source notebook and on a
    mistaken answer to it. That every source passes is the autograde test's reference run."""
    course = tmp_path / "course"
    assignments.main(["nbgrader-course", str(course)])
    name = "03_ngram_lookup"
    source = course / "source" / name / f"{name}.ipynb"
    answers, _ = MISTAKEN[name]
    wrong = tmp_path / f"{name}.ipynb"
    nbformat.write(answered(nbformat.read(source, as_version=4), answers), wrong)
    log = nbgrader(course, "validate", str(source))
    assert "Success! Your notebook passes all the tests." in log, log[-4000:]
    assert "FAILED" not in log and "CHANGED" not in log, log[-4000:]
    log = nbgrader(course, "validate", str(wrong))
    assert "VALIDATION FAILED" in log and "Success!" not in log, log[-4000:]


# ----------------------------------------------------------------------------------------------
# The layout command (no nbgrader run)
# ----------------------------------------------------------------------------------------------

class Section(dict):
    """A stand-in for traitlets' Config: `c.CourseDirectory.course_id = "x"` nests dicts."""

    def __getattr__(self, name):
        return self.setdefault(name, Section())

    def __setattr__(self, name, value):
        self[name] = value


def test_the_course_layout_holds_the_config_and_one_folder_per_assignment(tmp_path, capsys):
    course = tmp_path / "course"
    assert assignments.main(["nbgrader-course", str(course)]) == 0
    assert capsys.readouterr().out.count("wrote ") == 1 + len(NAMES)
    assert sorted(p.relative_to(course).as_posix() for p in course.rglob("*") if p.is_file()) \
        == ["nbgrader_config.py"] + [f"source/{n}/{n}.ipynb" for n in NAMES]
    for name in NAMES:  # the notebooks as they are: nbgrader strips the solutions itself
        assert (course / "source" / name / f"{name}.ipynb").read_bytes() == \
            (SOURCE / f"{name}.ipynb").read_bytes()
    config = Section()  # what traitlets' config loader does: run the file with `get_config`
    with mock.patch.dict(os.environ, {"PATH": "/usr/bin"}):  # all put back afterwards
        os.environ.pop("OMP_NUM_THREADS", None)
        runpy.run_path(str(course / "nbgrader_config.py"),
                       init_globals={"get_config": lambda: config})
        # The running Python's bin first (for `alembic`), and one thread per kernel.
        assert os.environ["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert config.CourseDirectory.course_id == "specnb"
    assert (config.CourseDirectory.source_directory, config.CourseDirectory.autograded_directory) \
        == ("source", "autograded")
    assert config.JudgedExecute.timeout == 600 and config.JudgedExecute.confined is True
    steps = config.Autograde.autograde_preprocessors
    assert [step.rpartition(".")[2] for step in steps] == [
        "JudgedExecute", "IgnorePattern", "ClearMetadataPreprocessor", "LimitOutput",
        "LibraryUseCheck", "SaveAutoGrades", "AssignLatePenalties", "CheckCellMetadata"]
    assert steps[0] == "specnb.course.nbgrader_check.JudgedExecute"
    from nbgrader.converters import Autograde  # each name is what nbgrader will import
    from specnb.course.nbgrader_check import JudgedExecute, LibraryUseCheck

    nbgraders = Autograde.class_traits()["autograde_preprocessors"].default()
    assert [pkgutil.resolve_name(step) for step in steps] == \
        [JudgedExecute] + nbgraders[1:4] + [LibraryUseCheck] + nbgraders[4:]


def write_notebook(folder: pathlib.Path, name: str, cells) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = cells
    nbformat.write(notebook, folder / name)


def bad_source(kind: str, folder: pathlib.Path) -> pathlib.Path:
    if kind == "missing":
        return folder / "absent"
    if kind == "not-json":
        folder.mkdir()
        (folder / "broken.ipynb").write_text("{not json")
    if kind == "no-tests":
        write_notebook(folder, "plain.ipynb", [nbformat.v4.new_code_cell("x = 1")])
    return folder


@pytest.mark.parametrize("course_kind, source_kind, fragment", [
    ("not-empty", "course", "exists and is not empty"),
    ("file", "course", "exists and is not a folder"),
    ("new", "missing", "no folder of source notebooks"),
    ("new", "not-json", "broken.ipynb: not a notebook"),
    ("new", "no-tests", "plain.ipynb: no nbgrader test cell"),
])
def test_the_layout_command_refuses_bad_input_and_writes_nothing(course_kind, source_kind,
                                                                 fragment, tmp_path, capsys):
    course = tmp_path / "course"
    if course_kind == "not-empty":
        course.mkdir()
        (course / "notes.txt").write_text("mine")
    elif course_kind == "file":
        course.write_text("a file")
    source = SOURCE if source_kind == "course" else bad_source(source_kind, tmp_path / "source")
    with pytest.raises(SystemExit) as info:
        assignments.main(["--source", str(source), "nbgrader-course", str(course)])
    assert info.value.code == 2 and fragment in capsys.readouterr().err
    assert not (course / "nbgrader_config.py").exists() and not (course / "source").exists()


def test_force_rewrites_the_config_and_sources_and_keeps_the_rest(tmp_path):
    course = tmp_path / "course"
    (course / "source" / NAMES[0]).mkdir(parents=True)
    (course / "source" / NAMES[0] / f"{NAMES[0]}.ipynb").write_text("an old version")
    (course / "gradebook.db").write_text("grades")
    assignments.main(["nbgrader-course", "--force", str(course)])
    assert (course / "gradebook.db").read_text() == "grades"
    assert (course / "source" / NAMES[0] / f"{NAMES[0]}.ipynb").read_bytes() == \
        (SOURCE / f"{NAMES[0]}.ipynb").read_bytes()
    assert "LibraryUseCheck" in (course / "nbgrader_config.py").read_text()


def test_library_use_check_voids_the_listed_test_cells_in_place(tmp_path, monkeypatch):
    """The preprocessor alone, as nbgrader calls it from the course root after Execute."""
    from specnb.course.nbgrader_check import LibraryUseCheck

    course = tmp_path / "course"
    assignments.main(["nbgrader-course", str(course)])
    monkeypatch.chdir(course)  # nbgrader runs its converters there (converters/base.py)
    name = "03_ngram_lookup"
    resources = {"nbgrader": {"assignment": name, "notebook": name}}
    source = nbformat.read(SOURCE / f"{name}.ipynb", as_version=4)
    honest, _ = LibraryUseCheck().preprocess(copy.deepcopy(source), resources)
    assert honest == source  # the reference solution: outputs as they were
    wrapper = answered(source, {"ex3-ngram-lookup": "from specnb.core import ngram_lookup"})
    checked, _ = LibraryUseCheck().preprocess(copy.deepcopy(wrapper), resources)
    (error,) = outputs_in(checked, "ex3-ngram-lookup-tests")
    assert (error.output_type, error.ename) == ("error", "LibraryUse")
    assert error.evalue == assignments.library_use_messages(wrapper, source)[
        "ex3-ngram-lookup-tests"]
    assert "specnb.core.ngram.ngram_lookup" in error.evalue
    (course / "source" / name / f"{name}.ipynb").unlink()
    with pytest.raises(FileNotFoundError, match="the source notebook is missing"):
        LibraryUseCheck().preprocess(copy.deepcopy(wrapper), resources)
