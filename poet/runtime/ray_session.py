"""Starting or joining the Ray a run's pool works on (`ensure_ray`), and checking a cluster's
address before joining it, so a wrong one fails in seconds.

`ray.init(address=...)` on an address where nothing listens, or on a cluster that wants
an authentication token this driver lacks, retries for minutes and fills the terminal with
its C++ warnings before an error that names neither the address nor the token. Before
`ray.init`, `check_cluster` resolves the address as Ray would (`auto`: RAY_ADDRESS, then
the cluster a `ray start` on this machine recorded) and makes one gRPC call over Ray's own
channel with a short deadline: to a head's GCS, carrying the token Ray would send, or a ping
of a Ray Client server. Each way it can fail is one `ClusterError` line naming `ray.address`.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

CONNECT_TIMEOUT_S = 5.0  # the deadline of the one call; a head that is up answers in milliseconds
TOKEN_HELP = (
    "the cluster's token in RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH "
    "(default ~/.ray/auth_token); `ray get-auth-token` on the head prints it"
)


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


def _unreachable(exc: Exception, host: str, shown: str, start: str) -> ClusterError | None:
    """The ClusterError for a gRPC call that never reached a server (None: it reached one).
    gRPC says why in its details: a failed name lookup, a refused connection, or a timeout."""
    import grpc

    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = str(exc.details()) if callable(getattr(exc, "details", None)) else ""
    if code == grpc.StatusCode.UNAVAILABLE:
        if "resolv" in details or "lookup" in details:
            return ClusterError(f"ray.address: cannot resolve host {host!r} of {shown}")
        if "refused" in details.lower():
            return ClusterError(f"ray.address: nothing is listening at {shown}: is the head started, with `{start}`?")
        return ClusterError(f"ray.address: cannot reach {shown} ({details or code.name})")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and "connect" in details.lower():
        return ClusterError(
            f"ray.address: no answer from {shown} within {CONNECT_TIMEOUT_S:g} s "
            "(host down, or a firewall drops the port)"
        )
    return None


def _token_mode(auto: bool) -> tuple[bool, bool, tuple]:
    """Whether this driver uses token authentication, whether it has a token, and the gRPC
    metadata to add by hand (Ray's channel adds the token itself under RAY_AUTH_MODE=token).

    An explicit address (RAY_ADDRESS included) uses tokens only under RAY_AUTH_MODE=token;
    `auto` also does, as `ray.init` decides, when RAY_AUTH_MODE is unset and a token exists."""
    from ray._private.authentication.authentication_utils import is_token_auth_enabled
    from ray._raylet import AuthenticationTokenLoader
    from ray.exceptions import AuthenticationError

    loader = AuthenticationTokenLoader.instance()
    try:
        has_token = loader.has_token(ignore_auth_mode=True)
    except AuthenticationError as exc:  # e.g. RAY_AUTH_TOKEN_PATH names no readable file
        raise ClusterError(
            f"ray.address: cannot read this driver's authentication token "
            f"({exc.message.rstrip('.')}): give {TOKEN_HELP}"
        ) from None
    if is_token_auth_enabled():
        return True, has_token, ()
    if auto and "RAY_AUTH_MODE" not in os.environ and has_token:
        return True, True, tuple(loader.get_token_for_http_header(ignore_auth_mode=True).items())
    return False, has_token, ()


def _token_source() -> str:
    """Where Ray takes this driver's token from (RAY_AUTH_TOKEN first, then a file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return "~/.ray/auth_token"


def _ask_gcs(gcs: str, host: str, port_number: str, shown: str, auto: bool) -> None:
    """One call to the GCS at `gcs` over Ray's own gRPC channel, with the token (and TLS) Ray
    would use; a ClusterError unless it answers."""
    import grpc
    from ray._private.gcs_utils import create_gcs_channel
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    token_mode, has_token, metadata = _token_mode(auto)
    channel = create_gcs_channel(gcs)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=CONNECT_TIMEOUT_S, metadata=metadata or None)
    except grpc.RpcError as exc:
        unreachable = _unreachable(exc, host, shown, f"ray start --head --port={port_number}")
        if unreachable is not None:
            raise unreachable from None
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        if code == grpc.StatusCode.UNAUTHENTICATED:
            if not token_mode:
                raise ClusterError(
                    f"ray.address: the Ray cluster at {shown} requires authentication: run with "
                    f"RAY_AUTH_MODE=token and {TOKEN_HELP}"
                ) from None
            if not has_token:
                raise ClusterError(
                    f"ray.address: the Ray cluster at {shown} requires authentication and "
                    f"RAY_AUTH_MODE=token finds no token: give {TOKEN_HELP}"
                ) from None
            raise ClusterError(
                f"ray.address: the Ray cluster at {shown} rejected the authentication token "
                f"from {_token_source()}: give {TOKEN_HELP}"
            ) from None
        port = "give the port the head was started with (`ray start --head --port=PORT`, 6379 by default)"
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise ClusterError(
                f"ray.address: {shown} accepts connections but no Ray head's GCS answers there "
                f"within {CONNECT_TIMEOUT_S:g} s; {port}"
            ) from None
        name = code.name if code is not None else type(exc).__name__
        raise ClusterError(f"ray.address: {shown} does not answer as a Ray head's GCS ({name}); {port}") from None
    finally:
        channel.close()


def check_cluster(address: str) -> None:
    """Raise ClusterError (one line naming ray.address) unless a Ray cluster at `address`
    answers, and, for a head's GCS address, accepts this driver's authentication.

    `address` is what `ray.init` would take: `auto`, HOST:PORT of the head's GCS, or
    `ray://HOST:PORT` (Ray Client: only the connection is checked). Other schemes are left
    to Ray."""
    from ray._common.network_utils import parse_address
    from ray._private import services

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
        parsed = parse_address(rest.rstrip("/"))
        if parsed is None or not parsed[1].isdigit() or not 0 < int(parsed[1]) < 65536:
            raise ClusterError(f"ray.address: {address!r} is not ray://HOST:PORT")
        _ping_client_server(
            rest.rstrip("/"), parsed[0], address, f"ray start --head --ray-client-server-port={parsed[1]}"
        )
        return
    # `auto` is the cluster the last `ray start` here recorded: Ray would otherwise fall back
    # to any Ray it finds running on this machine, such as another run's own local pool
    recorded = _recorded_cluster() if auto else None
    if auto and recorded is None:
        raise ClusterError(NO_CLUSTER)
    try:
        # Ray's own resolution of an explicit address: localhost becomes this node's address
        gcs = services.canonicalize_bootstrap_address(recorded if auto else address)
    except ConnectionError:
        raise ClusterError(NO_CLUSTER) from None
    except ValueError:
        raise ClusterError(f"ray.address: {address!r} is not HOST:PORT, ray://HOST:PORT or auto") from None
    parsed = parse_address(gcs) if gcs else None
    if parsed is None or not parsed[1].isdigit() or not 0 < int(parsed[1]) < 65536:
        raise ClusterError(f"ray.address: {address!r} is not HOST:PORT, ray://HOST:PORT or auto")
    shown = address if address == gcs else f"{address} (as {gcs})"
    _ask_gcs(gcs, parsed[0], parsed[1], shown, auto)


def _ping_client_server(target: str, host: str, shown: str, start: str) -> None:
    """One ping of the Ray Client server at `target` over Ray's own gRPC channel; a
    ClusterError only when no server is reached (what answers there is left to Ray Client)."""
    import grpc
    from ray._private.gcs_utils import create_gcs_channel
    from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

    channel = create_gcs_channel(target)
    try:
        ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(
            ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING), timeout=CONNECT_TIMEOUT_S
        )
    except grpc.RpcError as exc:
        unreachable = _unreachable(exc, host, shown, start)
        if unreachable is not None:
            raise unreachable from None
    finally:
        channel.close()


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
