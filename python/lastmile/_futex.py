"""Low-level shared-memory primitives: futex wait/wake and ordered loads/stores.

Everything here works on raw addresses inside a ``mmap`` that the caller keeps
open for as long as it uses them.

Atomicity and ordering
----------------------
The ring protocol (docs/ring-format.md, section 6) needs single-copy atomic,
aligned 4- and 8-byte loads and stores with acquire/release ordering, plus a
full barrier between "I am waiting" and re-checking the condition.

* When ``libatomic.so.1`` (the GCC runtime, present on practically every Linux
  distribution with a C toolchain or a CPython built by GCC) can be loaded, the
  loads and stores are real ``__atomic_load_N(ptr, ACQUIRE)`` /
  ``__atomic_store_N(ptr, v, RELEASE)`` calls and ``fence()`` is
  ``atomic_thread_fence(SEQ_CST)``. This is correct on every architecture.
* Otherwise (``ATOMICS == "fallback"``) loads and stores go through ctypes
  scalar objects, whose getters and setters copy the value with a constant-size
  ``memcpy`` that compilers emit as a single aligned load or store (single-copy
  atomic on x86-64 and arm64). Ordering then comes from the hardware and from
  CPython itself: on x86-64 (TSO) loads are not reordered with loads, stores not
  with stores, so plain loads are acquire and plain stores are release. On
  arm64 every ctypes foreign call releases and re-acquires the GIL, i.e. a
  pthread mutex unlock (release) followed by a lock (acquire), which orders the
  accesses before it against the accesses after it; ``fence()`` is such a call.
  That is an implementation property of CPython, not a documented guarantee, so
  on arm64 without libatomic the client is "correct in practice" only.

Futexes
-------
``SYS_futex`` is called through libc's ``syscall()`` with ``FUTEX_WAIT`` (0) and
``FUTEX_WAKE`` (1) and no ``FUTEX_PRIVATE_FLAG``, because the word is shared
between processes. ctypes releases the GIL around the call, so other Python
threads keep running while one sleeps, and a signal (Ctrl-C) interrupts the
wait with ``EINTR``; Python then runs its handler at the next bytecode.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import platform

__all__ = [
    "ATOMICS",
    "FULL_FENCE",
    "SYS_futex",
    "fence",
    "futex_wait",
    "futex_wake",
    "load_u32",
    "load_u64",
    "store_u32",
    "store_u64",
]

_SYSCALL_NUMBERS = {
    "x86_64": 202,
    "amd64": 202,
    "aarch64": 98,
    "arm64": 98,
}

_machine = platform.machine().lower()
SYS_futex = _SYSCALL_NUMBERS.get(_machine)

FUTEX_WAIT = 0
FUTEX_WAKE = 1

# C11 memory orders as used by the GCC __atomic builtins.
_RELAXED, _CONSUME, _ACQUIRE, _RELEASE, _ACQ_REL, _SEQ_CST = range(6)

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _require_futex():
    if SYS_futex is None:
        raise OSError(
            _errno.ENOSYS,
            "lastmile: futex syscall number unknown for machine %r "
            "(supported: x86_64, aarch64)" % platform.machine(),
        )


def futex_wait(addr: int, expected: int, timeout: float | None) -> int:
    """FUTEX_WAIT on the u32 at ``addr`` while it holds ``expected``.

    Returns 0 when woken, or the errno: ``ETIMEDOUT`` (timeout elapsed),
    ``EAGAIN`` (the word no longer held ``expected``), ``EINTR`` (a signal).
    Other errors raise ``OSError``.
    """
    _require_futex()
    if timeout is None:
        ts = None
    else:
        timeout = max(0.0, timeout)
        sec = int(timeout)
        ts = ctypes.byref(_Timespec(sec, int((timeout - sec) * 1e9)))
    r = _syscall(
        ctypes.c_long(SYS_futex),
        ctypes.c_void_p(addr),
        ctypes.c_int(FUTEX_WAIT),
        ctypes.c_uint32(expected & 0xFFFFFFFF),
        ts,
        ctypes.c_void_p(0),
        ctypes.c_uint32(0),
    )
    if r == 0:
        return 0
    e = ctypes.get_errno()
    if e in (_errno.ETIMEDOUT, _errno.EAGAIN, _errno.EINTR):
        return e
    raise OSError(e, "futex(FUTEX_WAIT): " + _errno.errorcode.get(e, str(e)))


def futex_wake(addr: int, count: int = 1) -> int:
    """FUTEX_WAKE up to ``count`` waiters on the u32 at ``addr``; returns how many woke."""
    _require_futex()
    r = _syscall(
        ctypes.c_long(SYS_futex),
        ctypes.c_void_p(addr),
        ctypes.c_int(FUTEX_WAKE),
        ctypes.c_int(count),
        ctypes.c_void_p(0),
        ctypes.c_void_p(0),
        ctypes.c_uint32(0),
    )
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "futex(FUTEX_WAKE): " + _errno.errorcode.get(e, str(e)))
    return r


def _load_libatomic():
    names = ["libatomic.so.1"]
    found = ctypes.util.find_library("atomic")
    if found and found not in names:
        names.append(found)
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            lib.__atomic_load_4, lib.__atomic_load_8  # noqa: B018 (probe symbols)
            lib.__atomic_store_4, lib.__atomic_store_8
            lib.atomic_thread_fence
            return lib
        except (OSError, AttributeError):
            continue
    return None


_lib = _load_libatomic()

if _lib is not None:
    ATOMICS = "libatomic"
    # fence() is atomic_thread_fence(SEQ_CST): a real full barrier, so callers
    # may rely on it for store->load ordering (Dekker-style flag checks).
    FULL_FENCE = True

    _l4 = _lib.__atomic_load_4
    _l4.argtypes = [ctypes.c_void_p, ctypes.c_int]
    _l4.restype = ctypes.c_uint32
    _l8 = _lib.__atomic_load_8
    _l8.argtypes = [ctypes.c_void_p, ctypes.c_int]
    _l8.restype = ctypes.c_uint64
    _s4 = _lib.__atomic_store_4
    _s4.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]
    _s4.restype = None
    _s8 = _lib.__atomic_store_8
    _s8.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int]
    _s8.restype = None
    _fence = _lib.atomic_thread_fence
    _fence.argtypes = [ctypes.c_int]
    _fence.restype = None

    def load_u32(addr: int) -> int:
        """Acquire load of the aligned u32 at ``addr``."""
        return _l4(addr, _ACQUIRE)

    def load_u64(addr: int) -> int:
        """Acquire load of the aligned u64 at ``addr``."""
        return _l8(addr, _ACQUIRE)

    def store_u32(addr: int, value: int) -> None:
        """Release store of the aligned u32 at ``addr``."""
        _s4(addr, value & 0xFFFFFFFF, _RELEASE)

    def store_u64(addr: int, value: int) -> None:
        """Release store of the aligned u64 at ``addr``."""
        _s8(addr, value & 0xFFFFFFFFFFFFFFFF, _RELEASE)

    def fence() -> None:
        """Full (sequentially consistent) memory barrier."""
        _fence(_SEQ_CST)

else:  # pragma: no cover - exercised only where libatomic is missing
    ATOMICS = "fallback"
    # Not a guaranteed store->load barrier: callers must not rely on it to make
    # a conditional futex wake safe (they wake unconditionally instead).
    FULL_FENCE = False

    _getpid = _libc.getpid  # any foreign call: releases and re-takes the GIL

    def fence() -> None:
        _getpid()

    _TSO = _machine in ("x86_64", "amd64", "i386", "i686")

    def load_u32(addr: int) -> int:
        v = ctypes.c_uint32.from_address(addr).value
        if not _TSO:
            fence()
        return v

    def load_u64(addr: int) -> int:
        v = ctypes.c_uint64.from_address(addr).value
        if not _TSO:
            fence()
        return v

    def store_u32(addr: int, value: int) -> None:
        if not _TSO:
            fence()
        ctypes.c_uint32.from_address(addr).value = value & 0xFFFFFFFF

    def store_u64(addr: int, value: int) -> None:
        if not _TSO:
            fence()
        ctypes.c_uint64.from_address(addr).value = value & 0xFFFFFFFFFFFFFFFF
