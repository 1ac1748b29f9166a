"""How a check talks to a student: `CheckFailed`, calling their code safely, a pass line.

A failed check raises `CheckFailed` (an `AssertionError`, so nbgrader and pytest count it as a
failed test) whose message names the function, the input it was given, what the library
returns for that input, what the student's function returned, and a hint. Exceptions raised
inside the student's function are turned into the same kind of message, with the input that
triggered them. This module knows nothing about speculative decoding, and no statistics:
the checks' χ² tests and binomial tolerances are `specnb.stats`, at the levels set here.
"""

import math

import torch



class CheckFailed(AssertionError):
    """A student's function disagrees with the library; the message says where and why."""


class ClockDisagreed(CheckFailed):
    """Measured times disagree with the check's own clock. A burst of other work on the machine
    can do that to correct code, so a grader measures again before it takes the points
    (`specnb.course.judge` runs the timed cell again); in the learner's kernel it reads as any
    failed check."""


def short_tracebacks(shell=None) -> bool:
    """In IPython, show a `CheckFailed` as its message alone, not under a traceback that prints
    the check's own source; the cell still ends in an error, so grading sees it fail. Called
    when `specnb.course.checks` is imported; returns whether a shell was found. Exceptions shown
    that way before (a grading kernel's `AnswerWithheld`) stay so."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False

    def show_message(shell, etype, value, tb, tb_offset=None):
        structured = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, structured)  # the error output the notebook shows
        return structured
    shown = tuple(k for k in getattr(shell, "custom_exceptions", ()) if k is not CheckFailed)
    shell.set_custom_exc(shown + (CheckFailed,), show_message)
    return True


def show(value, decimals: int = 4) -> str:
    """Compact text for tensors, floats and lists: tensor([0.1, 0.2]) -> '[0.1, 0.2]'."""
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point:
            value = value.double().round(decimals=decimals)
        return str(value.tolist())
    if isinstance(value, float):
        return f"{value:.{decimals}g}" if math.isfinite(value) else str(value)
    return repr(value)


def failure(name: str, *, given: str, expected=None, got=None, hint: str = "",
            kind: type = CheckFailed) -> CheckFailed:
    """Build the exception (`kind`, CheckFailed or a subclass): function, input, expected, got,
    hint; one item per line."""
    lines = [f"{name} gave a wrong answer.", f"  input:    {given}"]
    if expected is not None:
        lines.append(f"  expected: {expected}")
    if got is not None:
        lines.append(f"  got:      {got}")
    if hint:
        lines.append(f"  hint:     {hint}")
    return kind("\n".join(lines))


def call(fn, *args, given: str, name: str | None = None, error_hint: str | None = None,
         **kwargs):
    """Run the student's `fn`; turn anything it raises into a `CheckFailed` naming the input.

    `error_hint` replaces the generic hint when the check knows what this input is about.
    """
    name = name or getattr(fn, "__name__", "your function")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise CheckFailed(f"{name} is not implemented yet: replace `raise NotImplementedError()` "
                          f"in its body with your code, run that cell, then run this check "
                          f"again.") from None
    except CheckFailed:
        raise
    except Exception as error:  # the student's bug, reported with the input that caused it
        hint = error_hint or "run it yourself on that input and read the traceback"
        raise CheckFailed(f"{name} raised {type(error).__name__}: {error}\n"
                          f"  input:    {given}\n  hint:     {hint}") from error


def call_each(fn, calls, *, given, name: str | None = None, error_hint: str | None = None):
    """Yield `call(fn, *args)` for each tuple of `calls` in order; `given(i)` describes the
    i-th input. Tensors are cloned for each call, so a function that edits its inputs in place
    cannot change the next call's. When `fn` is the grader's stand-in for a function in the
    learner's kernel (one with `call_many`, specnb.course.judge), all the calls go there as one
    batch, run in order, and stop at the first exception, as this loop would."""
    many = getattr(fn, "call_many", None)
    if many is None:
        for index, args in enumerate(calls):
            args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            yield call(fn, *args, given=given(index), name=name, error_hint=error_hint)
        return
    results, error = many(list(calls))
    yield from results
    if error is not None:
        def fail():
            raise error
        fail.__name__ = getattr(fn, "__name__", "your function")
        call(fail, given=given(len(results)), name=name, error_hint=error_hint)


def passed(name: str, num_cases: int, extra: str = "") -> None:
    cases = f"{num_cases} case{'' if num_cases == 1 else 's'}"
    print(f"✓ {name} passed ({cases}{', ' + extra if extra else ''})")


def to_float(value, name: str, given: str) -> float:
    """A number from whatever the student returned (float, 0-d tensor, numpy scalar)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise failure(name, given=given, got=repr(value),
                      hint="return a single number (a Python float or a 0-d tensor)") from None


def to_int(value, name: str, given: str) -> int:
    """A token id from whatever the student returned (int, 0-d tensor, numpy integer)."""
    try:
        return int(value)
    except (TypeError, ValueError, RuntimeError):
        raise failure(name, given=given, got=repr(value)[:200],
                      hint="return a single token id (a Python int or a 0-d tensor)") from None


def closest_mistake(law: torch.Tensor, target: torch.Tensor, mistakes: dict) -> str | None:
    """The hint of the known mistake whose law is nearest `law`, if nearer than the target's."""
    def tv(a, b):
        return 0.5 * float((a.double() - b.double()).abs().sum())
    best = min(mistakes.items(), key=lambda item: tv(law, item[1][0]), default=None)
    if best is None or tv(law, best[1][0]) >= tv(law, target):
        return None
    return best[1][1]


__all__ = ["CheckFailed", "short_tracebacks", "call", "call_each", "closest_mistake",
           "failure", "passed", "show", "to_float", "to_int"]
