"""Which ranks a trainer process is, and on which host: from the arguments
of :class:`lastmile.Dataset`, else from torchrun's environment (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``)."""

from __future__ import annotations

import os

__all__ = ["resolve_hosts", "resolve_ranks"]


def _env_int(env, name):
    v = env.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError("environment variable %s=%r is not an integer" % (name, v)) from None


def resolve_ranks(rank=None, world_size=None, env=None):
    """``(rank, world_size, local_rank)`` from the arguments, else torchrun's
    ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``.

    Without a world size from either, world size None: the spec's, which
    the caller checks the rank against (lastmile.Dataset, once lastmiled
    answered the submission). Without a rank, rank 0. ``local_rank``
    defaults to the rank.
    """
    env = os.environ if env is None else env
    env_rank, env_world = _env_int(env, "RANK"), _env_int(env, "WORLD_SIZE")
    # LOCAL_RANK numbers the process in torchrun's world: it is the local
    # rank of the Dataset's only where that world is the Dataset's (not a
    # data-parallel group or a one-rank job given by rank=/world_size=).
    torchruns = (rank is None or rank == env_rank) and (world_size is None or world_size == env_world)
    if rank is None:
        rank = env_rank
    if world_size is None:
        world_size = env_world
    local_rank = _env_int(env, "LOCAL_RANK") if torchruns else None
    if rank is None:
        if world_size not in (None, 1):
            raise ValueError("world size %d but no rank: pass rank= or set RANK (torchrun sets "
                             "both)" % world_size)
        rank = 0
    rank = int(rank)
    if world_size is not None:
        world_size = int(world_size)
        if world_size < 1:
            raise ValueError("world size %d: must be at least 1" % world_size)
        if not 0 <= rank < world_size:
            raise ValueError("rank %d is outside world size %d" % (rank, world_size))
    elif rank < 0:
        raise ValueError("rank %d: ranks count from 0" % rank)
    # else the world size is the spec's, which lastmiled tells when the job
    # is submitted: lastmile.Dataset checks the rank against it then
    if local_rank is None:
        local_rank = rank
    return rank, world_size, local_rank


def resolve_hosts(rank, world_size, local_rank, hosts=None, host=None, env=None):
    """``(hosts, host)``: how many hosts the world's ranks run on, and which
    one this process's is, from the arguments, else torchrun's
    ``LOCAL_WORLD_SIZE`` (ranks per host) and ``GROUP_RANK`` (the host's
    index; ``rank // LOCAL_WORLD_SIZE`` without it). ``(1, 0)`` for a world
    on one host.

    Each host's lastmiled serves only its own ranks, so every host must run
    as many ranks (torchrun's ``--nproc-per-node``), numbered as torchrun
    numbers them: host ``h`` runs ranks ``h*L`` to ``h*L + L - 1``.
    """
    env = os.environ if env is None else env
    env_rank, env_world = _env_int(env, "RANK"), _env_int(env, "WORLD_SIZE")
    if hosts is None and world_size is not None and env_world is not None and (
            world_size != env_world or (env_rank is not None and rank != env_rank)):
        # rank=/world_size= name a world of their own inside torchrun's (a
        # data-parallel group, a one-rank job): torchrun's LOCAL_WORLD_SIZE
        # and GROUP_RANK do not say where its ranks run.
        local = _env_int(env, "LOCAL_WORLD_SIZE")
        env_local = _env_int(env, "LOCAL_RANK")
        if (local is not None and local < env_world) or (
                local is None and env_local is not None and env_local != env_rank):
            raise ValueError(
                "rank %d of world size %d is not torchrun's (RANK %s of WORLD_SIZE %d), whose ranks run on "
                "several hosts: which host runs which rank of this world is not known; pass hosts= and host="
                % (rank, world_size, env_rank, env_world))
        return 1, 0
    if hosts is None:
        local = _env_int(env, "LOCAL_WORLD_SIZE")
        if local is None or world_size is None or local >= world_size:
            if world_size is not None and local_rank != rank:
                raise ValueError(
                    "rank %d is local rank %d, so the world of %d ranks spans hosts, but LOCAL_WORLD_SIZE "
                    "is not set: pass hosts= and host=, or set LOCAL_WORLD_SIZE (torchrun sets it)"
                    % (rank, local_rank, world_size))
            return 1, 0
        if local < 1 or world_size % local:
            raise ValueError(
                "WORLD_SIZE %d is not a multiple of LOCAL_WORLD_SIZE %d: lastmile needs the same number "
                "of ranks on every host" % (world_size, local))
        hosts = world_size // local
        if host is None:
            host = _env_int(env, "GROUP_RANK")
    hosts = int(hosts)
    if hosts > 1 and world_size is None:
        raise ValueError("hosts=%d but no world size: pass world_size= or set WORLD_SIZE" % hosts)
    if hosts < 1 or (world_size is not None and world_size % hosts):
        raise ValueError("hosts=%d: want a divisor of world size %s, each host running as many ranks"
                         % (hosts, world_size))
    local = (world_size or 1) // hosts
    if host is None:
        host = rank // local
    host = int(host)
    if not 0 <= host < hosts:
        raise ValueError("host %d: want 0 to %d" % (host, hosts - 1))
    if not host * local <= rank < (host + 1) * local:
        raise ValueError(
            "rank %d does not run on host %d, whose ranks are %d to %d with %d ranks a host: lastmile "
            "needs torchrun's numbering (rank = host * ranks a host + local rank)"
            % (rank, host, host * local, (host + 1) * local - 1, local))
    return hosts, host
