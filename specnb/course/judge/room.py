"""The judge's errand-runner inside the student's kernel: look names up, call functions, send
back data. Nothing here decides a grade, and nothing it sends is trusted beyond its data.

The judge (`judge.py`) loads this file and `wire.py` into the kernel from their text, as the
modules `_specnb_room` and `_specnb_wire`, and evaluates one of these in `user_expressions` of
a silent execute request:

- `describe(names)` -> JSON {name: "function" | "data" | "module" | "missing"};
- `fetch(name)` -> the value of a name of the notebook, encoded (`wire.Encoder`);
- `call(request)` -> runs the notebook's function `request["name"]` on each argument list of
  `request["calls"]` in turn (a batch: one round trip for 20 000 calls), stopping at the first
  exception, and returns {"results", "error", "generators"}.

A handle among the arguments (the check's `lm`, the suspects' samplers) becomes a stand-in here
whose calls go back to the judge through the kernel's stdin channel (`input`), which the judge
answers while it waits for the reply: the model, and what it counts, stay on the judge's side.
"""

import json
import sys
import types

wire = sys.modules["_specnb_wire"]
MARK = wire.MARK


def _space() -> dict:
    from IPython import get_ipython

    return get_ipython().user_ns


def describe(names: str) -> str:
    space, kinds = _space(), {}
    for name in json.loads(names):
        if name not in space:
            kinds[name] = "missing"
            continue
        value = space[name]
        kinds[name] = "module" if isinstance(value, types.ModuleType) else \
            "function" if callable(value) and not isinstance(value, type) else "data"
    return json.dumps(kinds)


def fetch(name: str) -> str:
    return wire.Encoder().encode(_space()[name])


class _Remote:
    """A stand-in for one of the judge's objects: its calls run on the judge's side."""

    def __init__(self, key: int, methods: list):
        self._key, self._methods = key, tuple(methods)

    def _ask(self, method, args, kwargs):
        encoder = wire.Encoder()
        request = encoder.encode({"id": self._key, "method": method, "args": list(args),
                                  "kwargs": kwargs})
        # The kernel's own stdin request: `input` is the plain builtin again by the time
        # user_expressions are evaluated.
        from IPython import get_ipython

        reply = wire.Decoder().decode(get_ipython().kernel.raw_input(MARK + request))
        if reply.get("error"):
            raise RuntimeError(reply["error"])
        encoder.update_generators({int(k): v for k, v in reply.get("generators", {}).items()})
        return reply.get("value")

    def __call__(self, *args, **kwargs):
        if self._methods:
            raise TypeError("this object is not callable")
        return self._ask(None, args, kwargs)

    def __getattr__(self, name):
        if name in self.__dict__.get("_methods", ()):
            return lambda *args, **kwargs: self._ask(name, args, kwargs)
        raise AttributeError(name)


def call(request_text: str) -> str:
    decoder = wire.Decoder(remote=_Remote)
    request = decoder.decode(request_text)
    function = _space()[request["name"]]
    results, error = [], None
    for args, kwargs in request["calls"]:
        try:
            results.append(function(*args, **kwargs))
        except BaseException as exception:  # noqa: BLE001 - reported to the judge as data
            error = {"type": type(exception).__name__, "message": str(exception)[:2000],
                     "withheld": type(exception).__name__ == "AnswerWithheld"}
            break
    states = {str(k): v for k, v in decoder.generator_states().items()}
    try:
        return wire.Encoder().encode({"results": results, "error": error, "generators": states})
    except wire.WireError as problem:
        return wire.Encoder().encode({"results": [], "generators": states, "error": {
            "type": "NotPlainData", "message": f"returned {problem}", "withheld": False}})
