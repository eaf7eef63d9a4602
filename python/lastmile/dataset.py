"""``lastmile.Dataset``: a trainer's batches from lastmiled, with resume.

    ds = lastmile.Dataset("job.yaml")          # rank, world size from torchrun
    ds.load_state_dict(ckpt["data"])           # optional: resume exactly
    for batch in ds:                           # dict-like: name -> tensor,
        loss = step(batch["x"].to(device))     #   ragged -> Ragged(values, offsets)
        ...
        ckpt = {"model": ..., "data": ds.state_dict()}

What happens underneath:

1. The spec is submitted to lastmiled (``POST /v1/jobs``). Every rank submits
   the same spec; the first creates the job, the others join it (an identical
   spec, world size and weight name the same job).
2. The rank attaches (``POST /v1/jobs/{id}/attach``) with its cursor, the
   ``(epoch, batch)`` of the next batch it needs, and learns its ring.
3. Batches are read from the ring (:class:`lastmile.Ring`) zero-copy. A batch
   is valid until the next one is taken: copy it or move it to the device
   first (see lastmile.ring).
4. ``ds.cursor`` follows the batches handed out: after batch ``(e, i)`` it is
   ``(e, i + 1)``, or ``(e + 1, 0)`` after an epoch's last batch.
   ``state_dict()`` saves it with the model.
5. When the ring's producer dies (lastmiled restarted, kill -9 included), the
   dataset waits for the daemon (``reconnect_timeout``), attaches again with
   its cursor and continues on the ring the daemon hands back (normally the
   same one: the daemon adopts its rings). Every batch is delivered once: the
   dataset checks the cursor of every batch against the one it expects.

In DDP every rank takes the same number of batches, so rank 0's
``state_dict()`` is valid for every rank of the same world size.

With torch importable, ``Dataset`` is a ``torch.utils.data.IterableDataset``:
``len(ds)`` is the number of batches per epoch of each rank, and
``DataLoader(ds, batch_size=None)`` (``num_workers=0``: the ring is the
worker) iterates it. ``for batch in ds`` runs straight through every epoch;
after ``ds.set_epoch(e)`` it yields epoch ``e`` only, and ``for e in
ds.epochs(): for batch in ds: ...`` goes epoch by epoch (docs/python.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import weakref

from . import _advice, control
from .control import Client, DaemonUnavailableError, JobNotFoundError, SpecError, _read_spec, _spec_sha256
from .hosts import exchange, usable_group
from .ranks import resolve_hosts, resolve_ranks
from .position import CursorError, EpochError, Position, _position
from .ring import ProducerDiedError, ProducerHungError, Ring, RingBusyError
from ._epochs import _Epochs
from ._loader import _BATCHED, _MAIN_ONLY, _collating_loader, _register_collate
from .batch import register_torchrec

try:  # a torch.utils.data.IterableDataset when torch is there
    from torch.utils.data import IterableDataset as _Base
    from torch.utils.data import get_worker_info as _worker_info
except Exception:  # torch is optional
    _Base = object
    _worker_info = None

__all__ = ["CursorError", "Dataset", "EpochError", "Position", "resolve_hosts", "resolve_ranks"]

_OLD_DICT_HASH = (
    " (a checkpoint made before 2026-11-29 from a dict spec named it by its key order: if "
    "that spec differs from this one only in key order, strict=False is right)")

log = logging.getLogger("lastmile")


if _worker_info is not None:
    _register_collate()


class Dataset(_Epochs, _Base):
    """The batches of one rank of a lastmiled job. See the module docstring.

    ``spec_or_path``: a job spec file (YAML or JSON; relative inputs are
    relative to it), spec text, or a dict. ``rank``/``world_size``: default
    from torchrun's environment (:func:`resolve_ranks`). ``hosts``/``host``:
    with ranks on several hosts (``torchrun --nnodes``), how many hosts and
    which this is; default from torchrun's ``LOCAL_WORLD_SIZE`` and
    ``GROUP_RANK`` (:func:`resolve_hosts`). Each host's lastmiled then
    serves its own ranks, and every rank of the world gets the same number
    of batches (docs/python.md, "Several hosts"). ``socket``: the
    daemon's socket (default ``$LASTMILE_SOCKET`` or
    ``/run/lastmile/lastmiled.sock``). ``weight``: the job's CPU share
    relative to other jobs. ``cursor``: ``(epoch, batch)`` to start at (None:
    where the daemon has this rank, the start for a new job). ``torch``:
    yield torch tensors (else numpy arrays).

    ``device``: put every batch's tensors on this torch device (a copy per
    batch that the batch owns; on the CPU only with ``copy``). ``"cuda"``
    without an index is torch's current device: GPU 0 for every rank unless
    each called ``torch.cuda.set_device(LOCAL_RANK)``. On a CUDA
    device the batch is staged through the registered ring, one async copy
    per batch into pooled device slots (:mod:`lastmile.cuda`): work queued
    on its tensors before the second next batch is taken runs before they
    are overwritten (a one-batch prefetch is safe; ``copy=True`` to keep
    them). ``staging``: ``"host"``,
    ``"device"`` (lastmiled copies each batch to the GPU and the tensors are
    views of its device slots: :mod:`lastmile.devstage`) or ``"off"``
    (per-tensor ``.to(device)`` copies); default: the job's
    ``gpu.staging``. ``copy``:
    batches own their arrays (copies, valid after the next batch) instead
    of being zero-copy views of the ring slot, valid until the next batch.

    ``timeout``: seconds to wait for any one batch (None: forever);
    ``heartbeat_timeout``: treat a producer whose heartbeat is this old as
    dead; ``open_timeout``: seconds for the ring to appear after attaching;
    ``reconnect_timeout``: seconds to wait for a restarted daemon.

    Submitting happens in the constructor (spec errors surface at once),
    attaching at the first batch. Not thread-safe; use it in the trainer's
    main process (``DataLoader(ds, batch_size=None, num_workers=0)``).
    """

    def __init__(self, spec_or_path, rank=None, world_size=None, *, socket=None, weight=1,
                 cursor=None, torch=True, device=None, copy=False, timeout=None,
                 heartbeat_timeout=None, open_timeout=60.0, reconnect_timeout=300.0,
                 request_timeout=30.0, staging=None, hosts=None, host=None):
        # Neither the arguments nor torchrun's environment say which rank
        # this is: a plain script, rank 0 of the spec's world (warned below).
        alone = rank is None and world_size is None and not any(
            os.environ.get(k) for k in ("RANK", "WORLD_SIZE"))
        self.rank, self.world_size, self.local_rank = resolve_ranks(rank, world_size)
        self.hosts, self.host = resolve_hosts(self.rank, self.world_size, self.local_rank, hosts, host)
        self.spec, self.base_dir, self.spec_label = _read_spec(spec_or_path)
        self.spec_sha256 = _spec_sha256(spec_or_path, self.spec)
        # A checkpoint of before 2026-11-29 named a dict spec by its text,
        # its keys in the dict's order: still the same spec.
        self._spec_sha256_text = hashlib.sha256(self.spec.encode("utf-8")).hexdigest()
        self._dict_spec = isinstance(spec_or_path, dict)
        self.weight = weight
        self.torch = torch
        self.device = device
        self.copy = bool(copy)
        if device is not None and not torch:
            raise ValueError("device=%r needs torch=True (numpy batches stay on the host)"
                             % (device,))
        self._place = None  # batch -> batch: device placement or copies
        self._gpu = None  # host staging onto a CUDA device (lastmile.cuda)
        if device is not None and str(device).startswith("cuda"):
            from .cuda import DatasetStaging

            me = weakref.ref(self)  # no cycle through the callback (see _place below)
            self._gpu = DatasetStaging(device, lambda: staging or me()._job_staging())
        elif device is not None:
            import functools

            from .owned import to_device

            # not a lambda over self: the Dataset would be in a reference
            # cycle, and a dropped one would keep its rank's ring (and the
            # consumer lock) until the cycle collector runs
            self._place = functools.partial(to_device, device=device, copy=self.copy)
        elif self.copy:
            from .owned import detach

            self._place = detach
        self.timeout = timeout
        self.heartbeat_timeout = heartbeat_timeout
        self.open_timeout = open_timeout
        self.reconnect_timeout = reconnect_timeout
        self.client = Client(socket, timeout=request_timeout)
        self._cursor = _position(cursor)
        self._cursor_checked = False  # against the epoch's batches (_check_cursor)
        self._ring = None
        self._fresh = False  # True until the first batch after an attach
        self._down_since = None  # monotonic time the stream broke, while reattaching
        self._ended = False
        self.attach_info = None
        self.reattaches = 0  # times the dataset attached again after a producer death
        self.skipped = 0  # batches before the cursor skipped after an attach
        self.job = None
        self.created = None
        self._epoch = None  # set_epoch: iterate this epoch only
        self._per_epoch = None  # batches per epoch, once known
        self._pending = None  # a batch taken ahead of an epoch's iteration
        # Each host counts only its share of the units where the trainers
        # can relay the other hosts' counts (lastmile/hosts.py).
        self._submit(share_counts=self.hosts > 1 and usable_group(self.world_size) is not None)
        if alone:
            self._warn_alone()
        self._set_per_epoch(self.job.get("batches_per_epoch"))
        self._check_cursor()  # now if the batches per epoch are known, else at the attach
        self._join_hosts()

    # -- control --------------------------------------------------------------
    def _join_hosts(self):
        """With ranks on several hosts, what the world's trainers do together
        before the first batch (:func:`lastmile.hosts.exchange`): compare the
        hosts' plans, and relay each host's counts of its share of the units
        to the others. A collective: every rank of the world calls it. Raises
        ValueError naming the hosts that disagree."""
        if self.hosts > 1:
            local = self.world_size // self.hosts
            exchange(self.client, self.job["id"], self.host, self.hosts, self.world_size, self.spec_label,
                     first=self.rank % local == 0)

    def _warn_alone(self):
        """Warn, once a job and process, that a world of several ranks from
        the spec needs every rank to read."""
        _advice.warn_alone(self.job_id, self.job.get("name") or self.job_id, self.world_size or 1, self.spec_label)

    def _timed_out(self, err):
        """``err`` (a batch wait's TimeoutError), saying which ranks have no
        trainer: the producer deals batches to every rank in turn and waits
        on a rank whose ring is full."""
        try:
            job = self.client.job(self.job_id)
        except (control.ControlError, OSError):
            return err
        return _advice.timed_out(err, job, self.rank, self.world_size, self.job.get("name") or self.job_id)

    def _job_staging(self):
        """The job's gpu.staging as lastmiled reports it ("auto" when unset)."""
        g = self.job.get("gpu") if isinstance(self.job, dict) else None
        return (g or {}).get("staging") or "auto"

    def _submit(self, share_counts=False):
        try:
            try:
                self.job, self.created = self.client.submit(
                    self.spec, world_size=self.world_size, weight=self.weight, base_dir=self.base_dir,
                    file=self.spec_label, hosts=self.hosts, host=self.host, share_counts=share_counts)
            except SpecError as e:
                if not (share_counts and 'unknown field "share_counts"' in str(e)):
                    raise
                # A lastmiled older than the counts exchange: it counts every
                # unit itself (lastmile/hosts.py finds that out too).
                self._submit()
                return
        except SpecError as e:
            if not str(e.args[0]).startswith(self.spec_label + ":"):  # one error says FILE:LINE itself
                e.args = ("%s: %s" % (self.spec_label, e.args[0]),)
            raise
        if not isinstance(self.job, dict) or "id" not in self.job:
            raise control.ControlError("lastmiled answered the submission without a job id: %r"
                                       % (self.job,))
        if self.world_size is None and self.job.get("world_size"):
            self.world_size = int(self.job["world_size"])
            if not 0 <= self.rank < self.world_size:
                raise ValueError(
                    "rank %d is outside world size %d, the world_size of %s (no world_size= given "
                    "and WORLD_SIZE is not set): pass world_size= or set WORLD_SIZE"
                    % (self.rank, self.world_size, self.spec_label))

    @property
    def job_id(self):
        return self.job["id"]

    def _attach(self, deadline=None):
        """Attach and open the ring. Answers that mean "not now" (503: the
        daemon is draining, its memory budget is used up, the rings are not
        there yet; or no daemon at all) are retried until ``deadline``."""
        delay = 0.2
        while True:
            try:
                return self._attach_once()
            except DaemonUnavailableError as e:
                left = (deadline or 0) - time.monotonic()
                if deadline is None or left <= 0:
                    raise
                time.sleep(min(e.retry_after or delay, left, 5.0))
                delay = min(delay * 2, 2.0)

    def _check_cursor(self):
        """Refuse a cursor given to the dataset (``cursor=``,
        :meth:`load_state_dict`) whose batch is past its epoch's, once the
        batches per epoch are known: lastmiled would start at the next
        epoch, skipping the rest of this one. ``(e, n)`` with ``n`` the
        batches per epoch is the end of epoch ``e``, the same as ``(e + 1, 0)``."""
        self._cursor_checked = self._cursor_past_epoch(self._cursor)

    def _cursor_past_epoch(self, c):
        """Raise ValueError for a cursor past its epoch's batches; True when
        checked (the batches per epoch known), False when it cannot be yet."""
        n = self._per_epoch
        if c is None or c.batch == 0:
            return True
        if n is None:
            return False
        if c.batch > n:
            raise ValueError(_advice.cursor_past_epoch(c, n, self.job.get("name") or self.job_id))
        return True

    def _attach_once(self):
        if not self._cursor_checked and self._cursor is not None and self._cursor.batch > 0:
            try:
                self.batches_per_epoch  # noqa: B018 - asks lastmiled, waiting while it plans
            except (control.ControlError, OSError) as e:
                log.info("lastmile: could not check cursor %s against job %s's batches per "
                         "epoch: %s", tuple(self._cursor), self.job_id, e)
        if not self._cursor_checked:
            self._check_cursor()
        wait = None if self.open_timeout is None else max(1, min(600, int(self.open_timeout)))
        try:
            att = self.client.attach(self.job_id, self.rank, self._cursor, wait=wait)
        except control.ConflictError as e:
            hint = self._shared_job_hint()
            if not hint or "consumer" not in str(e):
                raise
            raise control.ConflictError("%s. %s" % (str(e).rstrip("."), hint), e.status, e.body) from e
        except JobNotFoundError:
            # The daemon lost the job (its state directory was wiped): submit
            # it again and continue at our cursor.
            log.warning("lastmile: job %s is unknown to lastmiled; submitting %s again",
                        self.job_id, self.spec_label)
            self._submit()
            att = self.client.attach(self.job_id, self.rank, self._cursor, wait=wait)
        name = att.get("ring")
        if not name:
            raise control.ControlError("lastmiled's attach answer has no ring: %r" % (att,))
        try:
            # The generation the daemon names: a leftover of an earlier job
            # of the same ring name is not taken for it (ring-format 6.7).
            gen = att.get("generation")
            ring = Ring.open(name, att.get("dir") or None, timeout=self.open_timeout,
                             heartbeat_timeout=self.heartbeat_timeout,
                             generation=gen if isinstance(gen, int) and gen else None)
        except RingBusyError as e:
            raise RingBusyError(
                "rank %d of job %s is already being read (pid %s): one trainer per rank; stop "
                "the other reader first" % (self.rank, self.job_id, e.pid), pid=e.pid) from e
        ring.timeout = self.timeout  # per batch, after open's wait for the file
        if self._cursor is None and isinstance(att.get("next"), dict):
            self._cursor = _position(att["next"])
        self._ring = ring
        self._fresh = True
        self.attach_info = att
        return ring

    def _shared_job_hint(self):
        """Why a rank's ring may have another consumer, where this process
        is another rank of torchrun's world than of the Dataset's: every
        process that makes the same Dataset names the same job."""
        env = os.environ
        try:
            env_rank, env_world = int(env.get("RANK") or -1), int(env.get("WORLD_SIZE") or -1)
        except ValueError:
            return None
        if env_world < 2 or (env_rank, env_world) == (self.rank, self.world_size):
            return None
        return ("This process is RANK %d of WORLD_SIZE %d but reads rank %d of a world of %s: every "
                "process that makes this Dataset (the same spec, world size and weight) joins the same "
                "job, whose rank %d has one reader. Make it on one process only, or give each process "
                "a job of its own (a name per rank: spec name: ...-r%d)"
                % (env_rank, env_world, self.rank, self.world_size, self.rank, env_rank))

    def _say_past_end(self):
        """Tell lastmiled this rank has nothing left to read (an attach at a
        cursor past the last epoch, which it refuses): once every rank of
        the host has, it cancels the job, which the submission may have made
        anew for trainers that need none of it."""
        if self._ring is not None:
            return
        try:
            self.client.attach(self.job_id, self.rank, self._cursor, wait=0)
        except control.ControlError:
            pass  # the expected answer: nothing left to read
        except OSError as e:
            log.info("lastmile: could not tell lastmiled that rank %d is past the end: %s", self.rank, e)

    def _close_ring(self):
        self._pending = None  # its slot goes with the ring; the cursor still names it
        r, self._ring = self._ring, None
        if self._gpu is not None:
            self._gpu.close()  # unregisters before its mapping is unmapped
        if r is not None:
            r.close()

    def _recover(self, err):
        """The producer is gone: wait for the daemon, attach again at the cursor."""
        self._close_ring()
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            log.warning("lastmile: %s; waiting up to %gs for lastmiled to reattach rank %d at %s",
                        err, self.reconnect_timeout, self.rank, self._where())
        else:
            # attached again but the producer was still not there: back off
            time.sleep(min(2.0, 0.1 * 2 ** min(self.reattaches, 5)))
        left = self._down_since + self.reconnect_timeout - time.monotonic()
        if left <= 0:
            raise ProducerDiedError(
                "%s; lastmiled did not resume rank %d of job %s within reconnect_timeout=%gs "
                "(is lastmiled running? systemctl status lastmiled)"
                % (err, self.rank, self.job_id, self.reconnect_timeout)) from err
        try:
            self.client.wait(left)
            self.reattaches += 1
            self._attach(deadline=self._down_since + self.reconnect_timeout)
        except DaemonUnavailableError as e:
            raise DaemonUnavailableError(
                "%s; then waited %gs for lastmiled: %s" % (err, self.reconnect_timeout, e),
                e.status, e.body) from err

    def _where(self):
        c = self._cursor
        return "the daemon's cursor" if c is None else "(epoch %d, batch %d)" % c

    # -- iteration ------------------------------------------------------------
    @property
    def cursor(self):
        """:class:`Position` of the next batch this rank needs, or None before
        the first batch when no cursor was given."""
        return self._cursor

    @property
    def ring(self):
        """The :class:`lastmile.Ring` being read, or None before the first batch."""
        return self._ring

    @property
    def num_epochs(self):
        """The job's epochs (0: without end)."""
        return int(self.job.get("epochs") or 0) if isinstance(self.job, dict) else 0

    def __iter__(self):
        """Straight through the rest of the job's stream, every epoch; after
        :meth:`set_epoch`, the rest of that epoch only."""
        if _worker_info is not None and _worker_info() is not None:
            raise RuntimeError(_MAIN_ONLY)
        if _worker_info is not None and _collating_loader(1):
            raise TypeError(_BATCHED)
        register_torchrec()  # the trainer's torchrec, if imported: batch.register_torchrec
        if self._epoch is None:
            return self._stream()
        return self._one_epoch(self._epoch)

    def __getstate__(self):
        raise TypeError(_MAIN_ONLY + " (a lastmile.Dataset cannot be pickled)")

    def _stream(self):
        nxt = self.next
        while True:
            b = nxt()
            if b is None:
                return
            yield b

    # -- length ---------------------------------------------------------------
    def __len__(self):
        n = self.batches_per_epoch
        if n is None:
            raise TypeError(
                "len(lastmile.Dataset): the number of batches per epoch of job %s is not known "
                "yet: its pipeline drops rows (filter, sample), so lastmiled knows it once the "
                "first epoch has ended; iterate without len() until then (ds.batches_per_epoch "
                "is None)" % self.job_id)
        return n

    @property
    def batches_per_epoch(self):
        """Batches each rank gets per epoch (every rank gets as many), or
        None while not known: lastmiled knows it once the job is planned
        when no op drops rows, else after the first epoch. Asks the daemon
        (waiting up to ``open_timeout`` for planning) until known."""
        if self._per_epoch is None:
            deadline = time.monotonic() + (self.open_timeout or 0)
            while True:
                job = self.client.job(self.job_id)
                if self._set_per_epoch(job.get("batches_per_epoch") if isinstance(job, dict) else None):
                    break
                if not (isinstance(job, dict) and job.get("state") == "pending") \
                        or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)  # planning: the rings and the count come together
        return self._per_epoch

    def _set_per_epoch(self, n):
        """Keep lastmiled's batches per epoch if it gave them (True); warn
        once if they are none: the trainer would train on nothing."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            return False
        self._per_epoch = n
        if n == 0:
            log.warning(_advice.NO_BATCH % (self.job.get("name") or self.job_id))
        return True

    def _ensure_ring(self):
        ring = self._ring
        if ring is None:
            first = self.open_timeout
            ring = self._attach(None if first is None else time.monotonic() + first)
        return ring

    def next(self):
        """The next batch, or None at the end of the job's stream."""
        if self._pending is not None:
            b, self._pending = self._pending, None
            self._cursor = Position(*b.cursor.following())
            return b
        if self._ended:
            return None
        epochs = self.job.get("epochs") if isinstance(self.job, dict) else None
        if self._cursor is not None and epochs and self._cursor.epoch >= epochs:
            self._ended = True  # a checkpoint taken at the end of the job
            self._say_past_end()
            return None
        while True:
            ring = self._ring
            if ring is None:
                ring = self._ensure_ring()
            try:
                if self._gpu is not None:
                    self._gpu.before_next(ring)  # the held slot's copy is done before its release
                b = ring.next()
            except ProducerHungError:
                raise
            except ProducerDiedError as e:
                self._recover(e)
                continue
            except TimeoutError as e:
                why = self._timed_out(e)
                if why is e:
                    raise
                raise why from e
            if b is None:
                self._ended = True
                return None
            c = b.cursor
            if c.rank != self.rank:
                raise CursorError("ring %s of job %s serves rank %d, this dataset is rank %d"
                                  % (ring.name, self.job_id, c.rank, self.rank))
            got = Position(c.epoch, c.batch_index)
            want = self._cursor
            if want is not None and got != want:
                if self._fresh and got < want:
                    self.skipped += 1  # already delivered before the attach
                    continue
                if not (got == (want.epoch + 1, 0) and want.batch > 0):
                    raise CursorError(
                        "rank %d of job %s: expected batch %d of epoch %d next, the ring (%s) "
                        "delivered batch %d of epoch %d; refusing to %s batches"
                        % (self.rank, self.job_id, want.batch, want.epoch, ring.name,
                           got.batch, got.epoch, "repeat" if got < want else "skip"))
            self._fresh = False
            self._cursor_checked = True  # the cursor is the batches' own from now on
            self._down_since = None
            self._cursor = Position(*c.following())
            if c.last_in_epoch:
                self._per_epoch = c.batch_index + 1
            if self._gpu is not None:
                b = self._gpu.stage(b)
                if self.copy:  # staged tensors are views of pooled device slots, reused 3 batches on
                    from .owned import clone

                    b = clone(b)
                return b
            if self.torch:
                b = b.torch()
            if self._place is not None:
                b = self._place(b)
            return b

    # -- checkpoints ----------------------------------------------------------
    def state_dict(self) -> dict:
        """What to checkpoint with the model: the cursor and the job it belongs to.

        Before the first batch the cursor is learnt by attaching: None would
        mean "where the daemon has this rank" when the checkpoint is loaded,
        which is past every batch read since."""
        if self._cursor is None and not self._ended:
            self._where_now()
        return {
            "version": 1,
            "job_id": self.job_id,
            "spec_sha256": self.spec_sha256,
            "rank": self.rank,
            "world_size": self.world_size,
            "cursor": None if self._cursor is None else {"epoch": self._cursor.epoch,
                                                         "batch": self._cursor.batch},
        }

    def load_state_dict(self, state, strict=True):
        """Continue at the cursor in ``state`` (from :meth:`state_dict`, of any
        rank of the same world size). ``strict`` also requires the same spec
        text. Takes effect at the next batch."""
        if not isinstance(state, dict) or state.get("version") != 1 or "cursor" not in state:
            raise ValueError("not a lastmile.Dataset state_dict: %r" % (state,))
        ws = state.get("world_size")
        if ws is not None and self.world_size is not None and ws != self.world_size:
            raise ValueError("state_dict is from world size %d, this dataset has %d: cursors do "
                             "not carry over between world sizes" % (ws, self.world_size))
        if strict and state.get("spec_sha256") not in (None, self.spec_sha256, self._spec_sha256_text):
            raise ValueError("state_dict is from a different job spec (sha256 %.12s, this one "
                             "%.12s); pass strict=False to use its cursor anyway%s"
                             % (state["spec_sha256"], self.spec_sha256,
                                _OLD_DICT_HASH if self._dict_spec else ""))
        cursor = _position(state["cursor"])
        checked = self._cursor_past_epoch(cursor)  # now if the batches per epoch are known, else at the attach
        self._close_ring()
        self._ended = False
        self._pending = None
        self._cursor = cursor
        self._cursor_checked = checked

    # -- lifetime -------------------------------------------------------------
    def close(self):
        """Detach from the ring (the daemon keeps the job for other ranks)."""
        self._close_ring()

    def cancel(self):
        """Cancel the job for every rank (``DELETE /v1/jobs/{id}``)."""
        self._close_ring()
        return self.client.cancel(self.job_id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<lastmile.Dataset job=%s rank=%d/%s cursor=%s%s>" % (
            self.job.get("id") if self.job else None, self.rank, self.world_size,
            tuple(self._cursor) if self._cursor is not None else None,
            " ended" if self._ended else "")
