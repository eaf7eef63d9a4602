"""Epoch by epoch over a lastmile.Dataset: set_epoch() and epochs(), and
the iteration of one epoch from wherever the rank's cursor stands.
"""

from __future__ import annotations

from ._loader import _MAIN_ONLY
from .position import EpochError, Position

try:
    from torch.utils.data import get_worker_info as _worker_info
except Exception:  # torch is optional
    _worker_info = None


class _Epochs:
    """lastmile.Dataset's epochs, over its next(), cursor and
    batches_per_epoch (dataset.py): a part of Dataset, not used alone."""

    def set_epoch(self, epoch):
        """Make iteration yield epoch ``epoch`` only (from the cursor when it
        stands inside it; nothing when the epoch is already done). ``None``:
        straight through again. Raises :class:`EpochError` at iteration when
        the cursor is in an earlier epoch (its rest would be skipped)."""
        if epoch is not None:
            epoch = int(epoch)
            if epoch < 0:
                raise ValueError("epoch %d: epochs count from 0" % epoch)
        self._epoch = epoch

    def epochs(self):
        """The epochs from the cursor's to the job's last, one at a time; each
        is set with :meth:`set_epoch` before it is yielded::

            for epoch in ds.epochs():
                for batch in ds:          # or a DataLoader over ds
                    ...

        A loop that leaves an epoch early skips the rest of it before the
        next: ``ds.load_state_dict({**ds.state_dict(), "cursor": {"epoch":
        epoch + 1, "batch": 0}})``; else the next epoch raises EpochError.
        """
        if _worker_info is not None and _worker_info() is not None:
            raise RuntimeError(_MAIN_ONLY)
        e = self._where_now()
        if e is None:
            return
        e = e.epoch
        n = self.num_epochs
        try:
            while not n or e < n:
                self.set_epoch(e)
                yield e
                e += 1
        finally:
            self._epoch = None

    def _where_now(self):
        """The cursor, attaching to learn it from the daemon if needed; None
        at the end of the stream."""
        if self._pending is not None:
            c = self._pending.cursor
            return Position(c.epoch, c.batch_index)
        if self._cursor is None and not self._ended:
            self._ensure_ring()
        c, n = self._cursor, self._per_epoch
        if c is not None and c.batch > 0 and n is not None and c.batch == n:
            # (e, n) is the end of epoch e: epoch e + 1 is the current one
            c = self._cursor = Position(c.epoch + 1, 0)
        return c

    def _one_epoch(self, e):
        while True:
            if self._ended and self._pending is None:
                return  # the job's stream is over: every epoch is done (a job of no batch stays at (0, 0))
            c = self._where_now()
            if c is None:  # the daemon did not say where the rank stands: look
                b = self.next()
                if b is None:
                    return
                if b.cursor.epoch != e:
                    self._unread(b)
                    continue
                yield b
                continue
            if c.epoch > e:
                return
            if c.epoch < e:
                raise EpochError(
                    "rank %d of job %s stands at batch %d of epoch %d: epoch %d would skip the "
                    "rest of epoch %d; iterate epoch %d to its end first (ds.set_epoch(%d)), or, "
                    "to leave it early (a loop that breaks out of an epoch), skip its rest before "
                    "epoch %d's first batch: "
                    'ds.load_state_dict({**ds.state_dict(), "cursor": {"epoch": %d, "batch": 0}})'
                    % (self.rank, self.job_id, c.batch, c.epoch, e, c.epoch, c.epoch, c.epoch,
                       e, e))
            b = self.next()
            if b is None:
                return
            if b.cursor.epoch != e:  # an (e, n) cursor before the batches per epoch were known
                self._unread(b)
                return
            yield b

    def _unread(self, b):
        """Give ``b`` back: the next :meth:`next` returns it again."""
        self._pending = b
        self._cursor = Position(b.cursor.epoch, b.cursor.batch_index)
