"""Client of lastmiled's control API: HTTP + JSON on a unix socket.

The daemon listens on ``$LASTMILE_SOCKET`` or ``/run/lastmile/lastmiled.sock``
(docs/control-api.md in the lastmile repository). Standard library only::

    from lastmile.control import Client
    c = Client()
    job, created = c.submit(open("job.yaml").read(), world_size=8, base_dir=os.getcwd())
    att = c.attach(job["id"], rank=0, cursor=(0, 0))   # {"ring", "dir", "generation"}

Every request opens its own connection, so a client survives daemon restarts
without reconnect logic; :meth:`Client.wait` polls until the daemon answers.
Errors are :class:`ControlError` subclasses whose text says what to do.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import socket as _socket
import time

__all__ = [
    "Client",
    "ConflictError",
    "ControlError",
    "DaemonUnavailableError",
    "DEFAULT_SOCKET",
    "FieldError",
    "JobNotFoundError",
    "PermissionDeniedError",
    "SpecError",
    "default_socket",
]

DEFAULT_SOCKET = "/run/lastmile/lastmiled.sock"
API = "/v1"


def default_socket() -> str:
    """``$LASTMILE_SOCKET`` or ``/run/lastmile/lastmiled.sock``."""
    return os.environ.get("LASTMILE_SOCKET") or DEFAULT_SOCKET


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class ControlError(Exception):
    """A request to lastmiled failed. ``status`` is the HTTP status (None when
    no answer came), ``body`` the decoded JSON answer, if any."""

    def __init__(self, message, status=None, body=None):
        super().__init__(message)
        self.status = status
        self.body = body


class DaemonUnavailableError(ControlError, ConnectionError):
    """Nothing answers on the socket (lastmiled is not running, is restarting,
    or listens elsewhere), or it answered 503 (draining, memory budget used
    up, rings not there in time; ``retry_after`` seconds, if it said)."""

    retry_after = None


class PermissionDeniedError(ControlError, PermissionError):
    """The socket cannot be opened, or the daemon refused this caller (403)."""


class JobNotFoundError(ControlError, LookupError):
    """No such job (404)."""


class ConflictError(ControlError):
    """The request conflicts with the daemon's state (409): the name is taken
    by another spec or owner, the job ended, the rank already has a consumer."""


class FieldError(tuple):
    """One problem in a request or spec: ``(field, line, message)``; ``line`` is
    the spec line (1-based) or None. ``file`` is the spec's file as the
    submitter named it (the request's ``file``), or None."""

    def __new__(cls, field, line, message, file=None):
        self = tuple.__new__(cls, (field, line, message))
        self.file = file or None
        return self

    field = property(lambda self: self[0])
    line = property(lambda self: self[1])
    message = property(lambda self: self[2])

    def __str__(self):
        if self.file:
            where = "%s:%d: " % (self.file, self.line) if self.line else "%s: " % self.file
        else:
            where = "line %d: " % self.line if self.line else ""
        return "%s%s%s" % (where, "%s: " % self.field if self.field else "", self.message)


class SpecError(ControlError, ValueError):
    """The daemon rejected the job spec or the request (400). ``errors`` lists
    :class:`FieldError`; the message has one problem per line."""

    def __init__(self, message, errors=(), status=400, body=None):
        super().__init__(message, status, body)
        self.errors = list(errors)


# --------------------------------------------------------------------------
# Transport
# --------------------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    """``http.client.HTTPConnection`` over a unix stream socket."""

    def __init__(self, path, timeout=None):
        super().__init__("lastmiled", timeout=timeout)
        self.socket_path = path

    def connect(self):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            if self.timeout is not None:
                s.settimeout(self.timeout)
            s.connect(self.socket_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _unavailable(path, err):
    hint = ("is lastmiled running? Check `systemctl status lastmiled`; if it listens elsewhere, "
            "set LASTMILE_SOCKET or pass socket=")
    if isinstance(err, FileNotFoundError):
        what = "no lastmiled socket at %s" % path
    elif isinstance(err, ConnectionRefusedError):
        what = "lastmiled does not accept connections on %s (stopped or restarting)" % path
    elif isinstance(err, _socket.timeout):
        what = "lastmiled did not answer on %s in time" % path
    else:
        what = "cannot talk to lastmiled on %s: %s" % (path, err)
    return DaemonUnavailableError("%s: %s" % (what, hint))


def _error_from_answer(status, body, text, method, path, retry_after=None):
    """Map an error answer (``{"error": ..., "fields": [...]}``,
    docs/control-api.md) to an exception with an operator-readable text."""
    msg = None
    errors = []
    if isinstance(body, dict):
        msg = body.get("error") or body.get("message")
        for e in body.get("fields") or []:
            if isinstance(e, dict):
                line = e.get("line")
                errors.append(FieldError(e.get("field") or "",
                                         line if isinstance(line, int) and line > 0 else None,
                                         e.get("msg") or e.get("message") or "",
                                         e.get("file") if isinstance(e.get("file"), str) else None))
            else:
                errors.append(FieldError("", None, str(e)))
    if not msg:
        msg = (text or "").strip() or http.client.responses.get(status, "error")
    req = "%s %s" % (method, path)
    if status == 400 or status == 422:
        # One error: its line says what the message does, with the file and line.
        lines = [str(errors[0])] if len(errors) == 1 else [msg] + ["  " + str(e) for e in errors]
        return SpecError("\n".join(lines), errors, status, body)
    if status == 401 or status == 403:
        return PermissionDeniedError("lastmiled refused %s: %s" % (req, msg), status, body)
    if status == 404:
        return JobNotFoundError(msg, status, body)
    if status == 409:
        return ConflictError(msg, status, body)
    if status == 503:
        e = DaemonUnavailableError("lastmiled cannot serve %s now: %s" % (req, msg), status, body)
        e.retry_after = retry_after
        return e
    return ControlError("lastmiled answered %d to %s: %s" % (status, req, msg), status, body)


# --------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------


class Client:
    """lastmiled's control API. ``socket``: the unix socket path (default
    :func:`default_socket`); ``timeout``: seconds per request."""

    def __init__(self, socket=None, timeout=30.0):
        self.socket = os.fspath(socket) if socket is not None else default_socket()
        self.timeout = timeout

    def __repr__(self):
        return "<lastmile.control.Client %s>" % self.socket

    def request(self, method, path, body=None, timeout=None):
        """Send one request; returns ``(status, decoded JSON or None)`` for
        2xx answers and raises :class:`ControlError` for the rest.
        ``timeout``: seconds for this request instead of the client's."""
        conn = UnixHTTPConnection(self.socket, timeout=self.timeout if timeout is None else timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode("utf-8")
                headers["Content-Type"] = "application/json"
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except PermissionError as e:
                raise PermissionDeniedError(
                    "permission denied on lastmiled's socket %s: the socket or its directory "
                    "does not let this user (uid %d) connect; ask the host's operator (see "
                    "docs/daemon-usage.md)" % (self.socket, os.getuid())) from e
            except (FileNotFoundError, ConnectionRefusedError, _socket.timeout) as e:
                raise _unavailable(self.socket, e) from e
            except (ConnectionError, http.client.HTTPException) as e:
                # Reset or closed mid-request: the daemon went away.
                raise _unavailable(self.socket, e) from e
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
                    raise _unavailable(self.socket, e) from e
                raise
        finally:
            conn.close()
        text = raw.decode("utf-8", "replace")
        obj = None
        if raw:
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
        if 200 <= resp.status < 300:
            if raw and obj is None:
                raise ControlError("lastmiled answered %s %s with invalid JSON: %.200s"
                                   % (method, path, text), resp.status)
            return resp.status, obj
        retry_after = None
        try:
            retry_after = float(resp.getheader("Retry-After") or "")
        except ValueError:
            pass
        raise _error_from_answer(resp.status, obj, text, method, path, retry_after)

    # -- API ------------------------------------------------------------------
    def status(self) -> dict:
        """``GET /v1/status``: the daemon's version, uptime and totals."""
        return self.request("GET", API + "/status")[1]

    def submit(self, spec, world_size=None, weight=None, base_dir=None, file=None, hosts=None, host=None,
               share_counts=False):
        """``POST /v1/jobs``: submit a job, or join the identical running one.

        ``spec`` is the spec text (YAML or JSON); ``base_dir`` the directory its
        relative paths are relative to; ``file`` the spec's file name, which
        the daemon's errors name (:class:`SpecError`, checked against the
        inputs before the daemon answers: every error at once). ``hosts`` and
        ``host``: the world's ranks run on ``hosts`` hosts and this daemon
        serves host ``host``'s (torchrun's ``--nnodes`` and ``--node-rank``);
        ``share_counts``: that host counts only its share of the units, and
        the trainers relay the other hosts' counts (:meth:`counts`,
        :meth:`post_counts`). Returns ``(job, created)``: created is False when an identical job
        existed (200) and True for a new one (201).
        """
        body = {"spec": spec}
        if world_size is not None:
            body["world_size"] = int(world_size)
        if hosts is not None and int(hosts) > 1:
            body["hosts"], body["host"] = int(hosts), int(host or 0)
            if share_counts:
                body["share_counts"] = True
        if weight is not None:
            body["weight"] = weight
        if base_dir is not None:
            body["base_dir"] = os.path.abspath(os.fspath(base_dir))  # lastmiled resolves no path from its own directory
        if file is not None:
            body["file"] = os.fspath(file)
        status, job = self.request("POST", API + "/jobs", body)
        return job, status == 201

    def jobs(self) -> list:
        """``GET /v1/jobs``."""
        obj = self.request("GET", API + "/jobs")[1]
        if isinstance(obj, dict) and "jobs" in obj:
            return obj["jobs"]
        return obj

    def job(self, job_id) -> dict:
        """``GET /v1/jobs/{id}``."""
        return self.request("GET", "%s/jobs/%s" % (API, _quote(job_id)))[1]

    def counts(self, job_id, wait=None, rows=True) -> dict:
        """``GET /v1/jobs/{id}/counts``: this host's counts of the job's units
        (``rows``, -1 for the units other hosts count; None while it counts),
        their ``plan`` digest, ``counted`` once the rows are there, and
        ``complete`` when every count is known. ``wait``: seconds the daemon
        may wait for them (at most 30); ``rows=False`` leaves the rows out."""
        query = []
        if wait is not None:
            query.append("wait=%g" % max(0.0, float(wait)))
        if not rows:
            query.append("rows=0")
        path = "%s/jobs/%s/counts" % (API, _quote(job_id))
        if query:
            path += "?" + "&".join(query)
        return self.request("GET", path)[1]

    def post_counts(self, job_id, plan, rows, count_here=False) -> dict:
        """``POST /v1/jobs/{id}/counts``: every unit's rows, as the hosts of
        the world counted them, for the job's ``plan``; or, with
        ``count_here``, that the trainers cannot relay them and the host
        counts every unit itself."""
        if count_here:
            body = {"count_here": True}
        else:
            body = {"plan": plan, "rows": [int(n) for n in rows]}
        return self.request("POST", "%s/jobs/%s/counts" % (API, _quote(job_id)), body)[1]

    def cancel(self, job_id) -> dict:
        """``DELETE /v1/jobs/{id}``."""
        return self.request("DELETE", "%s/jobs/%s" % (API, _quote(job_id)))[1]

    def attach(self, job_id, rank, cursor=None, wait=None) -> dict:
        """``POST /v1/jobs/{id}/attach``: the ring of ``rank``, positioned at
        ``cursor`` ``(epoch, batch)``, the next batch the rank needs (None:
        where the rank's ring stands). ``wait``: seconds the daemon may wait for
        the job's rings (its default 60, at most 600). Returns ``{"job",
        "rank", "ring", "dir", "generation", "next", "restarted"}``."""
        body = {"rank": int(rank)}
        if cursor is not None:
            e, b = cursor
            body["cursor"] = {"epoch": int(e), "batch": int(b)}
        if wait is not None:
            body["wait"] = wait
        # The daemon may hold the answer for the wait (60 s by default),
        # twice where it restarts production at the cursor: read it for as
        # long, or a job still planning looks like a daemon that is gone.
        timeout = None
        if self.timeout is not None:
            timeout = self.timeout + 2 * (60 if wait is None else wait)
        return self.request("POST", "%s/jobs/%s/attach" % (API, _quote(job_id)), body, timeout=timeout)[1]

    def wait(self, timeout, *, initial=0.1, maximum=2.0):
        """Poll ``GET /v1/status`` with exponential backoff until the daemon
        answers (a draining daemon answers too); raise the last
        :class:`DaemonUnavailableError` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = initial
        while True:
            try:
                return self.status()
            except DaemonUnavailableError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(delay, left))
                delay = min(delay * 2, maximum)


def _quote(job_id) -> str:
    from urllib.parse import quote

    return quote(str(job_id), safe="")


def _json_value(o):
    """A dict spec's values that JSON has no type for: paths, as strings."""
    if isinstance(o, os.PathLike):
        return os.fsdecode(o)
    raise TypeError("job spec: a value of type %s is not one a spec holds (strings, numbers, "
                    "booleans, None, paths, lists and dicts)" % type(o).__name__)


# The mappings of a spec whose order is part of its meaning: partitions
# (spec/partitions.go) and the pipeline's map, cast and rename ops
# (spec/pipeline.go, assigns: the columns come out in the order written).
_ORDERED_OPS = ("map", "cast", "rename")


def _canonical(v, path=()):
    """``v`` (a dict spec or a part of it) with every mapping's keys sorted,
    but those of the mappings whose order is meaning."""
    if isinstance(v, dict):
        keep = path == ("partitions",) or (
            len(path) == 3 and path[:2] == ("pipeline", "[]") and path[2] in _ORDERED_OPS)
        items = list(v.items()) if keep else sorted(v.items(), key=lambda kv: str(kv[0]))
        return {k: _canonical(x, path + (str(k),)) for k, x in items}
    if isinstance(v, (list, tuple)):
        return [_canonical(x, path + ("[]",)) for x in v]
    return v


def _spec_sha256(spec_or_path, text):
    """The sha256 that names a spec in a checkpoint (hex): of its text, or
    for a dict, of its JSON with the keys sorted where their order means
    nothing, so that two dicts built in another order are the same spec."""
    if isinstance(spec_or_path, dict):
        text = json.dumps(_canonical(spec_or_path), default=_json_value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_spec(spec_or_path):
    """``(text, base_dir, label)`` of a spec given as a path, text or dict.
    A dict's keys keep their order in the text: the order of some mappings
    is meaning (:data:`_ORDERED_OPS`); lastmiled's job identity is that of
    the parsed spec."""
    if isinstance(spec_or_path, dict):
        return json.dumps(spec_or_path, default=_json_value), os.getcwd(), "<dict spec>"
    if isinstance(spec_or_path, bytes):
        spec_or_path = spec_or_path.decode("utf-8")
    if isinstance(spec_or_path, os.PathLike) or (
            isinstance(spec_or_path, str) and "\n" not in spec_or_path
            and (os.path.exists(spec_or_path)
                 or spec_or_path.endswith((".yaml", ".yml", ".json")))):
        path = os.path.abspath(os.fspath(spec_or_path))
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(2, "job spec %s not found" % path, path) from None
        return text, os.path.dirname(path), os.fspath(spec_or_path)
    if not isinstance(spec_or_path, str):
        raise TypeError("spec_or_path: a path, YAML/JSON text or a dict, not %s"
                        % type(spec_or_path).__name__)
    return spec_or_path, os.getcwd(), "<spec text>"
