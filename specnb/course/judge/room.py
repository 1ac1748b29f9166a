"""The judge's errand-runner inside the student's kernel: look names up, call functions, send
back data. Nothing here decides a grade, and nothing it sends is trusted beyond its data.

The judge (`judge.py`) loads this file and `wire.py` into the kernel from their text, as the
modules `_specnb_room` and `_specnb_wire`, and evaluates one of these in `user_expressions` of
a silent execute request:

- `describe(names)` -> JSON {name: "function" | "data" | "module" | "missing"};
- `fetch(name)` -> the value of a name of the notebook, encoded (`wire.Encoder`);
- `call(request)` -> runs the notebook's function `request["name"]` on each argument list of a
  batch in turn (one round trip for 20 000 calls; `_calls`), stopping at the first exception,
  and returns {"results", "error", "generators"}.

A handle among the arguments (the check's `lm`, the suspects' samplers) becomes a stand-in here
whose calls go back to the judge through the kernel's stdin channel (`input`), which the judge
answers while it waits for the reply: the model, and what it counts, stay on the judge's side.
"""

import json
import sys
import types

try:
    wire = sys.modules["_specnb_wire"]  # in a kernel: loaded from its text just before
except KeyError:  # imported as part of specnb (a tool listing its modules), not in a kernel
    from . import wire
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


def _ask_judge(prompt: str) -> str:
    """Send `prompt` to the judge as an input request on the kernel's stdin channel; its reply.
    (`input` is the plain builtin again by the time user_expressions are evaluated, and the
    kernel's own `raw_input` looks for the reply every 10 ms: a check's model is called back
    hundreds of times.)"""
    from IPython import get_ipython

    kernel = get_ipython().kernel
    try:
        parent, ident = kernel.get_parent("shell"), kernel._parent_ident["shell"]
        socket, session = kernel.stdin_socket, kernel.session
    except (AttributeError, KeyError, TypeError):  # another ipykernel: its own way, slower
        return kernel.raw_input(prompt)
    session.send(socket, "input_request", {"prompt": prompt, "password": False}, parent,
                 ident=ident)
    while True:
        _, reply = session.recv(socket, mode=0)  # blocks; an interrupt still stops it
        if reply is not None:
            return reply["content"]["value"]


class _Remote:
    """A stand-in for one of the judge's objects: its calls run on the judge's side."""

    def __init__(self, key: int, methods: list):
        self._key, self._methods = key, tuple(methods)

    def _ask(self, method, args, kwargs):
        encoder = wire.Encoder()
        request = encoder.encode({"id": self._key, "method": method, "args": list(args),
                                  "kwargs": kwargs})
        reply = wire.Decoder().decode(_ask_judge(MARK + request))
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


def _calls(request):
    """(args, kwargs) of each call of a batch: sent whole, or by column with the values every
    call shares sent once (each call gets its own copy of a shared tensor or list, as it would
    in one process; a generator or a stand-in stays one object)."""
    import copy

    kwargs = request.get("kwargs", {})
    if "calls" in request:
        for args in request["calls"]:
            yield args, dict(kwargs)
        return
    shared, columns = request["shared"], request["columns"]
    width = len(shared) + len(columns)
    for index in range(int(request["count"])):
        args = []
        for position in map(str, range(width)):
            if position in columns:
                args.append(columns[position][index])
                continue
            value = shared[position]
            args.append(value.clone() if hasattr(value, "clone") and
                        not hasattr(value, "manual_seed") else
                        copy.deepcopy(value) if isinstance(value, (list, dict, set)) else value)
        yield args, dict(kwargs)


def call(request_text: str) -> str:
    decoder = wire.Decoder(remote=_Remote)
    request = decoder.decode(request_text)
    function = _space()[request["name"]]
    results, error = [], None
    for args, kwargs in _calls(request):
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
