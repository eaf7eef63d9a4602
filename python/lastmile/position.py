"""Where a rank stands in a job's stream of batches, and the errors of a
cursor or an epoch asked for out of order (lastmile.Dataset)."""

from __future__ import annotations

import collections

from .ring import RingError

__all__ = ["CursorError", "EpochError", "Position"]


class Position(collections.namedtuple("Position", ["epoch", "batch"])):
    """The next batch a rank needs: ``batch`` of ``epoch`` (both from 0)."""

    __slots__ = ()


class CursorError(RingError):
    """A batch arrived out of order: the daemon did not continue at the cursor."""


class EpochError(ValueError):
    """``set_epoch``/``epochs()`` asked for an epoch the cursor is not in:
    iterating it would skip the rest of an earlier epoch."""


def _position(c):
    if c is None:
        return None
    if isinstance(c, dict):  # a state_dict's cursor
        e, b = c["epoch"], c["batch"]
    else:
        e, b = c
    if int(e) < 0 or int(b) < 0:
        raise ValueError("cursor %r: epoch and batch are >= 0" % (c,))
    return Position(int(e), int(b))
