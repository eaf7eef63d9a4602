"""lastmile: read batches from a lastmile producer's shared-memory ring.

    import lastmile
    with lastmile.Ring.open("train-rank0") as ring:
        for batch in ring.iter_torch():
            loss = model(batch["x"].to("cuda"), ...)

See lastmile.ring for the lifetime contract of the zero-copy arrays, and
docs/ring-format.md in the lastmile repository for the format.
"""

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
