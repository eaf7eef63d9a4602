"""What the trainers of a world on several hosts do together before the first
batch (docs/python.md, "Several hosts"): compare their hosts' plans, and
relay each host's counts of its share of the work units to the others, over
the torch.distributed process group they already have.

Every rank of the world calls :func:`exchange` once, after its Dataset has
submitted (the calls are collectives). Steps:

1. Wait for this host's daemon to count its share of the units
   (``GET /v1/jobs/{id}/counts``), or to know them all.
2. All-gather ``(host, plan, share, complete, legacy, error)`` across the
   world: ``share``, the counts of the host's own units only, from each
   host's first rank only, so that the gathered lists add up to one count
   a unit; ``legacy``, a lastmiled older than the exchange, which counts
   every unit itself (and then so does every host).
3. Stop every rank with the same error where a host failed, or where the
   hosts planned different inputs.
4. Merge the shares (each unit is counted by exactly one host) and post
   the whole list to this host's daemon, which then deals its units.

A rank that fails in step 1 still takes part in step 2, with its error, so
that the other ranks raise it too instead of waiting in the collective.
Where step 2 itself fails (a process group that cannot gather objects),
each host's first rank tells its daemon to count every unit itself
(``count_here``): the same batches, without the saving. The objects travel
over a gloo group even where the job's default group is NCCL.
"""

from __future__ import annotations

import logging
import threading
import time

from . import control

__all__ = ["exchange", "usable_group"]

log = logging.getLogger("lastmile")

# Seconds one GET of the counts may wait in the daemon.
_POLL = 10.0
# Seconds to wait for a daemon that stopped answering (a restart).
_RESTART = 120.0


def usable_group(world_size):
    """torch.distributed, when it is initialized over the job's world;
    else None."""
    try:
        import torch.distributed as dist
    except Exception:  # pragma: no cover - torch is optional
        return None
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() != world_size:
        return None
    return dist


def _local_counts(client, job_id, rows=True):
    """This host's counts view once it has rows, or raises ControlError
    with the job's error if it ended first. A lastmiled older than the
    counts exchange counts every unit itself: its view has no rows,
    ``complete`` and ``legacy`` set, and the plan from the job."""
    while True:
        try:
            v = client.counts(job_id, wait=_POLL, rows=rows)
        except control.DaemonUnavailableError:
            client.wait(_RESTART)  # a restarting daemon: its job counts again
            continue
        except control.JobNotFoundError as e:
            if not str(e).startswith("no such endpoint"):
                raise
            return {"plan": client.job(job_id).get("plan_digest"), "rows": None, "complete": True, "legacy": True}
        if v.get("rows") is not None or (not rows and v.get("counted")):
            return v
        if v.get("state") in ("failed", "canceled", "done"):
            j = client.job(job_id)
            raise control.ControlError("job %s %s before its units were counted: %s"
                                       % (job_id, v.get("state"), j.get("error") or "no error given"))
        time.sleep(0.01)


def _merge(got, hosts, label):
    """Every unit's rows from the hosts' (host, plan, share, complete,
    legacy) views, each ``share`` the rows of the units its host counts
    (every ``hosts``-th from the host's index); ValueError where the
    shares do not fit together."""
    n = sum(len(share) for _, _, share, _, _ in got)
    merged = [-1] * n
    for host, _, share, _, _ in got:
        want = len(range(host, n, hosts))
        if len(share) != want:
            raise ValueError("job %s: host %d sent %d counts for its share of %d units: every host must "
                             "read the same input" % (label, host, len(share), want))
        merged[host::hosts] = share
    missing = [i for i, c in enumerate(merged) if c < 0]
    if missing:
        raise ValueError("job %s: no host counted unit %d (of %d units missing)" % (label, missing[0], len(missing)))
    return merged


def _check_plans(got, hosts, label):
    """ValueError naming the hosts, where they planned different inputs."""
    plans = {}
    for host, plan, _, _, _ in got:
        if plan is None:
            return  # a daemon that does not know its plan yet: nothing to compare
        plans.setdefault(plan, set()).add(host)
    if len(plans) > 1:
        parts = ["host %s: %s" % (",".join(map(str, sorted(h))), d)
                 for d, h in sorted(plans.items(), key=lambda kv: min(kv[1]))]
        raise ValueError(
            "job %s: the %d hosts planned different inputs (%s), so their ranks would not get the "
            "same batches: give every host the same files (an Iceberg table pinned to one snapshot, "
            "?snapshot=ID) and submit again" % (label, hosts, "; ".join(parts)))


def exchange(client, job_id, host, hosts, world_size, label, first=True):
    """Steps 1-4 above, on every rank of the world. ``first``: this rank is
    its host's first; only those send their host's counts and post the
    merged list (the others send the plan only: a host's ranks see one
    job). Returns False where no initialized process group spans the world
    (nothing was exchanged). Raises ValueError where the hosts disagree,
    ControlError where one host's job failed."""
    dist = usable_group(world_size)
    if dist is None:
        return False
    mine, err = None, None
    try:
        v = _local_counts(client, job_id, rows=first)
        # Only the host's own share travels: the gathered lists add up to
        # one count a unit, however many hosts there are.
        share = list(v["rows"][host::hosts]) if first and v.get("rows") is not None else None
        mine = (host, v.get("plan"), share, bool(v.get("complete")), bool(v.get("legacy")))
    except control.ControlError as e:
        err = "host %d: %s" % (host, e)
    got = [None] * world_size
    try:
        with _keepalive(client, job_id):
            dist.all_gather_object(got, (mine, err), group=_object_group(dist))
    except RuntimeError as e:
        # The hosts' daemons count every unit themselves instead: the same
        # batches, at the cost of the counting the exchange saves.
        log.warning("lastmile: job %s: the ranks could not relay their hosts' unit counts over "
                    "torch.distributed (%s): each host counts every unit itself, and the hosts' "
                    "plans are not compared", label, e)
        if first and err is None:
            _post(client, job_id, count_here=True)
        return False
    errors = sorted({e for _, e in got if e})
    if errors:
        raise control.ControlError("job %s: %s" % (label, "; ".join(errors)))
    views = [m for m, _ in got]
    try:
        _check_plans(views, hosts, label)
        if any(m[4] for m in views):
            # A host's lastmiled cannot take part: every host counts alone.
            if first and not mine[3]:
                _post(client, job_id, count_here=True)
            return True
        merged = _merge([m for m in views if m[2] is not None], hosts, label)
    except ValueError:
        if first:  # the job cannot run: free what it holds now, not after the grace period
            try:
                client.cancel(job_id)
            except control.ControlError as e:
                log.warning("lastmile: job %s: could not cancel it: %s", label, e)
        raise
    if first and not mine[3]:
        _post(client, job_id, mine[1], merged)
    return True


class _keepalive:
    """While a rank waits in the collective for slower hosts (counting a
    large share, or starting late), it asks its daemon for the counts every
    ``every`` seconds: trainer activity, so the job is not reclaimed for
    want of an attach (the daemon's grace, 10 minutes by default)."""

    def __init__(self, client, job_id, every=30.0):
        self.client, self.job_id, self.every = client, job_id, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lastmile-keepalive", daemon=True)

    def _run(self):
        while not self.stop.wait(self.every):
            try:
                self.client.counts(self.job_id, rows=False)
            except control.ControlError:
                pass  # a restarting daemon: the next one, or the post, finds it

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def _post(client, job_id, plan=None, rows=None, count_here=False):
    """Post the merged list (or count_here), waiting for a daemon that
    restarts: it takes the list before or after counting its share again."""
    while True:
        try:
            return client.post_counts(job_id, plan, rows, count_here=count_here)
        except control.DaemonUnavailableError:
            client.wait(_RESTART)


# The gloo group the exchange's objects travel over, per default group: a
# job's ranks build it in the same order, as new_group requires.
_groups = {}


def _object_group(dist):
    """None (the default group) where it is gloo; else a gloo group over
    the same ranks, made once: all_gather_object over NCCL needs each
    rank's CUDA device set first (torch.cuda.set_device), and moves the
    objects through GPU memory. None where gloo is not available."""
    try:
        if dist.get_backend() == "gloo":
            return None
        key = id(dist.group.WORLD)
        if key not in _groups:
            _groups[key] = dist.new_group(backend="gloo")
        return _groups[key]
    except (RuntimeError, ValueError, AttributeError):
        return None
