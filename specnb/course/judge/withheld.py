"""What stands in, in a grading kernel's copy of specnb, for an answer the exercise asks for.

`answer_free_package` (build.py) replaces each of the assignment's `write_yourself`
implementations by a `Withheld`: importing it works (the library's own modules import each
other), using it raises `AnswerWithheld` with the rule, instead of running the answer.
"""


class AnswerWithheld(RuntimeError):
    """The library's implementation of an exercise's answer is not there while grading."""


class Withheld:
    def __init__(self, target: str):
        self._target = target

    def _refuse(self, *args, **kwargs):
        module, _, name = self._target.partition(":")
        raise AnswerWithheld(
            f"{module}.{name} is withheld while your work is graded: this exercise asks you to "
            f"write it yourself, so the grading kernel's copy of specnb does not have it (the "
            f"rule: your code may not call the library's own answer)")

    __call__ = __iter__ = __getitem__ = __len__ = __enter__ = _refuse

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy, pickle and IPython's display probe these
        self._refuse()

    def __repr__(self) -> str:
        return f"<withheld while grading: {self._target}>"

    def __mro_entries__(self, bases):
        self._refuse()


def _short_tracebacks() -> None:
    """In the grading kernel, a withheld answer shows its message, not a traceback (kept beside
    the exceptions already shown that way: the checks' CheckFailed)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def show_message(shell, etype, value, tb, tb_offset=None):
        structured = [f"{etype.__name__}: {value}"]
        shell._showtraceback(etype, value, structured)
        return structured
    kinds = tuple(k for k in shell.custom_exceptions if k is not AnswerWithheld)
    shell.set_custom_exc(kinds + (AnswerWithheld,), show_message)


_short_tracebacks()
