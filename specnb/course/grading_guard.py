"""The grader's side inside a student's kernel: pristine test cells, and the library out of reach.

`python -m specnb.course.assignments grade` runs a submission in a fresh kernel. Code the
student wrote runs in that kernel too, so anything it can touch it can change: the cells that
follow (IPython's input transformers), how an error is shown (`set_custom_exc`), the checks
themselves (`checks.check_verify = lambda f: None`), or where an answer comes from (the
library's own implementation, reached by `pkgutil.resolve_name`, `sys.modules.get`, a
`gc.get_objects()` scan, `marshal`/`pickle`, an exec'd copy of its file, a helper module written
at run time, or the reference solution read from the source notebook). The grader therefore talks
to this module through `user_expressions` of empty, silent execute requests, which IPython
evaluates without any input transformer, and judges a test cell by the kernel's own execute
reply (`status`), not by what its outputs show:

- `install(config)` runs before the first cell, before any student code: it keeps the checks'
  pristine state (every module attribute, every function's code and defaults) and IPython's.
  The fingerprints of the forbidden code (below) come computed by the grader, and the library's
  own objects are looked up once their modules are loaded, so a kernel imports specnb only when
  the notebook does.
- `arm(grade_id, handed)` runs just before each test cell: it resets IPython (input and AST
  transformers, custom exception handlers, event callbacks, the shell's and the kernel's
  methods), puts the checks back as they were, rebinds the names the test cells use
  (`checks`) to the pristine modules, and turns the call guard on.
- `disarm()` runs just after it: the call guard off, and what it saw reported.

The call guard is a profile hook (`sys.setprofile`) on Python calls during test cells only. A
call is a violation when

1. its code is a *copy* of forbidden code: the same bytecode, names, constants and argument
   names as one of the forbidden functions (or a function of the reference solution), in a
   code object that is not the library's own. That is what exec'ing a library file, `marshal`,
   a written-out `inspect.getsource` or the reference notebook's text produce. Code objects
   under `MIN_INSTRUCTIONS` are not fingerprinted (a two-line formula may be written the same
   way twice honestly); or
2. it enters the library's own forbidden code and the first caller outside the library is not
   the checks: the student's function (or code it calls) reached it, by whatever route; or
3. the object a test cell hands to the checks is itself forbidden (`verify =
   pkgutil.resolve_name("specnb.core.verify:verify")`): checked by `arm` from the names the
   grader passes.

What it does not stop, and says so in assignments/README.md: code written against this module
(patching it, or switching the profile hook off and on again around a call), and a copy of the
library typed out by hand with changes; the hidden tests and the written answers are there for
those.
"""

import dis
import hashlib
import importlib
import json
import os
import sys
import types

MIN_INSTRUCTIONS = 20
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../specnb
_CHECKS_DIR = os.path.join(_PACKAGE_DIR, "course", "checks")
# Python's own and installed packages (torch's decorators, functools): frames passed through
# when looking for who called the library.
_SYSTEM = tuple(sorted({os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                      sys.base_exec_prefix)}))
_STATE: dict = {}


def resolve(target: str):
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def code_objects(obj) -> list:
    """The code objects behind a function, a class (its methods), a dict or a list of them."""
    if isinstance(obj, types.CodeType):
        found = [obj]
        for const in obj.co_consts:
            if isinstance(const, types.CodeType):
                found += code_objects(const)
        return found
    if isinstance(obj, (staticmethod, classmethod)):
        return code_objects(obj.__func__)
    if isinstance(obj, property):
        return [c for f in (obj.fget, obj.fset, obj.fdel) if f for c in code_objects(f)]
    if isinstance(obj, types.FunctionType):
        return code_objects(obj.__code__)
    if isinstance(obj, type):
        return [c for value in vars(obj).values() for c in code_objects(value)]
    if isinstance(obj, dict):
        return [c for value in obj.values() for c in code_objects(value)]
    if isinstance(obj, (list, tuple)):
        return [c for value in obj for c in code_objects(value)]
    return []


def fingerprint(code: types.CodeType) -> str | None:
    """What a copy keeps and an independent rewrite rarely does (None below MIN_INSTRUCTIONS).

    The instructions with what they name (attributes, globals, constants; nested code by its
    fingerprint; jumps by the instruction they land on), argument and local names; not the file
    name or line numbers, which a copy changes. The compiler writes `torch.f(...)` as LOAD_ATTR
    when the same file imports torch and as LOAD_METHOD otherwise: both count as one."""
    instructions = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    if len(instructions) < MIN_INSTRUCTIONS:
        return None
    position = {i.offset: n for n, i in enumerate(instructions)}
    steps = []
    for i in instructions:
        name = "LOAD_ATTR" if i.opname == "LOAD_METHOD" else i.opname
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            arg = position.get(i.argval, i.argval)
        elif isinstance(i.argval, types.CodeType):
            arg = fingerprint(i.argval) or "small-code"
        else:
            arg = repr(i.argval)
        steps.append([name, arg])
    text = json.dumps([steps, code.co_varnames, code.co_argcount, code.co_kwonlyargcount,
                       code.co_name])
    return hashlib.sha256(text.encode()).hexdigest()


def code_key(code: types.CodeType) -> tuple:
    """What `fingerprint` hashes verbatim, read in no time: the name and the argument and local
    names. A code object whose key no forbidden code shares cannot be a copy of it, so the call
    guard fingerprints only those that share one (dis on every new function a test cell calls,
    torch's and scipy's included, cost seconds per cell)."""
    return (code.co_name, code.co_argcount, code.co_kwonlyargcount, tuple(code.co_varnames))


def reference_fingerprints(sources: list[str]) -> dict:
    """{fingerprint: [label, None, code_key]} of every function the reference solution's cells
    define."""
    found = {}
    for source in sources:
        try:
            module = compile(source, "<reference solution>", "exec")
        except SyntaxError:
            continue
        for code in code_objects(module)[1:]:  # the cell's own top-level code is not a function
            print_ = fingerprint(code)
            if print_:
                found[print_] = [f"the reference solution's {code.co_name}", None,
                                 code_key(code)]
    return found


def _in_library(filename: str) -> bool:
    return filename.startswith(_PACKAGE_DIR + os.sep)


def _is_checks(filename: str) -> bool:
    return filename.startswith(_CHECKS_DIR + os.sep)


def _passed_through(filename: str) -> bool:
    """Library (but not checks), Python's own or an installed package's code."""
    if _is_checks(filename):
        return False
    return _in_library(filename) or filename.startswith(_SYSTEM + ("<frozen ",))


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    seen = _STATE["seen"]
    verdict = seen.get(id(code))
    if verdict is None or verdict[0] is not code:
        copied = fingerprint(code) if code.co_name != "<module>" and \
            code_key(code) in _STATE["keys"] else None
        label, target = _STATE["prints"][copied][:2] if copied in _STATE["prints"] else (None,) * 2
        if target is not None:
            _resolve(target)  # its module may have been imported since the last test cell
        name = _STATE["own"].get(id(code))
        if name is not None and _STATE["own_code"][id(code)] is code:
            verdict = (code, ("own", name))
        else:
            verdict = (code, ("copy", label) if label else None)
        seen[id(code)] = verdict
    kind = verdict[1]
    if kind is None:
        return
    if kind[0] == "copy":
        _STATE["violations"].append(f"your code runs a copy of {kind[1]} ({code.co_name} in "
                                    f"{os.path.basename(code.co_filename)})")
        return
    caller = frame.f_back  # the first frame outside the library and installed code decides
    while caller is not None and _passed_through(caller.f_code.co_filename):
        caller = caller.f_back
    if caller is not None and not _is_checks(caller.f_code.co_filename):
        _STATE["violations"].append(f"your code calls the library's own {kind[1]}")


def library_fingerprints(targets) -> dict:
    """{fingerprint: [label, target, code_key]} of the forbidden implementations (computed by the
    grader, which has the library imported, so a kernel that does not need specnb never imports
    it)."""
    found = {}
    for target in targets:
        for code in code_objects(resolve(target)):
            print_ = fingerprint(code)
            if print_:
                found[print_] = [f"the library's {target}", target, code_key(code)]
    return found


def _resolve(target: str) -> None:
    """Note the library's own object for `target`, and its code, by identity, once its module
    is loaded (the guard never imports specnb itself: a notebook that does not use it pays
    nothing). Code with a forbidden fingerprint that is not the library's own is a copy; if the
    student replaced the object in its module before this, the original counts as a copy."""
    module = target.partition(":")[0]
    if target in _STATE["resolved"] or module not in sys.modules:
        return
    obj = resolve(target)
    _STATE["objects"][id(obj)] = (obj, target)
    for code in code_objects(obj):
        _STATE["own"][id(code)], _STATE["own_code"][id(code)] = target, code
    _STATE["resolved"].add(target)


def install(config: str) -> str:
    """Before any student code: keep the checks and IPython's machinery as they are."""
    config = json.loads(config)
    names = {name: importlib.import_module(module) for name, module in config["names"].items()}
    checks = {}
    for name in sorted(sys.modules):
        if name == "specnb.course.checks" or name.startswith("specnb.course.checks."):
            module = sys.modules[name]
            functions = {key: (value, value.__code__, value.__defaults__, value.__kwdefaults__)
                         for key, value in vars(module).items()
                         if isinstance(value, types.FunctionType)}
            checks[name] = (module, dict(vars(module)), functions)
    keys = {(name, argcount, kwonly, tuple(varnames))  # code_key, back from JSON
            for _, _, (name, argcount, kwonly, varnames) in config["prints"].values()}
    _STATE.update(forbidden=list(config["forbidden"]), prints=dict(config["prints"]), keys=keys,
                  own={}, own_code={}, objects={}, resolved=set(), checks=checks, names=names,
                  seen={}, violations=[], machinery=_snapshot_machinery())
    return "installed"


def _snapshot_machinery() -> dict:
    """The shell's and the kernel's classes and handlers, as they are before student code."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return {}
    kernel = getattr(shell, "kernel", None)
    classes = {cls: {k: v for k, v in vars(cls).items() if callable(v)}
               for obj in (shell, kernel) if obj is not None for cls in type(obj).__mro__
               if cls is not object}
    instances = {id(obj): {k: v for k, v in vars(obj).items() if callable(v)}
                 for obj in (shell, kernel) if obj is not None}
    handlers = dict(getattr(kernel, "shell_handlers", {}) or {})
    events = {name: list(callbacks) for name, callbacks in shell.events.callbacks.items()}
    return {"shell": shell, "kernel": kernel, "classes": classes, "instances": instances,
            "handlers": handlers, "events": events,
            "custom_exceptions": shell.custom_exceptions,  # the checks' short tracebacks
            "transformers": (list(shell.input_transformers_post),
                             list(shell.ast_transformers))}


def _restore_machinery() -> None:
    """IPython as it was: input and AST transformers, custom exception handlers, event
    callbacks, and every method of the shell and the kernel (on the class or shadowed on the
    instance), so that the test cell runs as written and its reply says how it went."""
    from IPython.core.inputtransformer2 import TransformerManager

    machinery = _STATE.get("machinery") or {}
    shell, kernel = machinery.get("shell"), machinery.get("kernel")
    if shell is None:
        return
    for cls, methods in machinery["classes"].items():
        for key, value in methods.items():
            if vars(cls).get(key) is not value:
                setattr(cls, key, value)
    for obj in (shell, kernel):
        if obj is None:
            continue
        kept = machinery["instances"][id(obj)]
        for key in [k for k, v in vars(obj).items() if callable(v) and k not in kept]:
            delattr(obj, key)  # set after install: e.g. a method shadowed on the instance
        for key, value in kept.items():
            setattr(obj, key, value)
    if kernel is not None and machinery["handlers"]:
        kernel.shell_handlers.clear()
        kernel.shell_handlers.update(machinery["handlers"])
    for name, callbacks in machinery["events"].items():
        shell.events.callbacks[name][:] = callbacks
    post, ast_transformers = machinery["transformers"]
    shell.input_transformers_post = list(post)
    shell.input_transformer_manager = TransformerManager()  # IPython's own cleanup transforms
    shell.ast_transformers = list(ast_transformers)
    shell.custom_exceptions = machinery["custom_exceptions"]


def _restore_checks() -> None:
    for module, attributes, functions in _STATE["checks"].values():
        current = vars(module)
        for key in [k for k in current if k not in attributes]:
            del current[key]
        current.update(attributes)
        for function, code, defaults, kwdefaults in functions.values():
            function.__code__, function.__defaults__ = code, defaults
            function.__kwdefaults__ = kwdefaults


def arm(grade_id: str, handed: str) -> str:
    """Just before a test cell: IPython and the checks as they were, the call guard on.

    `handed` is a JSON list of the user-namespace names the test cell hands to the checks."""
    _restore_machinery()
    _restore_checks()
    for target in _STATE["forbidden"]:
        _resolve(target)
    from IPython import get_ipython
    shell = get_ipython()
    namespace = shell.user_ns if shell is not None else {}
    namespace.update(_STATE["names"])
    found = []
    for name in json.loads(handed):
        value = namespace.get(name)
        for candidate in (value, getattr(value, "func", None), getattr(value, "__wrapped__", None),
                          getattr(value, "__func__", None)):
            hit = _STATE["objects"].get(id(candidate))
            if candidate is not None and hit is not None and hit[0] is candidate:
                found.append(f"`{name}` is the library's own {hit[1]}")
    _STATE["violations"] = found
    _STATE["grade_id"] = grade_id
    sys.setprofile(_profile)
    return "armed"


def disarm() -> str:
    """Just after a test cell: the guard off; JSON of the violations it saw (first five)."""
    hook = sys.getprofile()
    sys.setprofile(None)
    violations = list(dict.fromkeys(_STATE.get("violations", [])))
    if hook is not _profile:
        violations.append("the grading guard was switched off during the test")
    return json.dumps(violations[:5])


__all__ = ["MIN_INSTRUCTIONS", "arm", "code_key", "code_objects", "disarm", "fingerprint",
           "install", "library_fingerprints", "reference_fingerprints", "resolve"]
