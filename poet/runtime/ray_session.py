"""Starting or joining the Ray a run's pool works on (`ensure_ray`), and checking a cluster's
address before joining it, so a wrong one fails in seconds.

`ray.init(address=...)` on an address where nothing answers as a Ray head retries for
minutes (over five on an open port where nothing answers) and fills the terminal with its
C++ warnings before an error that names neither the address nor the token. Before joining,
`check_cluster` resolves the address (`auto`: RAY_ADDRESS), opens one TCP connection to it
and sends HTTP/2's connection preface, which any gRPC server (a head's GCS, a Ray Client
server) answers at once with its settings; a driver set to send a token
(RAY_AUTH_MODE=token) must have one where Ray's documented settings put it. Then
`join_check` joins with `ray.init` and leaves again, so that a cluster that refuses this
driver (its authentication, most often) is one line before the run directory is made.
Only Ray's public API is used: no Ray module beyond `ray`, no Ray service by name, no
session file, no private keyword. Each way it can fail is one `ClusterError` line naming
`ray.address`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

CONNECT_TIMEOUT_S = 5.0  # the deadline of the connection and of its answer; a head that is up answers in milliseconds
TOKEN_HELP = (
    "the cluster's token in RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH "
    "(default ~/.ray/auth_token); `ray get-auth-token` on the head prints it"
)
# HTTP/2's client connection preface and an empty SETTINGS frame: a gRPC server's first bytes
# back are a SETTINGS frame (a 9-byte frame header of type 4)
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
HTTP2_SETTINGS = 4


class ClusterError(ConnectionError):
    """A Ray cluster that cannot be joined; its text is one line naming ray.address."""


NO_CLUSTER = (
    "ray.address: 'auto' joins the cluster RAY_ADDRESS names, and RAY_ADDRESS is not set (a run's own "
    "local pool is never joined): start one with `ray start --head` and give HEAD_IP:PORT (or set "
    "RAY_ADDRESS to it), or leave --address out for a local pool"
)


def split_address(address: str) -> tuple[str, int] | None:
    """(host, port) of HOST:PORT or [IPv6]:PORT, or None when it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _connect(host: str, port: int, shown: str, start: str) -> socket.socket:
    """One TCP connection to host:port; a ClusterError naming why it cannot be opened."""
    try:
        return socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except socket.gaierror:
        raise ClusterError(f"ray.address: cannot resolve host {host!r} of {shown}") from None
    except ConnectionRefusedError:
        raise ClusterError(
            f"ray.address: nothing is listening at {shown}: is the head started, with `{start}`?"
        ) from None
    except TimeoutError:
        raise ClusterError(
            f"ray.address: no answer from {shown} within {CONNECT_TIMEOUT_S:g} s "
            "(host down, or a firewall drops the port)"
        ) from None
    except OSError as exc:
        raise ClusterError(f"ray.address: cannot reach {shown} ({exc.strerror or exc})") from None


def _answers_grpc(connection: socket.socket) -> bool | None:
    """Whether the server on `connection` answers HTTP/2's preface with its settings, as every
    gRPC server does (None: no answer within the deadline). The connection is closed."""
    with connection:
        try:
            connection.sendall(HTTP2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = connection.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except TimeoutError:
            return None
        except OSError:
            return False
    return len(head) == 9 and head[3] == HTTP2_SETTINGS


def _tls() -> bool:
    """Whether Ray's channels use TLS (RAY_USE_TLS): then the preface is not sent in the clear."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def _token_source() -> str:
    """Where Ray takes this driver's token from (RAY_AUTH_TOKEN first, then a file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return "~/.ray/auth_token"


def _sends_token() -> bool:
    return os.environ.get("RAY_AUTH_MODE", "").lower() == "token"


def _check_token() -> None:
    """Under RAY_AUTH_MODE=token, this driver's token must be where Ray's documentation says
    Ray reads it; a ClusterError naming the setting otherwise."""
    if not _sends_token() or os.environ.get("RAY_AUTH_TOKEN"):
        return
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    path = Path(named).expanduser() if named else Path.home() / ".ray" / "auth_token"
    try:
        if path.read_text().strip():
            return
        why = "the file is empty"
    except OSError as exc:
        why = exc.strerror or str(exc)
    raise ClusterError(
        f"ray.address: RAY_AUTH_MODE=token but this driver's authentication token cannot be read from "
        f"{_token_source()} ({why}): give {TOKEN_HELP}"
    )


def check_cluster(address: str) -> None:
    """Raise ClusterError (one line naming ray.address) unless a gRPC server answers at
    `address` and this driver has the token its settings say it sends.

    `address` is what `ray.init` would take: `auto` (RAY_ADDRESS), HOST:PORT of the head's
    GCS, or `ray://HOST:PORT` (Ray Client). Other schemes are left to Ray."""
    shown = address
    if address == "auto":  # as ray.init's `auto`, but never any Ray that happens to run here
        if not os.environ.get("RAY_ADDRESS"):
            raise ClusterError(NO_CLUSTER)
        address = os.environ["RAY_ADDRESS"]
        shown = f"auto (as {address})"
    if address == "local":  # a new local instance, nothing to join
        return
    client = address.startswith("ray://")
    if "://" in address and not client:
        return
    target = address.removeprefix("ray://").rstrip("/")
    parsed = split_address(target)
    if parsed is None:
        form = "ray://HOST:PORT" if client else "HOST:PORT, ray://HOST:PORT or auto"
        raise ClusterError(f"ray.address: {address!r} is not {form}")
    start = f"ray start --head --{'ray-client-server-port' if client else 'port'}={parsed[1]}"
    connection = _connect(*parsed, shown, start)
    if _tls():
        connection.close()
    else:
        answered = _answers_grpc(connection)
        what = "Ray Client server" if client else "Ray head's GCS"
        port = "give the port the head was started with (`ray start --head --port=PORT`, 6379 by default)"
        if answered is None:
            raise ClusterError(
                f"ray.address: {shown} accepts connections but no {what} answers there within "
                f"{CONNECT_TIMEOUT_S:g} s" + ("" if client else f"; {port}")
            )
        if not answered:
            raise ClusterError(
                f"ray.address: {shown} does not answer as a {what} (no gRPC there)" + ("" if client else f"; {port}")
            )
    _check_token()


def _refused(address: str, exc: Exception) -> ClusterError:
    """The one line for a cluster that answers but did not let this driver in."""
    ray_says = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
    if not _sends_token():
        hint = f"if it requires authentication, run with RAY_AUTH_MODE=token and {TOKEN_HELP}"
    else:
        hint = f"if it requires authentication, it rejected the authentication token from {_token_source()}: give {TOKEN_HELP}"
    return ClusterError(f"ray.address: the Ray cluster at {address} did not let this driver in ({ray_says}); {hint}")


def ensure_ray(
    address: str | None, num_cpus: int | None = None, log_to_driver: bool = False, runtime_env: dict | None = None
) -> bool:
    """Start or join Ray quietly; returns True if this call started it.

    No address: a new local instance, whatever RAY_ADDRESS or a running `ray start` say
    (joining someone's cluster must be asked for: `--address auto` or an address). Ray
    (>= 2.52, the oldest this project accepts) starts a new local instance with token
    authentication unless RAY_AUTH_MODE says otherwise, so nothing without the token
    (~/.ray/auth_token) joins or submits work.

    A cluster that does not let this driver in is a `ClusterError`. Check an address with
    `check_cluster` before calling this (the runner does, and `join_check`, before it
    touches the run directory): one that does not answer otherwise costs minutes of Ray's retries.
    """
    import ray
    from ray.exceptions import AuthenticationError

    if ray.is_initialized():
        return False
    try:
        ray.init(
            **({"address": "local", "num_cpus": num_cpus} if address is None else {"address": address}),
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=log_to_driver,
            configure_logging=True,
            **({"runtime_env": runtime_env} if runtime_env else {}),
        )
    except (AuthenticationError, ConnectionError) as exc:  # a token missing or rejected, most often
        if address is None:
            raise
        raise _refused(address, exc) from None
    return True


def join_check(address: str) -> None:
    """Join the cluster at `address` and leave it again: a ClusterError (one line) if it does
    not let this driver in. For before anything is written; the run joins for itself later.
    Ray's C++ client writes its retries straight to this process's stderr while it tries;
    they are kept out of the terminal (the error says what they said)."""
    import ray

    with _stderr_held():
        started = ensure_ray(address)
    if started:
        ray.shutdown()


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """File descriptor 2 into a scratch file for the block (where C++ code writes, not only Python)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _import_errors(modules: list[str]) -> dict[str, str]:
    """On a worker: why each of `modules` does not import there (empty: all do)."""
    import importlib

    errors = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # the user's code may fail in any way at import
            errors[module] = f"{type(exc).__name__}: {exc}"
    return errors


def workers_import_errors(modules: list[str], timeout_s: float = 120.0) -> dict[str, str]:
    """Why a worker of the Ray this process joined cannot import each of `modules` (empty:
    it can, or no worker answered in time: the pool's own start then says what is wrong)."""
    import ray
    from ray.exceptions import GetTimeoutError

    task = ray.remote(num_cpus=0)(_import_errors)
    try:
        return ray.get(task.remote(list(modules)), timeout=timeout_s)
    except GetTimeoutError:
        return {}
