"""lastmile: read batches from a lastmile producer's shared-memory ring.

With the lastmiled service (submit or join the job, attach, resume)::

    import lastmile
    ds = lastmile.Dataset("job.yaml")       # rank and world size from torchrun
    for batch in ds:
        loss = model(batch["x"].to("cuda"), ...)
    checkpoint["data"] = ds.state_dict()

Straight from a ring::

    with lastmile.Ring.open("train-rank0") as ring:
        for batch in ring.iter_torch():
            loss = model(batch["x"].to("cuda"), ...)

See lastmile.ring for the lifetime contract of the zero-copy arrays, and
docs/ring-format.md in the lastmile repository for the format.
"""

from .control import (
    Client,
    ConflictError,
    ControlError,
    DaemonUnavailableError,
    FieldError,
    JobNotFoundError,
    PermissionDeniedError,
    SpecError,
)
from .ring import (
    Batch,
    Cursor,
    Field,
    KeyedJagged,
    WeightedKeyedJagged,
    ProducerDiedError,
    ProducerError,
    ProducerHungError,
    Ragged,
    Ring,
    RingBusyError,
    RingError,
    RingFormatError,
    RingVersionError,
    inspect,
)

from .batch import TorchrecBatch, register_torchrec
from .owned import OwnedBatch

register_torchrec()  # with torchrec's Pipelineable, if the trainer imported torchrec first

__version__ = "0.1.0"

# lastmile.Dataset is a torch IterableDataset when torch is there: its module
# (and so torch, which takes a second or two to import) is loaded on first
# use, so that ``import lastmile`` for a Ring, the CLI or numpy stays fast.
_LAZY = {"CursorError": "dataset", "Dataset": "dataset", "EpochError": "dataset",
         "Position": "dataset"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError("module 'lastmile' has no attribute %r" % name)
    import importlib

    m = importlib.import_module("." + mod, __name__)
    value = m if name == mod else getattr(m, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "Batch",
    "Client",
    "ConflictError",
    "ControlError",
    "CursorError",
    "DaemonUnavailableError",
    "Dataset",
    "EpochError",
    "FieldError",
    "JobNotFoundError",
    "OwnedBatch",
    "PermissionDeniedError",
    "Position",
    "SpecError",
    "Cursor",
    "Field",
    "KeyedJagged",
    "WeightedKeyedJagged",
    "ProducerDiedError",
    "ProducerError",
    "ProducerHungError",
    "Ragged",
    "Ring",
    "RingBusyError",
    "RingError",
    "RingFormatError",
    "RingVersionError",
    "TorchrecBatch",
    "inspect",
    "register_torchrec",
]
