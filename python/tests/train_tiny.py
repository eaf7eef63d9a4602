"""A tiny training run through DataLoader(lastmile.Dataset(...), batch_size=None),
run as its own process by tests/test_train.py.

    /usr/bin/python3 tests/train_tiny.py CONFIG.json

CONFIG: spec, socket, rank, world_size, out (JSON written at the end),
checkpoint (path), stop_after (save a checkpoint after this many steps and
exit, as a trainer that is stopped), resume (load the checkpoint first).

The model is built from the job's schema: float fields (``[B]`` or ``[B,
N]``: a stack group) go through one linear layer over their concatenation;
jagged groups (``KeyedJagged``: K keys of B bags each, key-major), integer
ragged fields and integer ids (bags of one) through EmbeddingBags. ``label``
is the target, else ``id % 2``. Every step records the batch's cursor, a SHA-256 of
every field's bytes and the loss; the output also has the final weights'
digest.
"""

import hashlib
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import lastmile  # noqa: E402

BUCKETS, DIM = 1009, 4
SKIP = ("label", "row_id")


def digest(batch):
    h = hashlib.sha256()
    for name in sorted(batch):
        v = batch[name]
        parts = v if isinstance(v, tuple) else (v,)  # Ragged, KeyedJagged
        h.update(name.encode())
        for t in parts:
            if isinstance(t, torch.Tensor):
                h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
            else:  # a jagged group's keys
                h.update(repr(list(t)).encode())
    return h.hexdigest()


class Tiny(nn.Module):
    def __init__(self, batch):
        super().__init__()
        self.dense, self.bags, self.ids, self.groups = [], [], [], {}
        width = 0
        for name in batch:
            v = batch[name]
            if name in SKIP:
                continue
            if isinstance(v, lastmile.KeyedJagged):
                self.groups[name] = len(v.keys)
            elif isinstance(v, lastmile.Ragged):
                if not v.values.dtype.is_floating_point:
                    self.bags.append(name)
            elif v.dtype.is_floating_point:
                self.dense.append(name)
                width += 1 if v.dim() == 1 else v.shape[1]
            elif v.dim() == 1:
                self.ids.append(name)
        self.linear = nn.Linear(width, DIM)
        self.emb = nn.ModuleDict({n: nn.EmbeddingBag(BUCKETS, DIM, mode="sum",
                                                     include_last_offset=True)
                                  for n in self.bags + self.ids + list(self.groups)})
        self.head = nn.Linear(DIM * (1 + len(self.bags) + len(self.ids)
                                     + sum(self.groups.values())), 1)

    def forward(self, b):
        x = torch.cat([b[n].float().reshape(b[n].shape[0], -1) for n in self.dense], dim=1)
        parts = [self.linear(x)]
        for n in self.bags:
            values, offsets = b[n]
            parts.append(self.emb[n](values.long() % BUCKETS, offsets))
        for n in self.ids:
            ids = b[n].long() % BUCKETS
            parts.append(self.emb[n](ids, torch.arange(len(ids) + 1)))
        for n, k in self.groups.items():
            g = b[n]  # KeyedJagged: K*B bags, key-major, in one EmbeddingBag call
            pooled = self.emb[n](g.values % BUCKETS, g.offsets)  # [K*B, DIM]
            rows = pooled.shape[0] // k
            parts.append(pooled.view(k, rows, DIM).transpose(0, 1).reshape(rows, k * DIM))
        return self.head(torch.cat(parts, dim=1)).squeeze(1)


def describe(batch):
    """``{name: what it is}`` of a batch, for the test to check the layout."""
    out = {}
    for name in batch:
        v = batch[name]
        if isinstance(v, lastmile.KeyedJagged):
            out[name] = "KeyedJagged %s, lengths %s, offsets %s" % (
                list(v.keys), list(v.lengths.shape), list(v.offsets.shape))
        elif isinstance(v, lastmile.Ragged):
            out[name] = "Ragged %s" % str(v.values.dtype).replace("torch.", "")
        else:
            out[name] = "tensor %s %s" % (str(v.dtype).replace("torch.", ""), list(v.shape))
    return out


def target(b):
    if "label" in b:
        return b["label"].float()
    return (b["id"] % 2).float()


def main(cfg):
    ds = lastmile.Dataset(cfg["spec"], cfg.get("rank", 0), cfg.get("world_size", 1),
                          socket=cfg["socket"], timeout=120, open_timeout=60)
    ckpt = None
    if cfg.get("resume"):
        ckpt = torch.load(cfg["checkpoint"])
        ds.load_state_dict(ckpt["data"])
    loader = DataLoader(ds, batch_size=None)
    torch.manual_seed(0)
    model = opt = None
    steps, step = [], 0
    stop = cfg.get("stop_after")
    for epoch in ds.epochs():
        for batch in loader:
            if model is None:
                schema = describe(batch)
                model = Tiny(batch)
                opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
                if ckpt is not None:
                    model.load_state_dict(ckpt["model"])
                    opt.load_state_dict(ckpt["optim"])
                    step = ckpt["step"]
            d = digest(batch)
            loss = F.binary_cross_entropy_with_logits(model(batch), target(batch))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            steps.append({"epoch": epoch, "len": len(ds), "digest": d, "loss": loss.item(),
                          "rows": len(target(batch))})
            if stop and step == stop:
                torch.save({"model": model.state_dict(), "optim": opt.state_dict(),
                            "data": ds.state_dict(), "step": step}, cfg["checkpoint"])
                break
        if stop and step == stop:
            break
    weights = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        weights.update(k.encode() + v.numpy().tobytes())
    with open(cfg["out"], "w") as f:
        json.dump({"steps": steps, "weights": weights.hexdigest(), "cursor": list(ds.cursor),
                   "len": len(ds), "schema": schema}, f)
    ds.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        main(json.load(f))
