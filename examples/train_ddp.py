"""A torchrun DDP training loop that reads its batches from lastmiled.

    lastmile gen --rows 4000000 --files 8 out/ctr          # the example's data
    lastmile gen --spam-users out/ctr-spam.parquet
    torchrun --nproc_per_node 8 examples/train_ddp.py      # 8 ranks, one host
                                      # (torch >= 2 also spells it --nproc-per-node)
    python3 -m lastmile.launch --nproc 8 examples/train_ddp.py   # where torchrun fails
                                      # (Debian's torch 1.13: AttributeError 'to_map')

Every rank calls ``lastmile.Dataset("examples/ctr-8rank.yaml")``: rank and
world size come from torchrun's environment, the first rank to ask creates
the job in lastmiled and the others join it, and each reads its own ring.
The spec's world_size (8) is overridden by torchrun's WORLD_SIZE, so
``torchrun --nproc_per_node 2`` works too (as a different job).

The model is deliberately small and built from the first batch's fields, so
it trains on any spec: float columns and [B, N] float tensors (the spec's
``stack`` of dense features) are dense features, integer columns hashed ids
(embeddings), [B, L] integer columns padded sequences (mean of embeddings
over the first ``NAME_len`` entries when that column exists), ragged integer
columns (values, offsets) bags of ids (EmbeddingBag), and jagged fields (the
spec's ``jagged`` group, ``batch.kjt(name)``: torchrec's KeyedJaggedTensor,
keys, values key-major, lengths, offsets) one EmbeddingBag pooled per key
and row. ``label_f`` is the label (``--label`` names another spec's, e.g.
``--label label`` for examples/tiny.yaml) and ``weight`` the sample
weight (the spec's negative downsampling).

Checkpoints hold the model, the optimizer and ``ds.state_dict()``, the
data cursor: a restarted run continues with the next batch, none lost, none
repeated. In DDP every rank takes the same number of batches, so rank 0's
checkpoint is every rank's.

Runs on CPU (gloo) when there is no GPU; with GPUs each rank uses
cuda:LOCAL_RANK and NCCL. Needs lastmiled running (docs/daemon-usage.md);
set LASTMILE_SOCKET if its socket is not /run/lastmile/lastmiled.sock.
"""

import argparse
import itertools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import lastmile
except ImportError:  # running from a checkout without installing the package
    sys.path.insert(0, os.path.join(HERE, os.pardir, "python"))
    import lastmile

LABEL, WEIGHT = "label_f", "weight"


class CTRModel(nn.Module):
    """Embeddings for ids and sequences, a linear map of dense features, an MLP."""

    def __init__(self, dense, ids, padded, ragged, jagged=None, buckets=1 << 14, dim=16, hidden=64):
        super().__init__()
        self.dense, self.ids, self.padded, self.ragged = dense, ids, padded, ragged
        self.jagged = dict(jagged or {})  # field -> number of keys
        self.buckets, self.dim = buckets, dim
        self.emb = nn.ModuleDict({n: nn.Embedding(buckets, dim) for n in ids})
        self.bags = nn.ModuleDict({n: nn.EmbeddingBag(buckets, dim, mode="sum") for n in padded})
        self.rbags = nn.ModuleDict({n: nn.EmbeddingBag(buckets, dim, mode="mean",
                                                       include_last_offset=True) for n in ragged})
        self.jbags = nn.ModuleDict({n: nn.EmbeddingBag(buckets, dim, mode="sum",
                                                       include_last_offset=True) for n in self.jagged})
        width = (len(ids) + len(padded) + len(ragged) + sum(self.jagged.values())) * dim
        width += hidden if dense else 0
        self.dense_in = nn.Linear(sum(dense.values()), hidden) if dense else None
        self.mlp = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    @classmethod
    def for_batch(cls, batch, **kw):
        """Sort a batch's fields into the model's inputs (the same on every rank)."""
        dense, ids, padded, ragged, jagged = {}, [], [], [], {}
        for name in batch:
            if name in (LABEL, WEIGHT) or name.endswith("_len"):
                continue
            v = batch[name]
            if isinstance(v, (lastmile.KeyedJagged, lastmile.WeightedKeyedJagged)):
                jagged[name] = len(v.keys)
            elif isinstance(v, lastmile.Ragged):
                if not v.values.dtype.is_floating_point:
                    ragged.append(name)
            elif v.dim() == 1:
                if v.dtype.is_floating_point:
                    dense[name] = 1
                else:
                    ids.append(name)
            elif v.dim() == 2 and v.dtype.is_floating_point:
                dense[name] = v.shape[1]  # a stack: [B, N]
            elif v.dim() == 2:
                padded.append(name)
        return cls(dense, ids, padded, ragged, jagged, **kw)

    def forward(self, b):
        parts = []
        if self.dense_in is not None:
            x = torch.cat([b[n].float().reshape(len(b[n]), -1) for n in self.dense], dim=1)
            parts.append(F.relu(self.dense_in(torch.nan_to_num(x))))
        for n in self.ids:
            parts.append(self.emb[n](b[n].long() % self.buckets))
        for n in self.padded:
            seq = b[n].long() % self.buckets
            rows, length = seq.shape
            if n + "_len" in b:  # mean over the real entries, padding excluded
                lens = b[n + "_len"].long().clamp(0, length)
                mask = torch.arange(length, device=seq.device)[None, :] < lens[:, None]
                w = mask.float() / lens.clamp(min=1).float()[:, None]
            else:
                w = torch.full(seq.shape, 1.0 / length, device=seq.device)
            parts.append(self.bags[n](seq, per_sample_weights=w))
        for n in self.ragged:
            values, offsets = b[n]
            parts.append(self.rbags[n](values.long() % self.buckets, offsets))
        for n, keys in self.jagged.items():
            # One bag per (key, row), key-major: [K*B, dim] -> [B, K*dim].
            kj = b[n]
            w = getattr(kj, "weights", None)  # a weighted group: a weighted sum per bag
            pooled = self.jbags[n](kj.values % self.buckets, kj.offsets, per_sample_weights=w)
            rows = len(kj.lengths) // keys
            parts.append(pooled.view(keys, rows, self.dim).transpose(0, 1).reshape(rows, keys * self.dim))
        return self.mlp(torch.cat(parts, dim=1)).squeeze(1)


def to_device(batch, device):
    """Copy a batch's tensors to ``device`` (the CPU path: on a GPU the
    Dataset stages them): batches are views of a ring slot, valid only until
    the next batch is taken (on CPU this is no copy, which is fine because
    each step finishes before the next batch is asked for)."""
    out = {}
    for name in batch:
        v = batch[name]
        if isinstance(v, lastmile.Ragged):
            out[name] = lastmile.Ragged(v.values.to(device, non_blocking=True),
                                        v.offsets.to(device, non_blocking=True))
        elif isinstance(v, (lastmile.KeyedJagged, lastmile.WeightedKeyedJagged)):
            out[name] = type(v)(v.keys, *(t.to(device, non_blocking=True) for t in v[1:]))
        else:
            out[name] = v.to(device, non_blocking=True)
    return out


def main():
    global LABEL
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=os.path.join(HERE, "ctr-8rank.yaml"))
    ap.add_argument("--checkpoint", default=os.path.join(HERE, os.pardir, "out", "train_ddp.pt"))
    ap.add_argument("--save-every", type=int, default=200, help="steps between checkpoints")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: the whole job)")
    ap.add_argument("--label", default=LABEL,
                    help="the spec's label column (default %s, examples/ctr-8rank.yaml's)" % LABEL)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args()
    LABEL = args.label  # left out of the features (CTRModel.for_batch)

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    # Submit or join the job, attach to this rank's ring (at first batch).
    # On a GPU the batches arrive staged (docs/gpu.md): one DMA copy of the
    # ring slot per batch, from the ring registered in place, and device
    # tensors valid for the next two batches, longer than a step needs.
    ds = lastmile.Dataset(args.spec, device=device if device.type == "cuda" else None)
    ckpt = None
    if os.path.exists(args.checkpoint):
        ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
        ds.load_state_dict(ckpt["data"])
    if rank == 0:
        where = "the job's start" if ds.cursor is None else "epoch %d, batch %d" % ds.cursor
        print("job %s (%s), world size %d, %s, starting at %s"
              % (ds.job_id, "created" if ds.created else "joined", world, device, where), flush=True)

    batches = iter(ds)
    first = next(batches, None)
    if first is None:
        print("rank %d: the job has no batches left" % rank, flush=True)
        dist.destroy_process_group()
        return
    torch.manual_seed(0)  # the same initial weights on every rank
    if LABEL not in first:
        raise SystemExit("rank %d: the batches have no label column %r (their fields: %s): pass --label"
                         % (rank, LABEL, ", ".join(first.keys())))
    model = CTRModel.for_batch(first).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optim"])
        step = ckpt["step"]
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)

    def save():
        if rank == 0:
            os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
            tmp = args.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optim": opt.state_dict(),
                        "data": ds.state_dict(), "step": step}, tmp)
            os.replace(tmp, args.checkpoint)

    t0, rows, loss_sum = time.monotonic(), 0, 0.0
    for batch in itertools.chain([first], batches):
        b = batch if device.type == "cuda" else to_device(batch, device)
        logits = ddp(b)
        y = b[LABEL].float()
        w = b[WEIGHT].float() if WEIGHT in b else torch.ones_like(y)
        # weighted mean: the weights undo the spec's negative downsampling
        loss = (F.binary_cross_entropy_with_logits(logits, y, reduction="none") * w).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        rows += batch.rows
        loss_sum += loss.item()
        if args.save_every and step % args.save_every == 0:
            save()
        if rank == 0 and step % args.log_every == 0:
            dt = time.monotonic() - t0
            print("step %d  epoch %d  loss %.4f  %.0f rows/s per rank  next %s"
                  % (step, batch.cursor.epoch, loss_sum / args.log_every, rows / dt,
                     tuple(ds.cursor)), flush=True)
            t0, rows, loss_sum = time.monotonic(), 0, 0.0
        if args.max_steps and step >= args.max_steps:
            break
    save()
    if rank == 0:
        print("done after %d steps; checkpoint %s (data cursor %s)"
              % (step, args.checkpoint, tuple(ds.cursor)), flush=True)
    ds.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
