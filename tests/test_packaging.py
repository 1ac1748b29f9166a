"""How specnb installs: declared dependencies, extras, environment.yml, the set-up, the wheel.

- pyproject.toml and environment.yml declare the same requirements (compared as parsed
  requirements, versions numerically), and environment.yml's python is the lowest declared.
- Every module the package imports is declared: in `dependencies`, or for the instructor's
  commands in the `instructor` extra; every module the tests import is declared by an extra.
- The wheel holds every package and data/ (as specnb/_data), and `pip install .` into a fresh
  virtual environment gives a package whose `load_pair()` works offline (slow).
"""

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# Modules that need an extra, by the file that imports them; everything else needs only
# `dependencies`.
# IPython: `grade` reads cells with its input transformer; checks shorten tracebacks inside it.
EXTRA_OF_FILE = {"specnb/course/assignments.py": "instructor", "specnb/course/book.py": "book",
                 "specnb/course/checks/report.py": "instructor",
                 "specnb/course/points.py": "instructor",
                 "specnb/course/checks/solution_code.py": "instructor",
                 # the judge (nbclient, jupyter_client) and its errand-runner in the kernel
                 # (IPython)
                 "specnb/course/judge/judge.py": "instructor",
                 "specnb/course/judge/room.py": "instructor",
                 # a withheld answer's short message in the grading kernel (IPython, if there)
                 "specnb/course/judge/withheld.py": "instructor",
                 # nbgrader: the course layout and the autograde step (`nbgrader-course`)
                 "specnb/course/nbgrader_course.py": "instructor",
                 "specnb/course/nbgrader_check.py": "instructor",
                 # `make notebooks`: executes the course's notebooks (nbformat, nbclient)
                 "specnb/course/execute.py": "instructor",
                 # slider panels: the live widget (ipywidgets, IPython), small frames (Pillow)
                 "specnb/viz/panel.py": "notebooks"}


def requirement_key(requirement: Requirement):
    """What a requirement means, not how it is spelled: `Torch >= 2.4.0` == `torch>=2.4`."""
    return (canonicalize_name(requirement.name), frozenset(requirement.extras),
            requirement.specifier, str(requirement.marker or ""))


def declared(extras=("",)) -> set:
    """Canonical names of the distributions declared by `dependencies` and the given extras."""
    lists = [PROJECT["dependencies"] if extra == "" else PROJECT["optional-dependencies"][extra]
             for extra in extras]
    return {canonicalize_name(Requirement(r).name) for reqs in lists for r in reqs}


def all_extras() -> tuple:
    return ("",) + tuple(PROJECT["optional-dependencies"])


def test_environment_yml_matches_pyproject():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert len(pip_lists) == 1, "environment.yml needs exactly one pip: list"
    # environment.yml lists dependencies and every extra, without the extras' self-references,
    # each requirement once (the `book` and `instructor` extras both need nbformat).
    in_pyproject = [Requirement(r) for extra in all_extras() for r in
                    (PROJECT["dependencies"] if extra == "" else
                     PROJECT["optional-dependencies"][extra])]
    in_pyproject = [r for r in in_pyproject if canonicalize_name(r.name) != "specnb"]
    listed = sorted(map(requirement_key, map(Requirement, pip_lists[0])), key=str)
    assert len(listed) == len(set(listed)), "environment.yml lists a requirement twice"
    assert listed == sorted(set(map(requirement_key, in_pyproject)), key=str)


def test_environment_python_is_the_lowest_declared_and_the_tests_run_on_it():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in environment["dependencies"] if str(d).startswith("python="))
    conda_python = Version(python.removeprefix("python="))
    requires = Requirement(f"python{PROJECT['requires-python']}").specifier
    lowest = min(Version(s.version) for s in requires if s.operator == ">=")
    assert conda_python == lowest and conda_python in requires
    # Versions compare as numbers: 3.10 is above 3.9, though "3.10" < "3.9" as strings.
    assert Version("3.10") > Version("3.9")
    assert Version(f"{sys.version_info.major}.{sys.version_info.minor}") in requires


def test_the_build_backend_reads_the_spdx_license():
    # `license = "Apache-2.0"` (an SPDX expression, PEP 639) needs setuptools 77 or later.
    assert isinstance(PROJECT["license"], str)
    setuptools = Requirement(next(r for r in PYPROJECT["build-system"]["requires"]
                                  if r.startswith("setuptools")))
    assert Version("76.9") not in setuptools.specifier and Version("77.0") in setuptools.specifier


def imported_modules(path: Path) -> set:
    """Top-level names of the absolute imports in a file (`from a.b import c` -> `a`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def distributions_of(modules: set, own: set) -> dict:
    """{module: distribution} for the third-party modules (not stdlib, not our own)."""
    owners = importlib.metadata.packages_distributions()
    third_party = modules - set(sys.stdlib_module_names) - own - {"__future__"}
    missing = sorted(m for m in third_party if m not in owners)
    assert not missing, f"modules that no installed distribution provides: {missing}"
    return {m: canonicalize_name(owners[m][0]) for m in third_party}


def test_every_module_the_package_imports_is_declared():
    by_extra = {}
    for path in sorted((ROOT / "specnb").rglob("*.py")):
        extra = EXTRA_OF_FILE.get(path.relative_to(ROOT).as_posix(), "")
        by_extra.setdefault(extra, set()).update(imported_modules(path))
    for extra, modules in by_extra.items():
        distributions = distributions_of(modules, own={"specnb"})
        allowed = declared(("", extra))
        undeclared = {m: d for m, d in distributions.items() if d not in allowed}
        assert not undeclared, (f"specnb imports {undeclared} but pyproject's "
                                f"{extra or 'dependencies'} does not declare them")


def test_every_module_the_tests_import_is_declared():
    modules = set()
    for path in [*(ROOT / "tests").glob("*.py"), ROOT / "conftest.py",
                 *(ROOT / "notebooks").glob("*.py")]:
        modules |= imported_modules(path)
    own = {"specnb"} | {p.stem for folder in ("tests", "scripts")
                        for p in (ROOT / folder).glob("*.py")}
    # speculators: installed by the Makefile in its own folder, --no-deps (its pins clash with
    # ours), for tests/speculators_logits.py alone.
    distributions = distributions_of(modules - {"speculators"}, own=own)
    everything = declared(all_extras())
    undeclared = {m: d for m, d in distributions.items() if d not in everything}
    assert not undeclared, f"the tests import {undeclared}, which no extra declares"


def test_the_test_extra_brings_the_notebook_and_instructor_extras():
    test_extra = [Requirement(r) for r in PROJECT["optional-dependencies"]["test"]]
    own = next(r for r in test_extra if canonicalize_name(r.name) == "specnb")
    assert {"notebooks", "instructor"} <= own.extras
    # No test tool and no notebook tool is a runtime dependency.
    assert not declared() & {"pytest", "nbval", "jupyterlab", "ipywidgets", "playwright"}


def test_every_package_and_data_folder_is_in_the_wheel():
    tool = PYPROJECT["tool"]["setuptools"]
    packages = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
                for p in (ROOT / "specnb").rglob("__init__.py")}
    # data/head-data (token records and replies for rebuilding the head's training data, see
    # data/README.md) stays in the repository: the wheel does not need it.
    data_folders = {"specnb._data"} | {f"specnb._data.{p.name}" for p in (ROOT / "data").iterdir()
                                       if p.is_dir() and not p.name.startswith((".", "__"))
                                       and p.name != "head-data"}
    assert set(tool["packages"]) == packages | data_folders
    assert tool["package-dir"] == {"specnb._data": "data"}
    for folder in data_folders:
        patterns = PYPROJECT["tool"]["setuptools"]["package-data"][folder]
        directory = ROOT / "data" / "/".join(folder.split(".")[2:])
        files = {p.name for p in directory.iterdir()
                 if p.is_file() and not p.name.startswith(".")}
        shipped = {p.name for pattern in patterns for p in directory.glob(pattern)}
        assert files == shipped, f"{directory}: not in the wheel: {sorted(files - shipped)}"


def test_setup_pins_the_cpu_torch_and_constraints_skip_it():
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_SPEC ?= torch==2.13.0" in makefile
    constraints = (ROOT / "constraints.txt").read_text().lower().splitlines()
    assert not any(line.startswith("torch==") for line in constraints)
    assert any(line.startswith("transformers==5.") for line in constraints)
    pinned = {canonicalize_name(line.split("==")[0]) for line in constraints if "==" in line}
    assert declared(all_extras()) - {"torch", "specnb"} <= pinned


def test_importing_nbformat_compiles_no_grammar():
    """constraints.txt keeps jsonschema below the release whose format extra brings
    rfc3987-syntax: it builds a lark parser whenever jsonschema is imported, and pytest's nbval,
    nbclient, nbgrader and JupyterLab all import it, once per process."""
    done = subprocess.run([sys.executable, "-c", "import sys, nbformat, jsonschema; "
                           "print(sorted({'lark', 'rfc3987_syntax'} & set(sys.modules)))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_each_make_target_installs_the_extras_it_needs():
    makefile = (ROOT / "Makefile").read_text()
    prerequisites = {m.group(1): m.group(2).split() for m in
                     re.finditer(r"^([a-z-]+):\s*(.*)$", makefile, re.MULTILINE)}
    assert prerequisites["run"] == ["$(PREPARED)"]
    assert "$(PREPARED)" in prerequisites["test"] and "$(PREPARED)" in prerequisites["setup"]
    assert "$(EXTRA)test" in prerequisites["test"]
    assert "$(EXTRA)test" in prerequisites["test-fast"]
    assert prerequisites["lab"] == ["$(EXTRA)notebooks"]
    assert prerequisites["assignments"] == ["$(EXTRA)instructor"]
    assert "$(EXTRA)test" in prerequisites["setup"]
    assert '-e ".[$*]"' in makefile and "$(LAB_ARGS)" in makefile


def test_ci_calls_the_readme_test_command_and_installs_the_browser():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "make test" in (ROOT / "README.md").read_text()
    assert "apt-get install" in ci and "chromium" in ci


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv_then_load_pair_offline(tmp_path):
    """`pip install .` (not editable) into a new venv; `load_pair()` there, with no network.

    The new venv reaches this environment's packages through a .pth file (dependencies are
    not downloaded again: torch alone is hundreds of MB), so it checks what the wheel holds and
    where the package finds its data; test_every_module_the_package_imports_is_declared checks
    the dependency list.
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    new_site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                               "'purelib'))"], check=True, capture_output=True, text=True).stdout
    new_site = new_site.strip()
    our_site = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(new_site, "_specnb_test_dependencies.pth").write_text("\n".join(sorted(our_site)) + "\n")
    # No network: an unreachable proxy for anything that tries, and the Hub told to stay off.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PIP_NO_INDEX="1",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")

    def run(*args, cwd=tmp_path):
        done = subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    run("-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
        "--ignore-installed", str(ROOT))
    run("-m", "specnb", "--prepare")
    out = run("-c", "import specnb, specnb.models.data\n"
                    "target, head, tokenizer = specnb.load_pair()\n"
                    "print(specnb.__file__); print(specnb.models.data.DATA_DIR)\n"
                    "print(len(specnb.load_prompts('eval')), type(head).__name__)")
    package_file, data_dir, summary = out.strip().splitlines()[-3:]
    assert package_file.startswith(new_site) and data_dir.startswith(new_site), out
    assert summary.endswith("FeatureDrafter") and int(summary.split()[0]) > 0, out
