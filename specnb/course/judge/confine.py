"""Start a program confined, for a student's kernel while grading:

    python specnb/course/judge/confine.py CONFIG_JSON -- PROGRAM ARGS...

CONFIG_JSON = {"read": [paths], "write": [paths], "memory_bytes": int}. Before it becomes
PROGRAM (`execve`), this process

- restricts the file system (Linux Landlock, unprivileged): PROGRAM and everything it starts can
  read only under the `read` paths and write only under the `write` paths (the kernel's
  throw-away folder), so the reference solutions and the library's full source are not there to
  read, and nothing is written outside that folder. Where Landlock is new enough, it also cannot
  send signals to processes outside (the grader);
- forbids new processes (a seccomp filter: fork, vfork and a clone without CLONE_THREAD fail
  with EPERM; threads are allowed), so a submission cannot leave something running or work
  outside the kernel's limits;
- limits its address space to `memory_bytes` (an allocation past it fails in that call).

It runs as a file, not as `-m specnb...`, so that nothing but the standard library is imported
before the limits hold. `available()` says whether this machine's kernel can confine at all.
"""

import ctypes
import json
import os
import platform
import resource
import struct
import sys

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every arch.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
SCOPE_SIGNAL = 1 << 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# seccomp: (audit arch, {syscall: errno}, clone's number)
ARCHES = {"x86_64": (0xC000003E, {57: 1, 58: 1, 435: 38}, 56),  # fork, vfork, clone3 -> ENOSYS
          "aarch64": (0xC00000B7, {435: 38}, 220)}
CLONE_THREAD = 0x00010000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version of this machine's kernel, 0 if it has none."""
    if platform.system() != "Linux":
        return 0
    abi = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, int(abi))


def available() -> str | None:
    """None when this machine can confine a kernel, else why not (one line)."""
    if platform.system() != "Linux":
        return f"confinement needs Linux (Landlock and seccomp); this is {platform.system()}"
    if platform.machine() not in ARCHES:
        return f"no seccomp filter for {platform.machine()} here"
    if landlock_abi() < 1:
        return "this Linux kernel has no Landlock (5.13 or newer, enabled)"
    return None


def _fail(what: str) -> None:
    error = ctypes.get_errno()
    raise OSError(error, f"{what}: {os.strerror(error)}")


def restrict_files(read: list, write: list) -> None:
    abi = landlock_abi()
    if abi < 1:
        raise OSError("no Landlock in this kernel")
    handled = (1 << 13) - 1
    handled |= REFER if abi >= 2 else 0
    handled |= TRUNCATE if abi >= 3 else 0
    handled |= IOCTL_DEV if abi >= 5 else 0
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (0: network as is),
    # scoped (abi >= 6).
    attr = struct.pack("QQQ", handled, 0, SCOPE_SIGNAL) if abi >= 6 else struct.pack("Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    reading = EXECUTE | READ_FILE | READ_DIR
    for paths, rights in ((read, reading), (write, handled)):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path this machine lacks: nothing to allow
            allowed = rights if os.path.isdir(path) else rights & FILE_RIGHTS & handled
            rule = _PathBeneath(allowed, fd)
            if _libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                             ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                _fail(f"landlock_add_rule {path}")
            os.close(fd)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("prctl(NO_NEW_PRIVS)")
    if _libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
        _fail("landlock_restrict_self")
    os.close(ruleset)


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def forbid_processes() -> None:
    """A seccomp filter: new processes fail with EPERM (clone3 with ENOSYS, so that the C
    library falls back to clone, which still makes threads)."""
    arch, denied, clone = ARCHES[platform.machine()]
    ld_w_abs, jeq_k, jset_k, ret_k = 0x20, 0x15, 0x45, 0x06
    allow, errno = 0x7FFF0000, 0x00050000
    body = []
    for number, code in denied.items():  # if nr == number: return ERRNO(code)
        body += [_instruction(jeq_k, 0, 1, number), _instruction(ret_k, 0, 0, errno | code)]
    program = [_instruction(ld_w_abs, 0, 0, 4),  # arch: another (i386 on x86_64) gets EPERM
               _instruction(jeq_k, 1, 0, arch), _instruction(ret_k, 0, 0, errno | 1),
               _instruction(ld_w_abs, 0, 0, 0),  # syscall number; x32's carry bit 30: EPERM
               _instruction(jset_k, 0, 1, 0x40000000), _instruction(ret_k, 0, 0, errno | 1)]
    program += body
    program += [_instruction(jeq_k, 0, 3, clone),  # clone: a thread, or EPERM
                _instruction(ld_w_abs, 0, 0, 16),  # args[0], low 32 bits: the flags
                _instruction(jset_k, 1, 0, CLONE_THREAD),
                _instruction(ret_k, 0, 0, errno | 1),
                _instruction(ret_k, 0, 0, allow)]
    filters = ctypes.create_string_buffer(b"".join(program), 8 * len(program))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program), ctypes.cast(filters, ctypes.c_void_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("prctl(NO_NEW_PRIVS)")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        _fail("prctl(SECCOMP)")


def limit_memory(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: confine.py CONFIG_JSON -- PROGRAM ARGS...")
    config = json.loads(argv[0])
    limit_memory(int(config["memory_bytes"]))
    restrict_files(config["read"], config["write"])
    forbid_processes()
    os.execv(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
