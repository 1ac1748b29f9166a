"""Tests of `specnb.course.checks.solution_code`: wrapping the library's own answer is found, honest code
is not. One row per way of reaching `specnb.core.verify` (or of hiding it); nothing is executed."""

import pytest

from specnb.course.checks.solution_code import DYNAMIC, LibraryUse, explain, find_library_uses, \
    names_of

VERIFY = "specnb.core.verify:verify"
ALPHA = "specnb.theory:estimate_alpha"


@pytest.fixture(scope="module")
def names():
    return names_of([VERIFY, ALPHA])


def test_names_include_the_aliases_specnb_itself_uses(names):
    assert names["verify"] == names["library_verify"] == VERIFY  # checks.verify's alias
    assert names["estimate_alpha"] == ALPHA


WRAPPERS = [  # (form, code, target found, line)
    ("from-import", "from specnb.core import verify\n"
                    "def verify2(*args):\n    return verify(*args).tokens", VERIFY, 1),
    ("from-import, alias", "from specnb.core.verify import verify as v", VERIFY, 1),
    ("another module's alias", "from specnb.course.checks.verify import library_verify", VERIFY, 1),
    ("module attribute", "import specnb\nout = specnb.core.verify(p, q, x, b)", VERIFY, 2),
    ("module alias", "import specnb.core as sc\nsc.verify(p, q, x, b)", VERIFY, 2),
    ("import ... as", "import specnb.core.verify as v", VERIFY, 1),
    ("public function", "import specnb\nalpha = specnb.estimate_alpha(result)", ALPHA, 2),
    ("star import", "from specnb.theory import *", ALPHA, 1),
    ("getattr by string", "import specnb.core as c\nf = getattr(c, 'verify')", VERIFY, 2),
    ("vars by string", "import specnb.core as c\nf = vars(c)['verify']", VERIFY, 2),
    ("importlib", "import importlib\nm = importlib.import_module('specnb.core')", DYNAMIC, 2),
    ("importlib, computed", "import importlib\nm = importlib.import_module('spec' + 'nb')",
     DYNAMIC, 2),
    ("__import__", "m = __import__('specnb.core')", DYNAMIC, 1),
    ("sys.modules", "import sys\nm = sys.modules['specnb.core']", DYNAMIC, 2),
    ("exec", "exec('from specnb.core import ' + 'verify')", DYNAMIC, 1),
    ("after an IPython magic", "%time x = 1\nfrom specnb.core import verify", VERIFY, 2),
    ("inside a line magic", "%time from specnb.core import verify", VERIFY, 1),
    ("inside %%capture", "%%capture\nfrom specnb.core import verify", VERIFY, 1),
    ("inside %%time", "%%time\nimport specnb.core as c\nc.verify(p, q, x, b)", VERIFY, 2),
    ("%%writefile, then import", "%%writefile mine.py\nfrom specnb.core import verify",
     DYNAMIC, 1),
    ("%run", "%run helper.py", DYNAMIC, 1),
    ("get_ipython().run_cell", "get_ipython().run_cell(code)", DYNAMIC, 1),
    ("getattr, computed name", "import specnb.core as c\nf = getattr(c, 'ver' + 'ify')",
     DYNAMIC, 2),
    ("vars, computed name", "import specnb.core as c\nf = vars(c)['ver' + 'ify']", DYNAMIC, 2),
    ("__dict__, computed name", "import specnb.core as c\nname = 'ver' + 'ify'\n"
                                "f = c.__dict__[name]", DYNAMIC, 3),
    ("the name as a string", "import operator, specnb.core as c\n"
                             "f = operator.attrgetter('verify')(c)", VERIFY, 2),
    ("attrgetter, computed", "from operator import attrgetter\nf = attrgetter(n)(c)", DYNAMIC, 2),
    ("exec, renamed", "run = exec\nrun(code)", DYNAMIC, 1),
    ("builtins.exec", "import builtins\nbuiltins.exec(code)", DYNAMIC, 1),
    ("importlib by getattr", "m = getattr(lib, 'import_module')('specnb.core')", DYNAMIC, 1),
    ("runpy", "import runpy\nns = runpy.run_module('specnb.core.verify')", DYNAMIC, 1),
    ("a closure's cells", "secret = sampler.__closure__[0].cell_contents", DYNAMIC, 1),
]


@pytest.mark.parametrize("form, code, target, line", WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_wrappers_are_found(names, form, code, target, line):
    uses = find_library_uses(code, names)
    assert (target, line) in [(use.target, use.line) for use in uses], uses


HONEST = [
    ("torch and the provided helpers", "import torch\nfrom specnb.core import sample, "
     "logits_to_probs, CachedLM\n\ndef verify(target_probs, draft_probs, ids, bonus, generator):"
     "\n    u = torch.rand(ids.shape, generator=generator)\n    return sample(target_probs[:, 0])"),
    ("the student's own earlier functions", "def verify_one(p, q, x, g):\n"
     "    return x if accept_probability(float(p[x]), float(q[x])) > 0.5 else 0"),
    ("other specnb imports", "import specnb\nresult = specnb.speculative(t, d, ids, gamma=4, "
     "max_new_tokens=8)\nfrom specnb.bench.compare import timed"),
    ("attributes of a result", "alpha = sum(d.overlap for it in result.trace for d in "
     "it.drafted)"),
    ("code that does not parse", "def f(:\n"),
    ("a harmless magic and a shell line", "%matplotlib inline\n!ls\nx = torch.ones(3)"),
    ("timing one's own code", "%time tokens = my_verify(p, q, x, b, g)"),
    ("a constant getattr on one's own object", "n = getattr(result, 'tokens')"),
    ("strings that name builtins elsewhere", "prompts = specnb.load_prompts('eval')\n"
     "mode = 'exec'"),
]


@pytest.mark.parametrize("form, code", HONEST, ids=[h[0] for h in HONEST])
def test_honest_code_is_not_flagged(names, form, code):
    assert find_library_uses(code, names) == []


def test_explain_names_the_line_and_the_rule():
    text = explain(LibraryUse(VERIFY, 3, "return verify(p, q, x, b).tokens"), "cell 'ex2-verify'")
    assert text.startswith("0 points") and "specnb.core.verify.verify" in text
    assert "cell 'ex2-verify', line 3" in text and "write it yourself" in text
    assert "dynamic import" in explain(LibraryUse(DYNAMIC, 1, "exec(s)"), "your cell 4")
