"""How the pool's calls reach a worker and come back: one link per worker.

A link sends calls (a method name and its arguments) to one worker, which answers them in
the order sent; `receive` gives the oldest unanswered call's output, and `ready` says which
of several links have an answer waiting. Two transports:

- `SocketLink` (the default): a direct TCP connection from the driver to the worker,
  opened once per worker and authenticated with a random key that travels through Ray.
  On a 2-core machine, with both workers busy 80 ms per call as in a terrain ES wave,
  a call reached its worker 0.14 to 0.20 ms after it was sent and its answer was back
  0.28 ms after the call ended; as a Ray actor task, 1.1 to 1.4 and 1.0 ms
  (`benchmarks/link_latency.py`). The worker serves the
  connection from one long Ray task (`RolloutWorker.serve`) and still answers Ray's own
  calls (pid, memory) on its other thread.
- `RayLink`: each call a Ray actor task. It needs no port beyond Ray's own, for clusters
  where the driver cannot reach the workers' nodes on other ports (`ray.transport: ray`).

A worker whose process is gone (killed, crashed, replaced) makes `receive` raise
`WorkerLost`; an exception raised by the called method is raised again in the driver.
"""

from __future__ import annotations

import pickle
import queue
import socket
import struct
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from typing import Any

TRANSPORTS = ("socket", "ray")
# for a worker's port to take the driver's connection, and for either side's half of the key check
CONNECT_SECONDS = 30.0
# a call this small fits in a connection's buffers (64 KB or more on Linux) behind one unread call
SMALL_MESSAGE_BYTES = 32 * 1024


class LinkUnreachable(ConnectionError):
    """The driver could not connect to a worker's endpoint (a port closed between nodes)."""


class WorkerLost(Exception):
    """The worker's process is gone; the message says how."""


class WorkerCallError(RuntimeError):
    """What a method raised in a worker, as text (for an exception that cannot be pickled,
    and as the cause of one that can: the worker's traceback)."""


@contextmanager
def _socket_of(conn: Connection) -> Iterator[socket.socket]:
    """A socket on a duplicate of `conn`'s descriptor, for options and shutdown (closed after)."""
    sock = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    try:
        yield sock
    finally:
        sock.close()


def _read_timeout(conn: Connection, seconds: float) -> None:
    """Make a read on `conn` fail after `seconds` without data (0: wait for ever)."""
    whole = int(seconds)
    with _socket_of(conn) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole, int((seconds - whole) * 1e6)))


def _closed(exc: BaseException) -> str:
    return f"its connection closed ({type(exc).__name__})"


def _checked(sock: socket.socket, authkey: bytes, accepting: bool, timeout: float) -> Connection:
    """`sock` as a Connection once both sides have shown they hold `authkey` (an HMAC challenge
    each way); raises (AuthenticationError, OSError, EOFError) otherwise, or if the other side
    says nothing for `timeout` seconds."""
    sock.settimeout(None)  # Connection reads and writes a blocking descriptor
    # Small messages leave at once instead of waiting for the peer's ACK (Nagle's algorithm
    # with delayed ACKs can hold back the last segment of a message for tens of ms).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = Connection(sock.detach())
    try:
        _read_timeout(conn, timeout)
        if accepting:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
        else:
            answer_challenge(conn, authkey)
            deliver_challenge(conn, authkey)
        _read_timeout(conn, 0)
    except BaseException:
        conn.close()
        raise
    return conn


Message = list  # of frames: the number of raw frames and a pickle, then the raw frames


def _encode(obj: tuple, raw: Sequence[Any] = ()) -> Message:
    """`obj` pickled, then each of `raw` (bytes-like: a numpy array's memory, say) as a frame of
    its own, which neither side copies into or out of a pickle. cloudpickle, as Ray pickles
    task arguments: families and trainers defined in scripts travel by value."""
    import ray.cloudpickle

    return [struct.pack("!I", len(raw)) + ray.cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), *raw]


def _send(conn: Connection, message: Message) -> None:
    for frame in message:
        conn.send_bytes(frame)


def _receive(conn: Connection) -> tuple:
    """The next message: its tuple, with its raw frames (as bytes) appended."""
    head = conn.recv_bytes()
    raw = tuple(conn.recv_bytes() for _ in range(struct.unpack_from("!I", head)[0]))
    return pickle.loads(memoryview(head)[4:]) + raw


class WorkerEndpoint:
    """The worker's side of a `SocketLink`: a listening port, then one connection answered in order."""

    def __init__(self, host: str, authkey: bytes):
        self.listener = socket.create_server((host, 0))
        self.authkey = authkey

    @property
    def address(self) -> tuple[str, int]:
        return self.listener.getsockname()[:2]

    def serve(self, call: Callable[[str, tuple], Any], timeout: float = CONNECT_SECONDS) -> None:
        """Accept the pool's connection, then answer its calls with `call(method, args)` until it
        closes. Anyone without the key, or silent for `timeout` s, is turned away."""
        with self.listener:
            while True:
                peer, _ = self.listener.accept()
                try:
                    conn = _checked(peer, self.authkey, accepting=True, timeout=timeout)
                    break
                except (AuthenticationError, OSError, EOFError):
                    continue
        with conn:
            while True:
                try:
                    message = _receive(conn)
                except (EOFError, OSError):
                    return  # the pool closed the connection, or its process is gone
                try:
                    reply = (True, call(message[0], message[1:]), None)
                except Exception as exc:
                    reply = (False, exc, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
                try:
                    answer = _encode(reply)
                except Exception:  # an exception that does not pickle goes back as text
                    answer = _encode((False, WorkerCallError(reply[2]), reply[2]))
                try:
                    _send(conn, answer)
                except OSError:
                    return


def connect(address: tuple[str, int], authkey: bytes, timeout: float = CONNECT_SECONDS) -> Connection:
    """The driver's side: a connection to a worker's endpoint, with the key checked both ways.
    Raises LinkUnreachable naming the address when the port cannot be reached, or the key
    not checked, within `timeout` s."""
    try:
        return _checked(socket.create_connection(tuple(address), timeout=timeout), authkey, False, timeout)
    except (AuthenticationError, OSError, EOFError) as exc:
        raise LinkUnreachable(
            f"cannot connect to the worker at {address[0]}:{address[1]} within {timeout:g} s "
            f"({type(exc).__name__}: {exc})"
        ) from None


class SocketLink:
    """Calls over a direct connection to the worker's `WorkerEndpoint`.

    A busy worker reads its next call only when it has answered the current one, so a
    call queued behind a running one may not fit in the connection's buffers: such a call
    is written by a thread of the link's own, and `send` never waits for the worker (the
    driver must stay free to read answers, or a worker writing a big answer and the driver
    writing a big call would wait for each other forever). A call to an idle worker, or a
    small one, is written at once.
    """

    def __init__(self, conn: Connection):
        self.conn = conn
        self.outstanding = 0
        self.lost: str | None = None  # how the connection broke, once it has
        self.stale = 0  # answers still to come to calls that were abandoned
        self._writes: queue.SimpleQueue = queue.SimpleQueue()
        self._unwritten = 0  # calls handed to the writer thread and not yet written
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None

    def send(self, method: str, args: tuple, raw: Sequence[Any] = ()) -> None:
        """Call `method(*args, *raw)` in the worker (never waits for a busy worker to read it).
        Each of `raw` (bytes-like) travels as it is and reaches the method as bytes."""
        message = _encode((method, *args), raw)
        self.outstanding += 1
        if self.lost is not None:
            return
        with self._lock:
            idle = self.outstanding == 1 and self.stale == 0  # the worker is waiting for this call
            small = sum(memoryview(frame).nbytes for frame in message) <= SMALL_MESSAGE_BYTES
            inline = self._unwritten == 0 and (idle or small)
            if not inline:
                self._unwritten += 1
        if inline:
            self._write(message)
            return
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_queued, name="poet-link-writer", daemon=True)
            self._writer.start()
        self._writes.put(message)

    def _write(self, message: Message) -> None:
        try:
            _send(self.conn, message)
        except OSError as exc:
            self.lost = self.lost or f"its connection broke ({type(exc).__name__})"

    def _write_queued(self) -> None:
        while True:
            message = self._writes.get()
            if message is None:
                return
            self._write(message)
            with self._lock:
                self._unwritten -= 1

    def receive(self) -> Any:
        """The output of the oldest call not yet received (waits for it)."""
        self.outstanding -= 1
        if self.lost is None:
            try:
                ok, value, trace = _receive(self.conn)
            except (EOFError, OSError) as exc:
                self.lost = _closed(exc)
        if self.lost is not None:
            raise WorkerLost(self.lost)
        if not ok:
            raise value from WorkerCallError(f"in the worker:\n{trace}")
        return value

    def abandon(self) -> None:
        """Forget the calls not yet received (a wave given up): their answers are skipped."""
        self.stale += self.outstanding
        self.outstanding = 0

    def close(self) -> None:
        self._writes.put(None)
        try:  # wakes a write under way (it fails), so the writer thread ends
            with _socket_of(self.conn) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()

    @staticmethod
    def ready(links: Sequence[SocketLink], timeout: float) -> list[int]:
        """Positions in `links` (each with a call outstanding) whose oldest call has an answer or
        whose worker is gone, waiting up to `timeout` seconds for one."""
        broken = [i for i, link in enumerate(links) if link.lost is not None]
        if broken:
            return broken
        position = {link.conn: i for i, link in enumerate(links)}
        answered = [position[c] for c in wait(list(position), timeout)]
        fresh = []
        for i in answered:
            link = links[i]
            if link.stale == 0:
                fresh.append(i)
                continue
            try:  # an abandoned call's answer: skipped (the caller asks again)
                _receive(link.conn)
                link.stale -= 1
            except (EOFError, OSError) as exc:
                link.lost = _closed(exc)
                fresh.append(i)
        return fresh


def ray_failure(exc: BaseException) -> str:
    """The exception's type and the first line of what Ray says about it (e.g. the exit code)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = next(
        (line for line in lines if "exit" in line.lower() or "killed" in line.lower()), lines[0] if lines else ""
    )
    return f"{type(exc).__name__}: {detail[:300]}" if detail else type(exc).__name__


class RayLink:
    """Calls as Ray actor tasks."""

    def __init__(self, actor: Any):
        self.actor = actor
        self.refs: deque = deque()  # of the calls not yet received, oldest first

    def send(self, method: str, args: tuple) -> None:
        self.refs.append(getattr(self.actor, method).remote(*args))

    def receive(self) -> Any:
        import ray

        ref = self.refs.popleft()
        try:
            return ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError) as exc:
            raise WorkerLost(ray_failure(exc)) from None

    def abandon(self) -> None:
        """Forget the calls not yet received (a wave given up)."""
        self.refs.clear()

    def close(self) -> None:
        self.refs.clear()

    @staticmethod
    def ready(links: Sequence[RayLink], timeout: float) -> list[int]:
        import ray

        position = {link.refs[0]: i for i, link in enumerate(links)}
        done, _ = ray.wait(list(position), num_returns=1, timeout=timeout)
        return [position[ref] for ref in done]
