"""pyproject.toml and environment.yml declare the same dependencies; the set-up keeps its pins."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def normalize(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    assert len(pip_lists) == 1, "environment.yml needs exactly one pip: list"
    assert sorted(map(normalize, pip_lists[0])) == sorted(map(normalize, project["dependencies"]))
    python = next(d for d in environment["dependencies"] if str(d).startswith("python="))
    assert project["requires-python"] == ">=3.10" and python >= "python=3.10"


def test_setup_pins_the_cpu_torch_and_constraints_skip_it():
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_SPEC ?= torch==2.13.0" in makefile
    constraints = (ROOT / "constraints.txt").read_text().lower().splitlines()
    assert not any(line.startswith("torch==") for line in constraints)
    assert any(line.startswith("transformers==5.") for line in constraints)


def test_ci_calls_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text()
