"""What lastmile.Dataset tells a trainer when its job cannot go on as it
expects: a world read by one process, a batch wait that timed out on ranks
without trainers, a cursor past its epoch, an epoch without batches."""

import logging

log = logging.getLogger("lastmile")

_WARNED_ALONE = set()  # jobs whose rank 0 was warned that it reads alone

NO_BATCH = (
    "lastmile: job %s gives no batch per epoch: its epoch holds fewer rows than one step "
    "of batch.size x world_size (batch.last: drop drops them), or none; this trainer "
    "gets nothing to train on. Check the spec's inputs and filters, or lower batch.size "
    "(batch.last: pad fills a short last step)")


def ranges(ranks):
    """"1-3, 5" of [1, 2, 3, 5]."""
    out = []
    for r in ranks:
        if out and out[-1][1] == r - 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return ", ".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in out)


def warn_alone(job_id, name, n, spec_label):
    """Warn, once a job and process, that a world of n ranks from the spec
    needs every rank to read: rank 0 read alone stops after a few batches,
    when the other ranks' rings are full."""
    if n <= 1 or job_id in _WARNED_ALONE:
        return
    _WARNED_ALONE.add(job_id)
    log.warning(
        "lastmile: this process is rank 0 of %d of job %s: world_size %d comes from %s, and neither "
        "RANK/WORLD_SIZE (torchrun) nor rank=/world_size= said otherwise. The other %d ranks must "
        "read too, or this process stops after a few batches, once their rings are full. Run it "
        "under torchrun (--nproc-per-node %d) or `python3 -m lastmile.launch --nproc %d SCRIPT`, "
        "or pass world_size=1 to read every batch in this one process (a job of its own), or rank= "
        "and world_size= to say which rank it is"
        % (n, name, n, spec_label, n - 1, n, n))


def unattached(job, rank):
    """Ranks of lastmiled's job view ``job`` (on this host), other than
    ``rank``, whose ring has no trainer attached."""
    out = []
    for r in (job.get("rings") if isinstance(job, dict) else None) or []:
        if isinstance(r, dict) and isinstance(r.get("rank"), int) and r["rank"] != rank \
                and r.get("consumer_attached") is False and r.get("state", "running") == "running":
            out.append(r)
    return sorted(out, key=lambda r: r["rank"])


def timed_out(err, job, rank, world_size, name):
    """``err`` (a batch wait's TimeoutError) with the ranks of ``job`` that
    have no trainer named, or ``err`` itself when every rank has one."""
    missing = unattached(job, rank)
    if not missing:
        return err
    n = world_size or len(missing) + 1
    return TimeoutError(
        "%s; %s of job %s: no trainer attached. Every rank of the world must read: the "
        "producer waits on a rank whose ring is full. Start the other ranks' trainers "
        "(torchrun --nproc-per-node %d, or python3 -m lastmile.launch --nproc %d), or read "
        "with world_size=1"
        % (err, ("ranks " if len(missing) > 1 else "rank ") + ranges([r["rank"] for r in missing]), name, n, n))


def cursor_past_epoch(c, n, name):
    """The refusal of cursor ``c`` whose batch is past the n batches of its
    epoch."""
    return ("cursor (%d, %d): batch %d is past the end of epoch %d of job %s, which has %d batches "
            "per rank (0 to %d; (%d, %d) is its end, the same as (%d, 0)): lastmiled would start "
            "at epoch %d and skip the rest of epoch %d; resume from a checkpoint's cursor "
            "(ds.state_dict())"
            % (c.epoch, c.batch, c.batch, c.epoch, name, n, n - 1, c.epoch, n, c.epoch + 1, c.epoch + 1,
               c.epoch))
