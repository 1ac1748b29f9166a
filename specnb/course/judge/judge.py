"""The judge: run a submission in a confined kernel, and grade its test cells outside it.

`Judge` is an nbclient NotebookClient. The cells the student wrote, and the notebook's fixed
cells, run in the kernel as usual (their outputs are the executed notebook the student gets
back). An auto-graded test cell does not: its code, taken from the source notebook, runs here, in
the grader's process, with the real checks. A name it uses that the judge's own set-up does not
define is looked up in the kernel (`room.py`): a function becomes a `RemoteFunction`, whose calls
send their arguments to the kernel and bring back the return value as plain data (`wire.py`);
anything else is fetched as plain data. What the kernel says about itself (a reply's status, an
object, a record of timings) decides nothing; the checks judge the data, and the test cell's
outputs are written from what happened here.

The kernel runs `confine.py`: with a copy of specnb without the assignment's answers
(`build.py`), no access to the rest of the file system beyond what Python needs, no new
processes, a memory limit. A test that runs over its time is stopped (the kernel interrupted,
or restarted and the cells before replayed), and scores 0; the other tests are still graded.
"""

import ast
import asyncio
import builtins
import io
import json
import keyword
import os
import pathlib
import sys
import threading
import time

import zmq
import zmq.asyncio
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbclient.util import ensure_async
from nbformat import NotebookNode
from traitlets import Dict

from . import wire
from .wire import MARK

HERE = pathlib.Path(__file__).resolve().parent
CONFINE = HERE / "confine.py"
WIRE_NAME, ROOM_NAME = "_specnb_wire", "_specnb_room"
LOAD = ("(lambda m: (setattr(m, '__file__', {file!r}), __import__('builtins').exec({code!r}, "
        "m.__dict__), __import__('sys').modules.__setitem__(m.__name__, m), 'loaded')[-1])("
        "__import__('types').ModuleType({name!r}))")
DEFAULT_SETUP = "import torch\nfrom specnb.course import checks\n"
# A call back from the kernel runs in the grader: small arguments only (a check's model scores a
# few dozen tokens; a sampler draws tens of thousands), so that it cannot make the grader's own
# process run for long or run out of memory.
CALLBACK_BYTES, CALLBACK_MAX_INT, CALLBACK_MAX_ELEMENTS = 16_384, 1_000_000, 4096
MEMORY_BYTES = 8 * 2 ** 30


# The modules the checks use here (the decoding loops import transformers: a second or more).
CHECK_MODULES = ("specnb.methods", "specnb.theory", "specnb.course.checks")
_PRELOAD: dict = {}
_PRELOAD_LOCK = threading.Lock()
_SETUP_LOCK = threading.Lock()  # one judge's set-up at a time: imports are not thread-safe
_SETUPS: dict = {}  # set-up code -> the namespace it made (its names are only read by tests)


def preload() -> threading.Thread:
    """Import CHECK_MODULES once per process, in a thread of its own, while the first kernel
    starts and runs the student's cells; a judge waits for it before its first test."""
    import importlib

    with _PRELOAD_LOCK:
        if "thread" not in _PRELOAD:
            _PRELOAD["thread"] = threading.Thread(
                target=lambda: [importlib.import_module(m) for m in CHECK_MODULES], daemon=True)
            _PRELOAD["thread"].start()
        return _PRELOAD["thread"]


class RoomError(Exception):
    """The kernel did not answer a call as data: it ran over its time, died, or sent junk."""


def _remote_error(kind: str, message: str) -> Exception:
    """An exception that reads like the one the student's function raised in the kernel."""
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    name = kind if kind.isidentifier() and not keyword.iskeyword(kind) and len(kind) < 60 \
        else "Exception"
    return type(name, (RoomError,), {})(message)


class ConfinedKernelManager(AsyncKernelManager):
    """Starts the kernel through confine.py; `confinement` = {"read", "write", "memory_bytes"}."""

    confinement = Dict()

    def format_kernel_cmd(self, extra_arguments=None):
        import shutil

        command = super().format_kernel_cmd(extra_arguments)
        if not self.confinement:  # `grade --unconfined`: the judge still judges outside it
            return command
        command[0] = shutil.which(command[0]) or command[0]
        config = dict(self.confinement)
        config["read"] = list(config["read"]) + [self.connection_file]
        return [sys.executable, str(CONFINE), json.dumps(config), "--"] + command


def readable_paths(package_dir: pathlib.Path, folder: pathlib.Path) -> list:
    """What a grading kernel may read: the system, Python and its packages, the answer-free
    package, the data it reads, the embedded model's cache, its own folder."""
    import site

    from ...models.loading import cache_dir
    from .build import DATA

    paths = {"/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev",
             sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(package_dir), str(DATA.resolve()), str(cache_dir()), str(folder)}
    paths.update(site.getsitepackages() + [site.getusersitepackages()])
    paths.update(os.path.realpath(p) for p in list(paths))
    return sorted(paths)


def confined_env(package_dir: pathlib.Path, folder: pathlib.Path, threads: int) -> dict:
    """The kernel's environment: the answer-free package first on its path, its home and
    temporary files in its throw-away folder, `threads` torch threads, nothing fetched online."""
    from ...models.loading import cache_dir

    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "JUPYTER", "IPYTHON"))}
    home = folder / ".home"
    home.mkdir(exist_ok=True)
    env.update(PYTHONPATH=str(package_dir), HOME=str(home), TMPDIR=str(home),
               IPYTHONDIR=str(home / ".ipython"), MPLCONFIGDIR=str(home / ".matplotlib"),
               XDG_CACHE_HOME=str(home / ".cache"), SPECNB_CACHE=str(cache_dir()),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    return env


def _check_small(value, depth: int = 0) -> None:
    """Refuse a call back whose numbers or tensors are larger than a check ever needs."""
    import torch

    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int) and abs(value) > CALLBACK_MAX_INT:
        raise ValueError(f"{value} is larger than the grader allows ({CALLBACK_MAX_INT})")
    if isinstance(value, torch.Tensor) and value.numel() > CALLBACK_MAX_ELEMENTS:
        raise ValueError(f"a tensor of {value.numel()} elements is larger than the grader allows")
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple, set)):
        if len(value) > CALLBACK_MAX_ELEMENTS:
            raise ValueError(f"{len(value)} items are more than the grader allows")
        for item in value:
            _check_small(item, depth + 1)


class _Capture:
    """sys.stdout for the judge's threads: what a check prints goes to the test cell it runs
    for; other threads (other submissions graded at once) print as before."""

    local = threading.local()
    lock = threading.Lock()

    @classmethod
    def install(cls):
        with cls.lock:
            if not isinstance(sys.stdout, cls):
                sys.stdout = cls(sys.stdout)

    def __init__(self, original):
        self.original = original

    def write(self, text):
        buffer = getattr(self.local, "buffer", None)
        return (buffer or self.original).write(text)

    def flush(self):
        buffer = getattr(self.local, "buffer", None)
        (buffer or self.original).flush()

    def __getattr__(self, name):
        return getattr(self.original, name)


class RemoteFunction:
    """The judge's stand-in for a function defined in the student's kernel."""

    def __init__(self, judge, name: str):
        self.judge, self.__name__ = judge, name

    def __call__(self, *args, **kwargs):
        results, error = self.call_many([args], kwargs)
        if error is not None:
            raise error
        return results[0]

    def call_many(self, calls, kwargs=None):
        """(results, error or None): the calls in order, in one round trip, up to the first
        exception."""
        encoder = wire.Encoder()
        request = encoder.encode({"name": self.__name__, "kwargs": dict(kwargs or {}),
                                  **_columns(calls)})
        reply = self.judge.ask(f"__import__({ROOM_NAME!r}).call({request!r})", encoder)
        try:
            answer = wire.Decoder().decode(reply)
            results, error = answer["results"], answer["error"]
            encoder.update_generators({int(k): v for k, v in answer["generators"].items()})
            if not isinstance(results, list) or len(results) > len(calls):
                raise wire.WireError("a reply with more results than calls")
        except (wire.WireError, KeyError, TypeError, ValueError) as problem:
            raise RoomError(f"the kernel's reply is not plain data: {problem}") from None
        if error is not None:
            if not isinstance(error, dict):
                raise RoomError("the kernel's reply is not plain data")
            if error.get("withheld"):
                self.judge.withheld.append(error.get("message", ""))
            error = _remote_error(str(error.get("type")), str(error.get("message")))
        return results, error


def _columns(calls) -> dict:
    """The argument lists of a batch by position: a value that every call shares (the same
    object: a check's `p`, its generator) is sent once, the others as one column each."""
    calls = [list(args) for args in calls]
    width = len(calls[0]) if calls else 0
    if any(len(args) != width for args in calls):
        return {"calls": calls}
    shared = {str(i): calls[0][i] for i in range(width)
              if all(args[i] is calls[0][i] for args in calls)}
    return {"count": len(calls), "shared": shared,
            "columns": {str(i): [args[i] for args in calls] for i in range(width)
                        if str(i) not in shared}}


class _KernelNames(dict):
    """The test code's names that the judge's own set-up does not define, looked up in the
    kernel once per test cell."""

    def __init__(self, judge, defined: dict):
        super().__init__()
        self.judge, self.defined = judge, defined

    def __missing__(self, name):
        if name in self.defined or hasattr(builtins, name):
            raise KeyError(name)  # the judge's globals (checks, torch) and builtins win
        kind = json.loads(self.judge.ask(
            f"__import__({ROOM_NAME!r}).describe({json.dumps([name])!r})") or "{}").get(name)
        if kind == "function":
            value = RemoteFunction(self.judge, name)
        elif kind == "data":
            try:
                value = wire.Decoder().decode(self.judge.ask(
                    f"__import__({ROOM_NAME!r}).fetch({name!r})"))
            except wire.WireError as problem:
                raise RoomError(f"`{name}` is not plain data: {problem}") from None
        else:
            raise KeyError(name)
        self[name] = value
        return value


class Judge(NotebookClient):
    """Executes `nb`, grading the cells in `tests` ({cell index: grade id}) itself.

    `setup` is code run in the judge's namespace before the first test (the source notebook's
    metadata `specnb.judge.setup`: the trusted names tests use, e.g. the models a timing test
    clocks); `timed_cells` = {test grade id: grade id of the cell whose duration the test needs},
    a cell that must be safe to run again: when the test's check disagrees with its own clock
    (`ClockDisagreed`), the cell runs again and the test is graded again. After `execute`,
    `verdicts[cell index]` = (passed, message or None)."""

    kernel_manager_class = ConfinedKernelManager
    # How long an interrupted call may take to end before the kernel is restarted: a test that
    # ignores the interrupt (a busy loop that swallows SIGINT) holds a core this long.
    stop_grace_s = 10.0
    # How often a test whose check's clock disagreed (`ClockDisagreed`) has its timed cell run
    # again and is graded again.
    clock_retries = 2

    def __init__(self, nb, tests: dict, setup: str = DEFAULT_SETUP, timed_cells=None,
                 call_timeout: float = 600, **kwargs):
        super().__init__(nb, **kwargs)
        self.tests, self.setup = tests, setup
        self.timed_cells = dict(timed_cells or {})
        self.call_timeout = call_timeout
        self.verdicts: dict = {}
        self.cell_seconds: dict = {}
        self.replay: list = []  # the sources of the cells run so far, to start over after a kill
        self.space: dict = {"__name__": "__judge__", "__builtins__": builtins}
        self._setup_task = None
        self.room_loaded = False
        self.withheld: list = []
        self._deadline = None
        self._handles: dict = {}

    # -- the cells --------------------------------------------------------------------------

    async def async_execute(self, **kwargs):
        # The judge's set-up (loading a model for a timing test: seconds) runs on another core
        # while the kernel runs the student's cells.
        loading = preload()
        code = compile(self.setup, "<judge setup>", "exec")

        def setup():
            loading.join()
            with _SETUP_LOCK:  # once per process: a course's fiftieth exercise 5 reuses the pair
                if self.setup not in _SETUPS:
                    space = {"__name__": "__judge__", "__builtins__": builtins}
                    exec(code, space)
                    _SETUPS[self.setup] = space
                self.space = _SETUPS[self.setup]
        self._setup_task = asyncio.ensure_future(asyncio.to_thread(setup))
        try:
            return await super().async_execute(**kwargs)
        finally:
            if not self._setup_task.done():
                self._setup_task.cancel()

    async def async_execute_cell(self, cell, cell_index, execution_count=None,
                                 store_history=True):
        if cell_index not in self.tests:
            started = time.monotonic()
            # nbclient interrupts a cell at `timeout`; one that ignores the interrupt is killed.
            task = asyncio.ensure_future(super().async_execute_cell(
                cell, cell_index, execution_count, store_history))
            done, _ = await asyncio.wait({task}, timeout=self.timeout + 15)
            if not done:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, DeadKernelError):
                    pass  # how nbclient reports being cancelled
                await self._revive()
                cell.outputs = [NotebookNode(
                    output_type="error", ename="KeyboardInterrupt", evalue="", traceback=[
                        f"KeyboardInterrupt: the cell ran over {self.timeout} s and ignored the "
                        f"interrupt: the kernel was restarted and the cells before it run "
                        f"again"])]
                return cell
            result = task.result()
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id:
                self.cell_seconds[grade_id] = time.monotonic() - started
            if cell.cell_type == "code":
                self.replay.append(cell.source)
            return result
        await self._judge_cell(cell, cell_index)
        return cell

    async def _judge_cell(self, cell, cell_index):
        from ..checks import gamma
        from ..checks.report import ClockDisagreed

        grade_id = self.tests[cell_index]
        self._deadline = time.monotonic() + self.call_timeout  # loading the room counts too
        self.loop = asyncio.get_running_loop()
        if not self.room_loaded:
            await self._load_room()
        if self._setup_task is not None:
            await self._setup_task  # its error, if any, stops grading: the source is wrong
        timed = self.timed_cells.get(grade_id)
        buffer = io.StringIO()

        def run(seconds):
            _Capture.install()
            _Capture.local.buffer = buffer
            token = gamma.JUDGED_CELL_SECONDS.set(seconds)
            try:
                names = _KernelNames(self, self.space)
                exec(compile(cell.source, f"<test {grade_id}>", "exec"), self.space, names)
                return None
            except BaseException as error:  # noqa: BLE001 - every failure is a verdict
                return error
            finally:
                gamma.JUDGED_CELL_SECONDS.reset(token)
                _Capture.local.buffer = None

        for attempt in range(1 + self.clock_retries):
            self.withheld = []
            if attempt:  # a fresh allowance after the timed cell ran again
                self._deadline = time.monotonic() + self.call_timeout
            error = await asyncio.to_thread(run, self.cell_seconds.get(timed))
            # The check's clock disagreed with the timed cell's: a burst of other work on this
            # machine may have hit the student's runs, so they are measured again.
            if not (isinstance(error, ClockDisagreed) and attempt < self.clock_retries
                    and await self._run_again(timed)):
                break
            lines = [line.strip() for line in str(error).splitlines()]
            said = "; ".join(line for line in lines if line.startswith(("expected:", "got:")))
            buffer.write(f"the check's clock disagreed with the cell {timed!r} "
                         f"({said or lines[0]}): the grader ran that cell again\n")
        outputs = []
        if buffer.getvalue():
            outputs.append(NotebookNode(output_type="stream", name="stdout",
                                        text=buffer.getvalue()))
        message = None
        if error is not None:
            name, text = type(error).__name__, str(error)
            if self.withheld:  # the rule, not the traceback of a stand-in
                name, text = "AnswerWithheld", (
                    f"0 points: your code used {self.withheld[0].split(' is withheld')[0]}, the "
                    f"library's own answer, which this exercise asks you to write yourself")
            message = text if self.withheld else f"{name}: {text}"
            outputs.append(NotebookNode(output_type="error", ename=name, evalue=text,
                                        traceback=[f"{name}: {text}"]))
        cell.outputs = outputs
        cell.execution_count = None
        self.verdicts[cell_index] = (error is None, message)

    async def _run_again(self, grade_id) -> bool:
        """Execute the student's cell `grade_id` once more (its outputs and duration replaced);
        False when the notebook has no such cell."""
        if grade_id is None:
            return False
        for index, cell in enumerate(self.nb.cells):
            if (index not in self.tests and cell.cell_type == "code" and
                    cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id):
                await self.async_execute_cell(cell, index)
                return True
        return False

    # -- talking to the kernel ---------------------------------------------------------------

    def ask(self, expression: str, encoder=None) -> str:
        """Evaluate `expression` in the kernel (from the test code's thread); its str result."""
        future = asyncio.run_coroutine_threadsafe(self._ask(expression, encoder), self.loop)
        return future.result()

    async def _load_room(self):
        for name, path in ((WIRE_NAME, HERE / "wire.py"), (ROOM_NAME, HERE / "room.py")):
            answer = await self._ask(LOAD.format(file=str(path), code=path.read_text(),
                                                 name=name))
            if answer != "loaded":
                raise RoomError(f"the judge could not load its errand-runner: {answer}")
        if await self._ask(f"__import__({ROOM_NAME!r}).describe('[]')") != "{}":
            raise RoomError("the kernel does not answer the grader as it should (did your code "
                            "change Python's builtins or IPython?)")
        self.room_loaded = True

    async def _ask(self, expression: str, encoder=None) -> str:
        kc = self.kc
        self._handles = encoder.handles if encoder is not None else {}
        msg_id = kc.execute("", silent=True, store_history=False, allow_stdin=True,
                            user_expressions={"r": expression})
        deadline = self._deadline or time.monotonic() + self.call_timeout
        poller = zmq.asyncio.Poller()  # wake on the first message of either channel
        poller.register(kc.stdin_channel.socket, zmq.POLLIN)
        poller.register(kc.shell_channel.socket, zmq.POLLIN)
        while True:
            now = time.monotonic()
            if now > deadline:
                await self._stop(msg_id)
                raise RoomError(f"ran over {self.call_timeout:g} s and was stopped")
            ready = dict(await poller.poll(timeout=int(1000 * min(1.0, deadline - now)) + 1))
            if kc.stdin_channel.socket in ready:
                request = await ensure_async(kc.stdin_channel.get_msg(timeout=1))
                if request["header"]["msg_type"] == "input_request":
                    kc.input(self._callback(request["content"].get("prompt", "")))
                continue
            if kc.shell_channel.socket in ready:
                reply = await ensure_async(kc.shell_channel.get_msg(timeout=1))
                if reply.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                return self._result(reply)
            if not await ensure_async(self.km.is_alive()):  # a second without a message
                await self._revive()
                raise RoomError("the kernel died during the call (out of memory? exit?); "
                                "it was restarted for the next tests")

    @staticmethod
    def _result(reply) -> str:
        """The str a user_expression evaluated to, from the kernel's execute reply."""
        result = reply["content"].get("user_expressions", {}).get("r", {})
        if result.get("status") != "ok":
            raise RoomError(f"{result.get('ename', 'the kernel')}: "
                            f"{result.get('evalue', 'no reply')}")
        text = result.get("data", {}).get("text/plain", "")
        if len(text) > 4 * wire.MAX_BYTES:
            raise RoomError("the kernel's reply is too large")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise RoomError("the kernel's reply is not a string") from None
        if not isinstance(value, str):
            raise RoomError("the kernel's reply is not a string")
        return value

    def _callback(self, prompt: str) -> str:
        """Answer a stand-in's call from the kernel: run the judge's object, return data."""
        if not prompt.startswith(MARK):
            return ""  # the student's own input(): an empty line
        try:
            decoder = wire.Decoder(max_bytes=CALLBACK_BYTES)
            request = decoder.decode(prompt[len(MARK):])
            _check_small(request)
            target = self._handles[request["id"]]
            method = request["method"]
            if method is not None:
                if method != "logits":
                    raise AttributeError(method)
                target = getattr(target, method)
            value = target(*request["args"], **request["kwargs"])
            states = {str(k): v for k, v in decoder.generator_states().items()}
            return wire.Encoder().encode({"value": value, "generators": states})
        except Exception as error:  # noqa: BLE001 - told to the student's code as an error
            return wire.Encoder().encode({"error": f"{type(error).__name__}: {error}"})

    async def _stop(self, msg_id):
        """Interrupt the kernel; if the call does not end within `stop_grace_s`, restart it."""
        await ensure_async(self.km.interrupt_kernel())
        end = time.monotonic() + self.stop_grace_s
        while time.monotonic() < end:
            if await ensure_async(self.kc.shell_channel.msg_ready()):
                reply = await ensure_async(self.kc.shell_channel.get_msg(timeout=1))
                if reply.get("parent_header", {}).get("msg_id") == msg_id:
                    return
            elif await ensure_async(self.kc.stdin_channel.msg_ready()):
                await ensure_async(self.kc.stdin_channel.get_msg(timeout=1))
                self.kc.input("")
            else:
                await asyncio.sleep(0.01)
        await self._revive()

    async def _revive(self):
        """A new kernel, with every cell run so far run again (quietly), for the next tests."""
        await ensure_async(self.km.restart_kernel(now=True))
        await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
        self.room_loaded = False
        for source in self.replay:
            msg_id = self.kc.execute(source, silent=True, store_history=False)
            await self.async_wait_for_reply(msg_id)

