"""Device staging, the trainer's side (docs/gpu.md, "device").

With ``gpu.staging: device`` lastmiled copies each batch to the rank's GPU
before publishing it and announces, in the ring's page 0 (format 1.2,
docs/ring-format.md 3.6), one device allocation holding a device slot per
ring slot and one interprocess event per slot. Per ring, this client:

1. reads the announcement before each batch (one 4-byte load while it does
   not change); when it changes it closes the handles it had and opens the
   new ones, once (a new ``generation``: the daemon restarted);
2. per batch taken while the handles are announced: makes the trainer's
   current stream wait on the slot's event (no host wait) and returns the
   batch as views of device slot *k* at the ring slot's payload offsets;
3. before the next batch releases this one: records an event on the
   trainer's stream and waits for it, so the producer never copies into a
   device slot the trainer's kernels still read;
4. while nothing is announced (the daemon fell back to host staging, or
   the ring is older than 1.2): the batch is copied by host staging
   (``fallback``), as every batch is also in the ring slot.

If the producer is dead while its handles are open, asking for the next
batch raises :class:`DeviceStagingLost` (the handles are closed first, and
no new batch was taken, so nothing is lost): iterate again and the client
reads the ring through host copies until a restarted daemon announces new
handles. A batch taken in the moment the daemon dies is served from the
ring slot (host copies), with a warning; handles a dead daemon left are
never opened, and handles that fail to open leave the ring to host staging,
with a warning.

The CUDA calls go through a backend (:class:`DriverIPC`, unverified on a
GPU); tests pass a stand-in.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct

from .batch import Batch
from .format import _lock_free
from .owned import OwnedBatch

log = logging.getLogger("lastmile")

ANNOUNCE_SEQ, ANNOUNCE_LEN, ANNOUNCE = 1536, 1540, 1544
MAX_SLOTS = 38


class DeviceStagingLost(RuntimeError):
    """The daemon that exported the device slots is gone."""


class Announcement:
    def __init__(self, slots, bus_id, generation, mem, events):
        self.slots, self.bus_id, self.generation, self.mem, self.events = slots, bus_id, generation, mem, events


def read_announcement(mm, minor):
    """(seq, Announcement or None) under the sequence lock of 3.6."""
    if minor < 2:
        return 0, None
    for _ in range(1000):
        seq = struct.unpack_from("<I", mm, ANNOUNCE_SEQ)[0]
        if seq % 2:
            continue
        n = struct.unpack_from("<I", mm, ANNOUNCE_LEN)[0]
        block = bytes(mm[ANNOUNCE : ANNOUNCE + min(n, 4096 - ANNOUNCE)])
        if struct.unpack_from("<I", mm, ANNOUNCE_SEQ)[0] != seq:
            continue
        if n == 0:
            return seq, None
        return seq, parse_block(block, n)
    raise RuntimeError("ring announcement: the producer stayed mid-write (announce_seq odd)")


def parse_block(b, n):
    """The device staging block (docs/ring-format.md 3.6.1); None for another kind."""
    if n > 4096 - ANNOUNCE or n < 96:
        raise ValueError("ring announcement: announce_len %d out of range" % n)
    kind, slots = struct.unpack_from("<II", b, 0)
    if kind != 1:
        return None
    if not 1 <= slots <= MAX_SLOTS or n < 96 + 64 * slots:
        raise ValueError("ring announcement: %d device slots in %d bytes" % (slots, n))
    bus = b[8:24].split(b"\0", 1)[0].decode("ascii", "replace")
    gen = struct.unpack_from("<Q", b, 24)[0]
    events = [b[96 + 64 * k : 160 + 64 * k] for k in range(slots)]
    return Announcement(slots, bus, gen, b[32:96], events)


def norm_bus_id(s):
    """A PCI bus id as lastmiled announces it: lower case, a 4-digit domain
    (NVML and torch write 8 digits, CUDA 4)."""
    s = s.strip("\0").strip().lower()
    dom, sep, rest = s.partition(":")
    if sep and len(dom) > 4:
        s = dom[-4:] + ":" + rest
    return s


DEVICE_SLOTS_LOCK_BYTE = 2  # held by lastmiled while the announced device slots exist (6.4)


def slots_alive(fd):
    """Whether the announced device slots still exist: the producer is alive
    (byte 0 locked), or, after it closed the ring at the end of a run,
    lastmiled still holds the slots for the trainer's last batches (byte 2
    locked until it frees them). Both locks go when lastmiled dies."""
    return not _lock_free(fd, 0) or not _lock_free(fd, DEVICE_SLOTS_LOCK_BYTE)


class DeviceStagedBatch(OwnedBatch):
    """A batch of views of one of lastmiled's device slots: released with
    its ring slot when the next batch is taken (or the stager closed), and
    then refused like a released ring batch, instead of reading the bytes
    lastmiled copies there next. What outlives it is a copy:
    ``batch.to(device, copy=True)``, ``lastmile.owned.clone(batch)``, or
    ``Dataset(..., copy=True)``; a torchrec pipeline's ``to(device)``
    of it is one (docs/python.md, "torchrec training pipelines")."""

    _owns = False  # views of a device slot: detach() copies them

    @property
    def released(self) -> bool:
        st = getattr(self, "_stager", None)
        return st is not None and st.released >= self._n

    def _check(self):
        if self.released:
            raise RuntimeError(
                "batch %d was a view of lastmiled's device slot (gpu: {staging: device}), released "
                "when the next batch was taken: lastmiled copies a later batch there. Keep a copy "
                "instead (batch.to(device, copy=True), lastmile.owned.clone(batch), or "
                "lastmile.Dataset(..., copy=True))" % self.seq)

    def __repr__(self):
        return Batch.__repr__(self).replace("<lastmile.Batch", "<lastmile.DeviceStagedBatch", 1)


class DeviceStaging:
    """Stages one ring's batches from the daemon's device slots (module doc).
    Same interface as :class:`lastmile.cuda.HostStaging`."""

    def __init__(self, ring, device, backend, fallback, producer_alive):
        self.ring, self.device, self.cuda = ring, device, backend
        self.fallback = fallback  # a host stager, for batches nothing announces
        self.producer_alive = producer_alive
        self.seq = None  # announce_seq the handles belong to
        self.ann = None
        self.mem = None
        self.events = None
        self.handed = False  # a batch of device views is out and its slot held
        self.lost = None  # generation whose producer died; not reopened
        self.device_batches = 0  # batches handed out as views of lastmiled's device slots
        self.released = 0  # of those, how many were released (the next batch was taken)

    def before_next(self):
        """Step 3: before the held slot is released, wait until the trainer's
        stream has done the work it queued on the device slot since."""
        if self.handed:
            self.handed = False
            self.cuda.wait(self.cuda.mark())
            self.released = self.device_batches
        self.fallback.before_next()
        # Checked here, before the next batch is taken: raising after it
        # was taken would lose it when the trainer iterates again.
        if self.ann is not None and not self.producer_alive():
            gen = self._drop_dead()
            raise DeviceStagingLost(
                "ring %s: lastmiled, which staged its batches on the GPU (generation %d), died; its "
                "device slots are gone. Iterate again: batches continue from the ring with host "
                "copies, and device staging resumes when a restarted lastmiled announces new handles"
                % (self.ring.name, gen))

    def _drop_dead(self):
        """Close the handles of a dead producer; never reopen its generation."""
        gen = self.ann.generation
        self._drop_handles()
        self.lost, self.ann = gen, None
        return gen

    def _refresh(self):
        core = self.ring._core
        seq, ann = read_announcement(core.mm, core.geo.minor)
        if seq == self.seq:
            return
        self._drop_handles()
        self.seq, self.ann = seq, ann
        if ann is None or ann.generation == self.lost:
            self.ann = None
            return
        if core.arena is not None:
            # Device staging copies slots only, and a ring that names a unit
            # arena has tensors outside them (docs/ring-format.md 8.3):
            # lastmiled never announces both. Not trusted if it does.
            self.ann = None
            log.warning("lastmile: ring %s names a unit arena and announces device slots, which copy "
                        "slots only; staging its batches here instead", self.ring.name)
            return
        if not self.producer_alive():  # left by a dead daemon, not yet adopted
            self._drop_dead()
            return
        mine = self._bus_id()
        if mine is not None and norm_bus_id(mine) != norm_bus_id(ann.bus_id):
            # lastmiled mapped this rank to another GPU than the trainer's
            # device (per-process CUDA_VISIBLE_DEVICES the job spec does not
            # know, CUDA ordinals that are not NVML's): its slots would be
            # opened through peer access, or not at all.
            self.ann = None
            log.warning("lastmile: ring %s: lastmiled staged its batches on GPU %s, but this trainer's "
                        "device %s is GPU %s; staging its batches here instead (set the job's "
                        "gpu.devices or gpu.visible_devices to the trainers' GPUs)",
                        self.ring.name, ann.bus_id, self.device, mine)
            return
        try:
            self.mem = self.cuda.open_mem(ann.mem, ann.slots * core.geo.slot_size)
            self.events = []
            for h in ann.events:
                self.events.append(self.cuda.open_event(h))
        except Exception as e:  # this announcement stays unused; host staging instead
            self._drop_handles()
            self.ann = None
            log.warning("lastmile: ring %s: cannot open lastmiled's device slots (%s); "
                        "staging its batches here instead", self.ring.name, e)
            return
        log.info("lastmile: ring %s: device staging by lastmiled on %s (generation %d)",
                 self.ring.name, ann.bus_id, ann.generation)

    def _bus_id(self):
        f = getattr(self.cuda, "bus_id", None)
        if f is None:
            return None
        try:
            return f()
        except Exception as e:  # unknown: do not refuse for it
            log.info("lastmile: ring %s: the PCI bus id of %s is unknown (%s)", self.ring.name, self.device, e)
            return None

    def stage(self, batch):
        from .cuda import ready_on
        from .owned import _map

        self._refresh()
        if self.ann is None:
            return self.fallback.stage(batch)
        if not self.producer_alive():  # died since before_next: the ring slot is still good
            gen = self._drop_dead()
            log.warning("lastmile: ring %s: lastmiled (generation %d) died; its device slots are "
                        "closed, batches come from the ring with host copies", self.ring.name, gen)
            return self.fallback.stage(batch)
        core = self.ring._core
        k = batch.seq % self.ann.slots
        self.cuda.stream_wait(self.events[k])
        so = core.slot_offset(batch.seq)
        dev_off = k * core.geo.slot_size
        tb = batch.torch()
        base = core.base + so

        def conv(t):
            off = t.data_ptr() - base if t.numel() else 0
            return self.cuda.view(self.mem, dev_off + off, t.numel() * t.element_size(), t.dtype, t.shape)

        data = {n: _map(v, conv) for n, v in tb._data.items()}
        valid = {n: conv(v) for n, v in tb.valid.items()}
        self.handed = True
        self.device_batches += 1
        b = DeviceStagedBatch(None, tb._fields, data, valid, tb.rows, tb.seq, tb.cursor, tb.flags, True,
                              pad_rows=tb.pad_rows)
        b._stager, b._n = self, self.device_batches
        b._ready_on = ready_on(self.cuda)
        return b

    def _close_handles(self):
        """Close every opened handle, each even if another's close failed;
        the first failure is raised once all were tried."""
        handles = [(self.cuda.close_event, ev) for ev in self.events or ()]
        if self.mem is not None:
            handles.append((self.cuda.close_mem, self.mem))
        self.mem, self.events = None, None
        first = None
        for close, h in handles:
            try:
                close(h)
            except Exception as e:  # noqa: BLE001 - the driver's error, raised below
                first = first or e
        if first is not None:
            raise first

    def _drop_handles(self):
        """Close the handles where failing to close one must not stop the
        batch: logged, the handles forgotten either way."""
        try:
            self._close_handles()
        except Exception as e:  # noqa: BLE001
            log.warning("lastmile: ring %s: closing the device staging handles failed: %s",
                        self.ring.name, e)

    def close(self):
        if self.handed:
            self.handed = False
            self.cuda.wait(self.cuda.mark())
        self.released = self.device_batches
        try:
            self._close_handles()
        finally:
            self.fallback.close()


class _IPCHandle(ctypes.Structure):
    """CUipcMemHandle / CUipcEventHandle: 64 bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class Driver:
    """The driver API calls of device staging, through ctypes: ``libcuda.so.1``,
    or ``$LASTMILE_LIBCUDA`` (tests load the fake of cuda/testdata). The
    calling thread must have the device's context current (torch's)."""

    def __init__(self, path=None):
        self.lib = ctypes.CDLL(path or os.environ.get("LASTMILE_LIBCUDA") or "libcuda.so.1")
        u64p, vp = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)
        for name, args in (("cuIpcOpenMemHandle_v2", [u64p, _IPCHandle, ctypes.c_uint]),
                           ("cuIpcCloseMemHandle", [ctypes.c_uint64]),
                           ("cuIpcOpenEventHandle", [vp, _IPCHandle]),
                           ("cuEventDestroy_v2", [ctypes.c_void_p]),
                           ("cuStreamWaitEvent", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]),
                           ("cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                           ("cuDeviceGetPCIBusId", [ctypes.c_char_p, ctypes.c_int, ctypes.c_int])):
            f = getattr(self.lib, name)
            f.argtypes, f.restype = args, ctypes.c_int

    @staticmethod
    def _check(what, r):
        if r != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, r))

    def open_mem(self, handle):
        """The device address of an exported allocation (cuIpcOpenMemHandle,
        lazy peer access)."""
        ptr = ctypes.c_uint64()
        self._check("cuIpcOpenMemHandle", self.lib.cuIpcOpenMemHandle_v2(
            ctypes.byref(ptr), _IPCHandle.from_buffer_copy(bytes(handle)), 1))
        return ptr.value

    def close_mem(self, ptr):
        self._check("cuIpcCloseMemHandle", self.lib.cuIpcCloseMemHandle(ptr))

    def open_event(self, handle):
        ev = ctypes.c_void_p()
        self._check("cuIpcOpenEventHandle", self.lib.cuIpcOpenEventHandle(ctypes.byref(ev), _IPCHandle.from_buffer_copy(bytes(handle))))
        return ev.value

    def destroy_event(self, ev):
        self._check("cuEventDestroy", self.lib.cuEventDestroy_v2(ev))

    def stream_wait(self, stream, ev):
        self._check("cuStreamWaitEvent", self.lib.cuStreamWaitEvent(stream, ev, 0))

    def bus_id(self, ordinal):
        """The PCI bus id of device ``ordinal`` as this process numbers it."""
        dev = ctypes.c_int()
        self._check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(dev), ordinal))
        buf = ctypes.create_string_buffer(32)
        self._check("cuDeviceGetPCIBusId", self.lib.cuDeviceGetPCIBusId(buf, len(buf), dev.value))
        return buf.value.decode("ascii")


class DriverIPC:
    """Device staging's backend: :class:`Driver` for the IPC calls, torch for
    the trainer's stream, its events and the tensor views.
    Unverified: no GPU was lent when this was written."""

    def __init__(self, device, driver=None):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        if self.device.type != "cuda" or not torch.cuda.is_available():
            raise RuntimeError("device staging needs a CUDA device in torch, got %s (available: %s)"
                               % (self.device, torch.cuda.is_available()))
        # The device's primary context, created now (torch makes it lazily)
        # and made current around each call: the handles open in it, and
        # the trainer's own current device is left alone.
        torch.zeros(1, device=self.device)
        self.drv = driver or Driver()

    def _on(self, f, *args):
        with self.torch.cuda.device(self.device):
            return f(*args)

    def open_mem(self, handle, nbytes):
        return (self._on(self.drv.open_mem, handle), nbytes)

    def close_mem(self, mem):
        self._on(self.drv.close_mem, mem[0])

    def open_event(self, handle):
        return self._on(self.drv.open_event, handle)

    def close_event(self, ev):
        self._on(self.drv.destroy_event, ev)

    def bus_id(self):
        idx = self.device.index if self.device.index is not None else self.torch.cuda.current_device()
        return self.drv.bus_id(idx)

    def stream_wait(self, ev):
        self._on(self.drv.stream_wait, self.torch.cuda.current_stream(self.device).cuda_stream, ev)

    def mark(self):
        ev = self.torch.cuda.Event()
        ev.record(self.torch.cuda.current_stream(self.device))
        return ev

    def current_stream(self):
        return self.torch.cuda.current_stream(self.device)

    def wait(self, ev):
        ev.synchronize()

    def view(self, mem, offset, nbytes, dtype, shape):
        class _Dev:  # a device range, for torch.as_tensor
            __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 2,
                                        "data": (mem[0] + offset, False)}

        return self.torch.as_tensor(_Dev(), device=self.device).view(dtype).view(shape)
