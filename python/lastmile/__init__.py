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
    JobNotFoundError,
    PermissionDeniedError,
    SpecError,
)
from .dataset import CursorError, Dataset, Position
from .ring import (
    Batch,
    Cursor,
    Field,
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

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "Client",
    "ConflictError",
    "ControlError",
    "CursorError",
    "DaemonUnavailableError",
    "Dataset",
    "JobNotFoundError",
    "PermissionDeniedError",
    "Position",
    "SpecError",
    "Cursor",
    "Field",
    "ProducerDiedError",
    "ProducerError",
    "ProducerHungError",
    "Ragged",
    "Ring",
    "RingBusyError",
    "RingError",
    "RingFormatError",
    "RingVersionError",
    "inspect",
]
