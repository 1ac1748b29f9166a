"""Plain data across the wall between the judge and a student's kernel, both ways.

`Encoder().encode(value)` gives JSON text; `Decoder(...).decode(text)` gives the value back, or
raises `WireError` for anything that is not plain data. What crosses:

- None, bool, int, float (nan and ±inf too), str, list, tuple, dict (str keys), set, frozenset;
- torch tensors of a numeric or bool dtype, at most `MAX_ELEMENTS` elements in one message. The
  same tensor object twice in one message arrives as one copy each time (a check that hands the
  same `p` to 20 000 calls sends it once; each call gets its own clone, as a local call would);
- a `torch.Generator`, by state: the receiver gets a generator in that state, and afterwards
  reports the state it ended in (`Decoder.generator_states`), which the sender puts back
  (`Encoder.update_generators`), so random streams continue across the wall as in one process.
  The same generator twice in a message is one generator on the other side;
- the dataclasses of `specnb.methods.results` and `JacobiStep`, field by field, rebuilt as those
  classes (a check's synthetic run, a student's trace);
- a *handle*: a callable or a model-like object (one with a `logits` method) of the sender,
  which the receiver can only call back (`Decoder(remote=...)` builds the stand-in).

Nothing else: no pickle, no classes named by the sender beyond that list, no code. The size of a
message, its nesting and its number of elements are limited, so a kernel cannot make the judge
allocate without bound. This module imports nothing from specnb at the top, because it is also
loaded into the student's kernel from its text (`room.py`).
"""

import base64
import dataclasses
import importlib
import json
import math

MARK = "\x1b[specnb-callback]"  # starts the prompt of a stand-in's call back to the judge
MAX_BYTES = 64 * 2 ** 20  # one message
MAX_ELEMENTS = 8 * 2 ** 20  # tensor elements in one message
MAX_DEPTH = 24
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool")
# name -> module of the dataclasses that cross (looked up when first met: the decoding loops'
# module imports transformers).
CLASSES = {"DraftedToken": "specnb.methods.results", "EmittedToken": "specnb.methods.results",
           "Iteration": "specnb.methods.results", "Stats": "specnb.methods.results",
           "GenerationResult": "specnb.methods.results", "JacobiStep": "specnb.core.jacobi"}


class WireError(ValueError):
    """What arrived is not plain data of the kinds above, or is too large."""


def _torch():
    import torch

    return torch


class Encoder:
    """Encode values; remembers the generators and handles it sent, by id."""

    def __init__(self):
        self.generators: dict = {}  # id -> torch.Generator
        self.handles: dict = {}  # id -> object
        self._tensors: dict = {}  # id(tensor) -> message id
        self._ids: dict = {}  # id(object) -> message id (generators and handles)
        self._keep: list = []  # objects whose id() is a key above: alive until we are done

    def encode(self, value) -> str:
        return json.dumps(self._value(value, 0), allow_nan=True, separators=(",", ":"))

    def _value(self, value, depth):
        if depth > MAX_DEPTH:
            raise WireError("nested too deep")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return {"t": "int", "v": str(value)} if abs(value) >= 2 ** 53 else value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
        if isinstance(value, list):
            return [self._value(v, depth + 1) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return {"t": "tuple", "v": [self._value(v, depth + 1) for v in value]}
        if isinstance(value, (set, frozenset)):
            return {"t": "set", "v": [self._value(v, depth + 1) for v in value]}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise WireError("a dict with keys that are not str")
            return {"t": "dict", "k": list(value), "v": [self._value(v, depth + 1)
                                                         for v in value.values()]}
        if type(value).__name__ in CLASSES and dataclasses.is_dataclass(value):
            return {"t": "dc", "c": type(value).__name__,
                    "f": {f.name: self._value(getattr(value, f.name), depth + 1)
                          for f in dataclasses.fields(value) if f.init}}
        module = type(value).__module__ or ""
        if module.startswith("torch"):
            torch = _torch()
            if isinstance(value, torch.Tensor):
                return self._tensor(value)
            if isinstance(value, torch.Generator):
                if id(value) in self._ids:  # sent earlier in this message: the same generator
                    return {"t": "gen", "id": self._ids[id(value)]}
                return {"t": "gen", "id": self._remember(value, self.generators),
                        "s": base64.b64encode(value.get_state().numpy().tobytes()).decode()}
        if module.startswith("numpy") and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
            return self._value(value.item(), depth)
        if callable(value) or callable(getattr(value, "logits", None)):
            methods = [] if callable(value) and not hasattr(value, "logits") else ["logits"]
            return {"t": "handle", "id": self._remember(value, self.handles), "m": methods}
        raise WireError(f"a {type(value).__name__} is not plain data (numbers, text, lists, "
                        f"dicts, tensors)")

    def _remember(self, value, table) -> int:
        if id(value) not in self._ids:
            self._ids[id(value)] = len(self._ids) + 1
            self._keep.append(value)
            table[self._ids[id(value)]] = value
        return self._ids[id(value)]

    def _tensor(self, tensor):
        if id(tensor) in self._tensors:
            return {"t": "ref", "id": self._tensors[id(tensor)]}
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise WireError(f"a tensor of dtype {dtype}")
        data = tensor.detach().to("cpu").contiguous()
        raw = data.view(_torch().int16).numpy().tobytes() if dtype == "bfloat16" else \
            data.numpy().tobytes()
        self._tensors[id(tensor)] = len(self._tensors) + 1
        self._keep.append(tensor)
        return {"t": "tensor", "id": self._tensors[id(tensor)], "d": dtype,
                "s": list(data.shape), "b": base64.b64encode(raw).decode()}

    def update_generators(self, states: dict) -> None:
        """Put back the states the receiver reports its copies of our generators ended in."""
        torch = _torch()
        for key, state in states.items():
            generator = self.generators.get(int(key))
            if generator is None or not isinstance(state, torch.Tensor) or \
                    state.dtype != torch.uint8:
                raise WireError("a generator state for no generator that was sent")
            generator.set_state(state)  # validates the size and content itself


class Decoder:
    """Decode one message. `remote(id, methods)` builds the stand-in for a sender's handle
    (None: handles are refused). After the value is used, `generator_states()` is what to report
    back to the sender."""

    def __init__(self, remote=None, max_bytes: int = MAX_BYTES):
        self.remote, self.max_bytes = remote, max_bytes
        self.generators: dict = {}  # message id -> the generator made here
        self._tensors: dict = {}
        self._elements = 0

    def decode(self, text: str):
        if not isinstance(text, str):
            raise WireError(f"expected text, got {type(text).__name__}")
        if len(text) > self.max_bytes:
            raise WireError(f"{len(text)} bytes, more than the {self.max_bytes} allowed")
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise WireError(f"not JSON: {error}") from None
        return self._value(raw, 0)

    def generator_states(self) -> dict:
        return {key: generator.get_state() for key, generator in self.generators.items()}

    def _value(self, raw, depth):
        if depth > MAX_DEPTH:
            raise WireError("nested too deep")
        if raw is None or isinstance(raw, (bool, int, float, str)):
            return raw
        if isinstance(raw, list):
            self._count(len(raw))
            return [self._value(v, depth + 1) for v in raw]
        if not isinstance(raw, dict) or not isinstance(raw.get("t"), str):
            raise WireError("an untagged object")
        kind = raw["t"]
        if kind == "int":
            text = str(raw.get("v", ""))
            if len(text) > 400:
                raise WireError("an integer of more than 400 digits")
            return int(text)
        if kind == "float":
            if raw.get("v") not in ("nan", "inf", "-inf"):
                raise WireError("a float tag that is not nan or ±inf")
            return float(raw["v"])
        if kind in ("tuple", "set"):
            items = self._list(raw.get("v"), depth)
            if kind == "tuple":
                return tuple(items)
            try:
                return set(items)
            except TypeError:
                raise WireError("a set of unhashable items") from None
        if kind == "dict":
            keys, values = raw.get("k"), self._list(raw.get("v"), depth)
            if not isinstance(keys, list) or len(keys) != len(values) or \
                    not all(isinstance(k, str) for k in keys):
                raise WireError("a dict whose keys are not a list of str as long as its values")
            return dict(zip(keys, values))
        if kind == "tensor":
            return self._tensor(raw)
        if kind == "ref":
            base = self._tensors.get(raw.get("id"))
            if base is None:
                raise WireError("a reference to no earlier tensor")
            self._count(base.numel())
            return base.clone()
        if kind == "gen":
            return self._generator(raw)
        if kind == "dc":
            return self._dataclass(raw, depth)
        if kind == "handle":
            methods = raw.get("m")
            if self.remote is None or not isinstance(raw.get("id"), int) or \
                    methods not in ([], ["logits"]):
                raise WireError("a callable where data was expected")
            return self.remote(raw["id"], methods)
        raise WireError(f"an object tagged {kind!r}")

    def _list(self, raw, depth):
        if not isinstance(raw, list):
            raise WireError("a list was expected")
        self._count(len(raw))
        return [self._value(v, depth + 1) for v in raw]

    def _count(self, elements: int) -> None:
        self._elements += elements
        if self._elements > MAX_ELEMENTS:
            raise WireError(f"more than {MAX_ELEMENTS} elements")

    def _tensor(self, raw):
        torch = _torch()
        dtype, shape, data = raw.get("d"), raw.get("s"), raw.get("b")
        if dtype not in DTYPES or not isinstance(shape, list) or not isinstance(data, str) or \
                not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape):
            raise WireError("a malformed tensor")
        numel = math.prod(shape)
        self._count(numel)
        try:
            raw_bytes = base64.b64decode(data, validate=True)
        except ValueError:
            raise WireError("a tensor whose data is not base64") from None
        element = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        if len(raw_bytes) != numel * element:
            raise WireError(f"a tensor of shape {shape} with {len(raw_bytes)} bytes")
        storage = torch.frombuffer(bytearray(raw_bytes), dtype=torch.int16 if dtype == "bfloat16"
                                   else getattr(torch, dtype)) if raw_bytes else \
            torch.empty(0, dtype=getattr(torch, dtype))
        tensor = storage.view(torch.bfloat16) if dtype == "bfloat16" else storage
        tensor = tensor.reshape(shape).clone()
        if isinstance(raw.get("id"), int):
            self._tensors[raw["id"]] = tensor
        return tensor.clone()

    def _generator(self, raw):
        torch = _torch()
        key = raw.get("id")
        if not isinstance(key, int):
            raise WireError("a generator without an id")
        if key in self.generators:
            return self.generators[key]
        try:
            state = torch.frombuffer(bytearray(base64.b64decode(raw.get("s", ""), validate=True)),
                                     dtype=torch.uint8).clone()
            generator = torch.Generator()
            generator.set_state(state)
        except (ValueError, RuntimeError, TypeError):
            raise WireError("a generator with an invalid state") from None
        self.generators[key] = generator
        return generator

    def _dataclass(self, raw, depth):
        name, fields = raw.get("c"), raw.get("f")
        if name not in CLASSES or not isinstance(fields, dict):
            raise WireError(f"an object of class {name!r}")
        cls = getattr(importlib.import_module(CLASSES[name]), name)
        allowed = {f.name for f in dataclasses.fields(cls) if f.init}
        if set(fields) - allowed:
            raise WireError(f"a {name} with unknown fields {sorted(set(fields) - allowed)}")
        try:
            return cls(**{k: self._value(v, depth + 1) for k, v in fields.items()})
        except TypeError as error:
            raise WireError(f"a {name} that cannot be built: {error}") from None
