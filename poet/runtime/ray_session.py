"""Starting or joining the Ray a run's pool works on (`ensure_ray`), and checking a cluster's
address before joining it, so a wrong one fails in seconds.

`ray.init(address=...)` on an address where nothing answers as a Ray head, or on a cluster
that wants an authentication token this driver lacks, retries for minutes (over five on an
open port where nothing answers) and fills the terminal with its C++ warnings before an
error that names neither the address nor the token. Before `ray.init`, `check_cluster`
resolves the address as Ray's documentation says `auto` does (RAY_ADDRESS, then the cluster
a `ray start` on this machine recorded), opens one TCP connection to it, and makes one gRPC
call with a short deadline: to a head's GCS, carrying the token Ray's documented settings
give (RAY_AUTH_MODE, RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token), or to a Ray
Client server. The call goes through the public `grpc` package by its method's name, so no
Ray module beyond the public `ray` API is imported. Each way it can fail is one
`ClusterError` line naming `ray.address`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
from pathlib import Path

CONNECT_TIMEOUT_S = 5.0  # the deadline of the connection and of the call; a head that is up answers in milliseconds
TOKEN_HELP = (
    "the cluster's token in RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH "
    "(default ~/.ray/auth_token); `ray get-auth-token` on the head prints it"
)
# A head's GCS answers this (its cluster's id) to any driver it lets in; a Ray Client server
# answers the other. Both take an empty request, protobuf's encoding of default fields.
GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"


class ClusterError(ConnectionError):
    """A Ray cluster that cannot be joined; its text is one line naming ray.address."""


NO_CLUSTER = (
    "ray.address: 'auto' joins the cluster RAY_ADDRESS names or the one the last `ray start` on this "
    "machine started, and there is neither (a run's own local pool is never joined): start one with "
    "`ray start --head`, give HEAD_IP:PORT, or leave --address out for a local pool"
)


def _recorded_cluster() -> str | None:
    """The address the last `ray start` on this machine recorded (Ray's `ray_current_cluster`
    file, in the temp dir Ray picks: RAY_TMPDIR, on Linux TMPDIR, else /tmp), or None."""
    base = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None)
    if not base:
        base = "/tmp" if sys.platform.startswith(("linux", "darwin")) else tempfile.gettempdir()
    try:
        return (Path(base) / "ray" / "ray_current_cluster").read_text().strip() or None
    except OSError:
        return None


def split_address(address: str) -> tuple[str, int] | None:
    """(host, port) of HOST:PORT or [IPv6]:PORT, or None when it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _connect(host: str, port: int, shown: str, start: str) -> None:
    """One TCP connection to host:port; a ClusterError naming why it cannot be opened."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
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


def _token_source() -> str:
    """Where Ray takes this driver's token from (RAY_AUTH_TOKEN first, then a file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return "~/.ray/auth_token"


def _token() -> str | None:
    """This driver's token where Ray's documentation says Ray reads it, or None. A
    RAY_AUTH_TOKEN_PATH that names no readable file is a ClusterError, as it is to Ray."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip()
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    path = Path(named).expanduser() if named else Path.home() / ".ray" / "auth_token"
    try:
        return path.read_text().strip() or None
    except OSError as exc:
        if not named:
            return None
        raise ClusterError(
            f"ray.address: cannot read this driver's authentication token from RAY_AUTH_TOKEN_PATH={named} "
            f"({exc.strerror or exc}): give {TOKEN_HELP}"
        ) from None


def _token_mode(auto: bool) -> tuple[bool, str | None]:
    """Whether this driver sends a token, and the token (None: it has none).

    An explicit address (RAY_ADDRESS included) uses tokens only under RAY_AUTH_MODE=token;
    `auto` also does, as `ray.init` decides, when RAY_AUTH_MODE is unset and a token exists."""
    token = _token()
    mode = os.environ.get("RAY_AUTH_MODE", "").lower()
    return mode == "token" or (auto and not mode and token is not None), token


def _channel(target: str):
    """A gRPC channel to `target`, with TLS from Ray's documented RAY_TLS_* files when
    RAY_USE_TLS is on, as Ray's own channels have."""
    import grpc

    if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return grpc.insecure_channel(target)

    def read(name: str) -> bytes | None:
        path = os.environ.get(name)
        return Path(path).read_bytes() if path else None

    credentials = grpc.ssl_channel_credentials(
        read("RAY_TLS_CA_CERT"), read("RAY_TLS_SERVER_KEY"), read("RAY_TLS_SERVER_CERT")
    )
    return grpc.secure_channel(target, credentials)


def _call(target: str, method: str, metadata: tuple = ()):
    """The status code of one empty-request call of `method` at `target` (None: it answered)."""
    import grpc

    channel = _channel(target)
    try:
        channel.unary_unary(method)(b"", timeout=CONNECT_TIMEOUT_S, metadata=metadata or None)
        return None
    except grpc.RpcError as exc:
        return exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    finally:
        channel.close()


def _ask_gcs(target: str, shown: str, auto: bool) -> None:
    """One call to the GCS at `target` with the token Ray would send; a ClusterError unless it answers."""
    import grpc

    token_mode, token = _token_mode(auto)
    metadata = (("authorization", f"Bearer {token}"),) if token_mode and token else ()
    code = _call(target, GCS_METHOD, metadata)
    if code is None:
        return
    if code == grpc.StatusCode.UNAUTHENTICATED:
        if not token_mode:
            raise ClusterError(
                f"ray.address: the Ray cluster at {shown} requires authentication: run with "
                f"RAY_AUTH_MODE=token and {TOKEN_HELP}"
            )
        if token is None:
            raise ClusterError(
                f"ray.address: the Ray cluster at {shown} requires authentication and "
                f"RAY_AUTH_MODE=token finds no token: give {TOKEN_HELP}"
            )
        raise ClusterError(
            f"ray.address: the Ray cluster at {shown} rejected the authentication token "
            f"from {_token_source()}: give {TOKEN_HELP}"
        )
    port = "give the port the head was started with (`ray start --head --port=PORT`, 6379 by default)"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        raise ClusterError(
            f"ray.address: {shown} accepts connections but no Ray head's GCS answers there "
            f"within {CONNECT_TIMEOUT_S:g} s; {port}"
        )
    raise ClusterError(f"ray.address: {shown} does not answer as a Ray head's GCS ({code.name}); {port}")


def check_cluster(address: str) -> None:
    """Raise ClusterError (one line naming ray.address) unless a Ray cluster at `address`
    answers, and, for a head's GCS address, accepts this driver's authentication.

    `address` is what `ray.init` would take: `auto`, HOST:PORT of the head's GCS, or
    `ray://HOST:PORT` (Ray Client: only that a server is reached is checked). Other schemes
    are left to Ray."""
    # As ray.init: RAY_ADDRESS stands for `auto`, and is then an explicit address (one that
    # never turns token authentication on by itself)
    auto = address == "auto" and not os.environ.get("RAY_ADDRESS")
    if address == "auto" and not auto:
        address = os.environ["RAY_ADDRESS"]
    if address == "local":  # a new local instance, nothing to join
        return
    if "://" in address:
        scheme, rest = address.split("://", 1)
        if scheme != "ray":
            return
        parsed = split_address(rest.rstrip("/"))
        if parsed is None:
            raise ClusterError(f"ray.address: {address!r} is not ray://HOST:PORT")
        _connect(*parsed, address, f"ray start --head --ray-client-server-port={parsed[1]}")
        # what answers there is left to Ray Client; only a server that never does is an error
        import grpc

        if _call(rest.rstrip("/"), CLIENT_METHOD) == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise ClusterError(
                f"ray.address: {address} accepts connections but no Ray Client server answers there "
                f"within {CONNECT_TIMEOUT_S:g} s"
            )
        return
    # `auto` is the cluster the last `ray start` here recorded: Ray would otherwise fall back
    # to any Ray it finds running on this machine, such as another run's own local pool
    target = _recorded_cluster() if auto else address
    if target is None:
        raise ClusterError(NO_CLUSTER)
    parsed = split_address(target)
    if parsed is None:
        raise ClusterError(f"ray.address: {address!r} is not HOST:PORT, ray://HOST:PORT or auto")
    shown = address if address == target else f"{address} (as {target})"
    _connect(*parsed, shown, f"ray start --head --port={parsed[1]}")
    _ask_gcs(target, shown, auto)


def ensure_ray(
    address: str | None, num_cpus: int | None = None, log_to_driver: bool = False, runtime_env: dict | None = None
) -> bool:
    """Start or join Ray quietly; returns True if this call started it.

    No address: a new local instance on 127.0.0.1, whatever RAY_ADDRESS or a running
    `ray start` say (joining someone's cluster must be asked for: `--address auto` or an
    address). Ray's servers listen on every interface and Ray has no switch to keep them on
    loopback; Ray (>= 2.52, the oldest this project accepts) starts a new local instance
    with token authentication unless RAY_AUTH_MODE says otherwise, so nothing without the
    token (~/.ray/auth_token) joins or submits work.

    A cluster that refuses this driver's authentication is a `ClusterError`. Check an address
    with `check_cluster` before calling this (the runner does, before it touches the run
    directory): one that does not answer otherwise costs minutes of Ray's retries.
    """
    import ray
    from ray.exceptions import AuthenticationError

    if ray.is_initialized():
        return False
    local = {"address": "local", "num_cpus": num_cpus, "_node_ip_address": "127.0.0.1"}
    try:
        ray.init(
            **(local if address is None else {"address": address}),
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=log_to_driver,
            configure_logging=True,
            **({"runtime_env": runtime_env} if runtime_env else {}),
        )
    except AuthenticationError as exc:  # e.g. RAY_AUTH_MODE=token and no token anywhere
        if address is None:
            raise
        raise ClusterError(
            f"ray.address: cannot authenticate to the Ray cluster at {address}: "
            f"{exc.message.rstrip('.')}; give {TOKEN_HELP}"
        ) from None
    return True


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
