"""Host staging: batches that arrive on the GPU (docs/gpu.md).

``Ring.iter_torch(device="cuda:0")`` and ``Dataset(..., device="cuda:0")``
yield batches whose tensors are on the device. With staging (the default
where the trainer has a GPU: the job's ``gpu.staging`` is ``host`` or left
out), each batch gets there like this:

1. Once, when the ring is opened, the trainer maps the ring file a second
   time at a 2 MiB-aligned address and registers that mapping with CUDA
   (``torch.cuda.cudart().cudaHostRegister``): the ring's pages are then
   pinned in place, and the DMA engine reads them directly.
2. Per batch, one asynchronous copy of the slot's used bytes, on a side
   stream, into a device slot taken from a small pool (``pool``, default 3).
   The batch's tensors are views of the device slot at the payload offsets
   of the ring slot, so a batch of any number of tensors costs one copy.
   A tensor in the job's unit arena (format 4.2, docs/ring-format.md 8)
   is not in the slot: it is copied on its own with ``Tensor.to(device)``
   from the arena's pageable pages (the arena is not registered).
   The trainer's current stream waits on the copy's event, so its kernels
   run after the copy without the host waiting.
3. The ring slot is released only after the copy's event has completed
   (the host waits on it when the next batch is asked for, by which time
   the copy is long done): the producer never overwrites a slot the DMA
   engine still reads.
4. The next batch's copy is queued while the GPU runs the current step:
   asking for the next batch releases the slot, takes the next one and
   queues its copy, which runs beside the step's kernels.
5. On close: wait for the last copy, unregister, and only then unmap.

A device slot is reused ``pool`` batches later, by a copy that waits for
the trainer's stream to pass the point where the batch before it was asked
for: work queued on a batch's tensors before the ``pool - 1``-th next batch
is taken runs before its device slot is overwritten (with the default pool
of 3: a loop that takes the next batch before it queues its step on the
current one, a one-batch prefetch, is safe; keep a ``.clone()`` for longer).
The copy still overlaps the step on the batch before it. (Before
2026-11-29 the copy waited only for the point where the slot's own batch's
successor was asked for, so a one-batch prefetch could have its current
batch overwritten under its step; tests/test_trainer_edges.py.)

If registration fails (no CUDA, too little lockable memory, a driver that
refuses), the rank falls back to host copies (``Tensor.to(device)`` from the
ring's pageable pages, then release) and logs a warning once; it never
fails the job for it.

The CUDA calls go through a backend object (``TorchCUDA``); tests pass a
stand-in.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os

from .owned import OwnedBatch

log = logging.getLogger("lastmile")

__all__ = ["HostStaging", "TorchCUDA", "StagingError", "stager", "ALIGN"]

ALIGN = 2 << 20  # registrations start on a 2 MiB (huge page) boundary
CUDA_HOST_REGISTER_PORTABLE = 1


class StagingError(RuntimeError):
    """A CUDA call of host staging failed."""


class TorchCUDA:
    """The CUDA calls host staging needs, through torch."""

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError("host staging needs a CUDA device, got %s" % self.device)
        if not torch.cuda.is_available():
            raise StagingError("torch has no CUDA here (torch.cuda.is_available() is False)")
        self.cudart = torch.cuda.cudart()
        self.stream = torch.cuda.Stream(device=self.device)

    def _check(self, what, r):
        code = int(getattr(r, "value", r))
        if code != 0:
            self._clear_last_error()
            raise StagingError("%s failed: cudaError %d" % (what, code))

    def _clear_last_error(self):
        """Reset the CUDA runtime's last error after a call of ours failed.

        The runtime keeps a failed call's error as the thread's last error,
        and torch's next check after a kernel launch or copy reports it as
        its own failure: on an H100, a refused ``cudaHostRegister`` made the
        fallback's first ``Tensor.to("cuda")`` raise "CUDA error: invalid
        argument". torch's ``cudart()`` does not bind ``cudaGetLastError``,
        so call it in the runtime torch loaded; failing that, let a tiny
        launch take the stale error, as torch's own check resets it.
        """
        path = None
        try:
            with open("/proc/self/maps") as f:
                path = next((ln.split()[-1] for ln in f if "libcudart" in ln and "/" in ln), None)
        except OSError:
            pass
        try:
            if path:
                ctypes.CDLL(path).cudaGetLastError()
                return
        except (OSError, AttributeError):
            pass
        try:
            self.torch.empty(1, device=self.device).zero_()
        except RuntimeError:
            pass  # the stale error, now taken

    def register(self, addr, nbytes):
        self._check("cudaHostRegister(%#x, %d)" % (addr, nbytes),
                    self.cudart.cudaHostRegister(addr, nbytes, CUDA_HOST_REGISTER_PORTABLE))

    def unregister(self, addr):
        self._check("cudaHostUnregister(%#x)" % addr, self.cudart.cudaHostUnregister(addr))

    def alloc(self, nbytes):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)

    def host(self, addr, nbytes):
        """A CPU uint8 tensor over registered memory at ``addr`` (no copy)."""
        buf = (ctypes.c_uint8 * nbytes).from_address(addr)
        return self.torch.frombuffer(buf, dtype=self.torch.uint8, count=nbytes)

    def copy(self, dst, src, after):
        """Queue ``dst[:n] <- src`` on the side stream after event ``after``
        (None: at once); return the copy's completion event."""
        t = self.torch
        with t.cuda.stream(self.stream):
            if after is not None:
                self.stream.wait_event(after)
            dst[: src.numel()].copy_(src, non_blocking=True)
            ev = t.cuda.Event()
            ev.record(self.stream)
        return ev

    def order_after(self, ev):
        """Make the trainer's current stream wait for ``ev``."""
        self.torch.cuda.current_stream(self.device).wait_event(ev)

    def mark(self):
        """An event recorded on the trainer's current stream now."""
        ev = self.torch.cuda.Event()
        ev.record(self.torch.cuda.current_stream(self.device))
        return ev

    def current_stream(self):
        """The trainer's current stream: where a staged batch is ready."""
        return self.torch.cuda.current_stream(self.device)

    def wait(self, ev):
        ev.synchronize()

    def view(self, dst, offset, nbytes, dtype, shape):
        return dst[offset : offset + nbytes].view(dtype).view(shape)

    def upload(self, t):
        """A device copy of host tensor ``t`` (pageable: a unit arena's view),
        on the trainer's current stream, done with ``t`` when it returns."""
        return t.to(self.device)


_TMPFS, _HUGETLBFS = 0x01021994, 0x958458F6
_FS_NAMES = {_TMPFS: "tmpfs", _HUGETLBFS: "hugetlbfs", 0xEF53: "ext2/3/4", 0x58465342: "xfs",
             0x9123683E: "btrfs", 0x794C7630: "overlayfs", 0x6969: "nfs", 0x65735546: "fuse"}


def fs_type(fd):
    """The statfs magic of ``fd``'s filesystem (``f_type``), or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
        if libc.fstatfs(fd, buf) != 0:
            return None
        return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF  # f_type comes first
    except (OSError, AttributeError):
        return None


def unpinnable(fd):
    """Why CUDA cannot register the file ``fd`` in place, or None.

    Linux 6.5 and later refuse the long-term pin that registration takes of
    a shared, writable mapping of a file on a filesystem with writeback
    (ext4, xfs, NFS, ...): the driver answers only "invalid value". tmpfs
    (/dev/shm, where lastmiled puts rings) and hugetlbfs pin.
    """
    t = fs_type(fd)
    if t is None or t in (_TMPFS, _HUGETLBFS):
        return None
    return ("the ring's file is on %s, whose shared mappings Linux (6.5 and later) does not pin for "
            "CUDA; put rings on tmpfs (/dev/shm, lastmiled's default shm_dir)"
            % _FS_NAMES.get(t, "filesystem type %#x" % t))


class _AlignedMapping:
    """A second shared mapping of the ring file, at a 2 MiB-aligned address."""

    def __init__(self, fd, size):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._libc = libc
        span = size + ALIGN
        anon = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
        res = libc.mmap(None, span, mmap.PROT_NONE if hasattr(mmap, "PROT_NONE") else 0, anon, -1, 0)
        if res in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "reserve %d bytes of address space" % span)
        aligned = (res + ALIGN - 1) & ~(ALIGN - 1)
        MAP_FIXED = 0x10
        got = libc.mmap(aligned, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED,
                        fd, 0)
        if got != aligned:
            err = ctypes.get_errno()
            libc.munmap(res, span)
            raise OSError(err, "map the ring at a 2 MiB boundary")
        if aligned > res:
            libc.munmap(res, aligned - res)
        end = aligned + size
        if res + span > end:
            libc.munmap(end, res + span - end)
        self.addr, self.size = aligned, size

    def close(self):
        if self.addr:
            self._libc.munmap(self.addr, self.size)
            self.addr = 0


class StagedBatch(OwnedBatch):
    """A batch of views of one of :class:`HostStaging`'s device slots:
    released once a later batch is staged into that slot (``pool`` batches
    later), and then refused like a released ring batch."""

    __slots__ = ("_stager", "_staged", "_ready_on")
    _owns = False  # views of a device slot: detach() copies them

    @property
    def released(self) -> bool:
        st = getattr(self, "_stager", None)
        return st is not None and st.i - self._staged > len(st.slots)

    def _check(self):
        if self.released:
            raise RuntimeError(
                "batch %d was staged into a device slot that a later batch now holds (%d device "
                "slots): its tensors read that batch's bytes; clone() what you keep longer, or "
                "lastmile.Dataset(..., copy=True)" % (self.seq, len(self._stager.slots)))


class HostStaging:
    """Stages one ring's batches onto a CUDA device (see the module doc).

    Use it around the ring's own ``next()``: :meth:`before_next` before each
    ``ring.next()`` (it waits for the held slot's copy, so the slot is
    released only after it), :meth:`stage` on each batch, :meth:`close`
    before closing the ring.
    """

    def __init__(self, ring, device, *, pool=3, backend=None):
        if pool < 2:
            raise ValueError("pool=%d: want at least 2 device slots" % pool)
        self.ring = ring
        self.cuda = backend if backend is not None else TorchCUDA(device)
        geo = ring._core.geo
        self.slot_size = geo.slot_size
        self.map = _AlignedMapping(ring._core.fd, os.fstat(ring._core.fd).st_size)
        try:
            self.cuda.register(self.map.addr, self.map.size)
        except StagingError as e:
            self.map.close()
            why = unpinnable(ring._core.fd)
            if why:
                raise StagingError("%s: %s" % (e, why)) from e
            raise
        except BaseException:
            self.map.close()
            raise
        self.registered = True
        self.slots = [None] * pool  # device buffers, allocated on first use
        self.i = 0  # batches staged
        self.copy_ev = None  # the held slot's copy event
        self.last = None  # slot index of the batch handed out last
        # events on the trainer's stream where the last two batches were
        # asked for (the older one first): a reused slot's copy waits for
        # the older, so that it still overlaps the step on the batch before
        self.marks = (None, None)

    def before_next(self):
        """Wait for the held slot's copy (its release follows), and note that the
        trainer's stream has queued its work on the last batch."""
        if self.last is not None:
            self.marks = (self.marks[1], self.cuda.mark())
            self.last = None
        if self.copy_ev is not None:
            self.cuda.wait(self.copy_ev)
            self.copy_ev = None

    def stage(self, batch):
        """One async copy of ``batch``'s slot; the batch as views of the device slot."""
        from .owned import _map

        core = self.ring._core
        so = core.slot_offset(batch.seq)
        used = int.from_bytes(core.mm[so + 8 : so + 16], "little")  # used_bytes (5.1)
        k = self.i % len(self.slots)
        self.i += 1
        after = None
        if self.slots[k] is None:
            self.slots[k] = self.cuda.alloc(self.slot_size)
        else:  # batch i - pool's slot: wait for the stream where batch i - 1 was asked for
            after = self.marks[0] if self.marks[0] is not None else self.marks[1]
        dst = self.slots[k]
        src = self.cuda.host(self.map.addr + so, used)
        ev = self.cuda.copy(dst, src, after)
        self.copy_ev, self.last = ev, k
        self.cuda.order_after(ev)
        tb = batch.torch()
        base = core.base + so
        arena_lo, arena_hi = core.arena_base, core.arena_end

        def conv(t):
            if t.numel() and arena_lo <= t.data_ptr() < arena_hi:
                # A tensor in the unit arena (format 4.2): not in the slot,
                # and not registered. Copied on its own, from pageable
                # memory, before the slot (and so its arena bytes) is released.
                return self.cuda.upload(t)
            off = t.data_ptr() - base if t.numel() else 0
            return self.cuda.view(dst, off, t.numel() * t.element_size(), t.dtype, t.shape)

        data = {n: _map(v, conv) for n, v in tb._data.items()}
        valid = {n: conv(v) for n, v in tb.valid.items()}
        b = StagedBatch(None, tb._fields, data, valid, tb.rows, tb.seq, tb.cursor, tb.flags, True,
                        pad_rows=tb.pad_rows)
        b._stager, b._staged = self, self.i - 1
        b._ready_on = ready_on(self.cuda)
        return b

    def close(self):
        """Wait for the last copy, unregister, then unmap (in that order)."""
        if self.map is None:
            return
        try:
            if self.copy_ev is not None:
                self.cuda.wait(self.copy_ev)
                self.copy_ev = None
            if self.registered:
                self.registered = False
                self.cuda.unregister(self.map.addr)
        finally:
            self.map.close()
            self.map = None
            self.slots = [None] * len(self.slots)


def ready_on(backend):
    """The stream a batch staged now is ready on (the trainer's current
    one), or None for a backend that does not say (the tests' stand-ins)."""
    f = getattr(backend, "current_stream", None)
    return f() if f is not None else None


class HostCopies:
    """The fallback: each batch copied with ``Tensor.to(device)`` from the ring's
    pageable pages (synchronous), then released by the next ``ring.next()``."""

    def __init__(self, device):
        self.device = device

    def before_next(self):
        pass

    def stage(self, batch):
        from .owned import to_device

        return to_device(batch, self.device)

    def close(self):
        pass


def stager(ring, device, *, staging="host", pool=3, backend=None, ipc=None):
    """The stager for ``ring`` onto ``device``: :class:`HostStaging`, or
    :class:`HostCopies` when ``staging`` is ``off``, when the device is not a
    CUDA device, or, with a warning, when registration fails."""
    if staging not in ("host", "auto", "", None, "off", "device"):
        raise ValueError("staging=%r: want host, device or off" % (staging,))
    if staging == "off" or not str(device).startswith("cuda"):
        return HostCopies(device)
    try:
        host = HostStaging(ring, device, pool=pool, backend=backend)
    except Exception as e:  # registration or mapping failed: copy from the host instead
        log.warning("lastmile: cannot register ring %s with CUDA (%s); falling back to "
                    "host copies (synchronous, from pageable memory)", ring.name, e)
        host = HostCopies(device)
    if staging != "device":
        return host
    from . import devstage

    try:
        ipc = ipc if ipc is not None else devstage.DriverIPC(device)
    except Exception as e:
        log.warning("lastmile: ring %s: cannot use lastmiled's device slots (%s); "
                    "staging its batches here instead", ring.name, e)
        return host
    return devstage.DeviceStaging(ring, device, ipc, host, lambda: devstage.slots_alive(ring._core.fd))


class DatasetStaging:
    """A :class:`lastmile.Dataset`'s stager, made again for each ring it attaches."""

    def __init__(self, device, staging, pool=3):
        self.device, self.staging, self.pool = device, staging, pool
        self.st, self.ring = None, None

    def before_next(self, ring):
        if self.ring is not ring:
            self.close()
            mode = self.staging() if callable(self.staging) else self.staging
            self.st, self.ring = stager(ring, self.device, staging=mode, pool=self.pool), ring
        self.st.before_next()

    def stage(self, batch):
        return self.st.stage(batch)

    def close(self):
        st, self.st, self.ring = self.st, None, None
        if st is not None:
            st.close()
