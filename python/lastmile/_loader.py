"""lastmile.Dataset under torch's DataLoader: what it refuses, and how it
tells. A Dataset is read in the trainer's main process with
``batch_size=None``; a worker process, or torch's default batching, is
refused with what to write instead, before a batch leaves the ring where
torch lets that be seen.
"""

from __future__ import annotations

import sys

_MAIN_ONLY = (
    "lastmile.Dataset is read in the trainer's main process: use DataLoader(ds, "
    "batch_size=None, num_workers=0). The ring is the worker: lastmiled decodes in parallel "
    "and keeps the ring's slots filled ahead of the trainer, and a DataLoader worker process "
    "would attach as a second consumer of this rank's ring (refused) and copy every batch "
    "through a queue")

_BATCHED = (
    "lastmile.Dataset yields whole batches (the job spec's batch.size rows each): pass "
    "batch_size=None to the DataLoader, DataLoader(ds, batch_size=None). torch's default "
    "batch_size=1 makes default_collate stack lists of batches, which it cannot do (and a "
    "zero-copy batch is not valid once the next one is taken)")

def _refuse_collate(batch, *, collate_fn_map=None):
    """default_collate's entry for a lastmile.Batch: say what to do instead."""
    took = ""
    try:
        c = batch[0].cursor
        took = (" (batch %d of epoch %d was taken from the ring before this: the dataset's "
                "cursor is past it)" % (c.batch_index, c.epoch))
    except Exception:  # noqa: BLE001 - only the message's detail
        pass
    raise TypeError(_BATCHED + took)


def _register_collate():
    """Make torch's default_collate refuse a Batch saying so (torch 1.13+
    has a map of element type to collate function, default_collate_fn_map;
    without it, default_collate fails with its own words)."""
    try:
        from torch.utils.data._utils.collate import default_collate_fn_map
    except Exception:  # noqa: BLE001 - another torch: its own error stands
        return
    from .batch import Batch

    default_collate_fn_map.setdefault(Batch, _refuse_collate)


def _collating_loader(depth):
    """True when the frame ``depth`` above is a torch DataLoader starting to
    fetch from the dataset with automatic batching and default_collate
    (``batch_size`` not None, no collate_fn of its own): torch's
    ``_IterableDatasetFetcher.__init__`` calls ``iter(dataset)``, before any
    batch is taken. False when it cannot tell."""
    try:
        from torch.utils.data._utils.collate import default_collate
        from torch.utils.data._utils.fetch import _IterableDatasetFetcher

        loc = sys._getframe(depth + 1).f_locals
        return (isinstance(loc.get("self"), _IterableDatasetFetcher)
                and loc.get("auto_collation") is True and loc.get("collate_fn") is default_collate)
    except Exception:  # noqa: BLE001 - another torch: default_collate's entry says it
        return False
