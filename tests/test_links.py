"""The pool's links to its workers: a direct connection answers calls in order, raises the
worker's exceptions in the driver, turns away anyone without the key, and says when the
worker is gone; on a local pool it listens on loopback only."""

from __future__ import annotations

import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import numpy as np
import pytest

from poet.evaluation.links import LinkUnreachable, SocketLink, WorkerCallError, WorkerEndpoint, WorkerLost, connect

KEY = b"k" * 32


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not today")


def _calls(method: str, args: tuple):
    if method == "add":
        return args[0] + args[1]
    if method == "fail":
        raise ValueError(f"bad value {args[0]}")
    if method == "odd":
        raise Unpicklable("cannot travel")
    if method == "echo":
        return args
    if method == "sleep":
        time.sleep(args[0])
        return len(args[1])
    if method == "die":
        raise SystemExit  # escapes serve: the worker's process is gone
    raise KeyError(method)


@pytest.fixture
def endpoint():
    ep = WorkerEndpoint("127.0.0.1", KEY)
    thread = threading.Thread(target=ep.serve, args=(_calls, 1.0), daemon=True)  # strangers get 1 s
    thread.start()
    yield ep, thread
    thread.join(timeout=5)


def test_calls_are_answered_in_order_and_ready_says_when(endpoint):
    ep, _ = endpoint
    link = SocketLink(connect(ep.address, KEY))
    for i in range(3):
        link.send("add", (np.arange(3) * i, 1))
    assert link.outstanding == 3
    for i in range(3):
        assert SocketLink.ready([link], 5.0) == [0]
        np.testing.assert_array_equal(link.receive(), np.arange(3) * i + 1)
    assert SocketLink.ready([link], 0.05) == []  # nothing left to answer
    link.close()


def test_an_exception_in_the_worker_is_raised_in_the_driver_with_its_traceback(endpoint):
    ep, _ = endpoint
    link = SocketLink(connect(ep.address, KEY))
    link.send("fail", (7,))
    link.send("odd", ())
    link.send("add", (1, 2))
    with pytest.raises(ValueError, match="bad value 7") as info:
        link.receive()
    assert isinstance(info.value.__cause__, WorkerCallError) and "_calls" in str(info.value.__cause__)
    with pytest.raises(WorkerCallError, match="Unpicklable: cannot travel"):
        link.receive()
    assert link.receive() == 3  # the worker goes on
    link.close()


# (the pool's tests kill real worker processes; here the serving thread ends abruptly)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_gone_worker_raises_worker_lost_on_receive_and_send(endpoint):
    ep, thread = endpoint
    link = SocketLink(connect(ep.address, KEY))
    link.send("die", ())
    thread.join(timeout=5)
    assert SocketLink.ready([link], 5.0) == [0]
    with pytest.raises(WorkerLost, match="connection closed"):
        link.receive()
    link.send("add", (1, 2))  # no error here: the next receive says it
    assert SocketLink.ready([link], 0.0) == [0]
    with pytest.raises(WorkerLost):
        link.receive()


def test_a_connection_without_the_key_is_turned_away_and_the_pool_still_gets_in(endpoint):
    ep, _ = endpoint
    with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
        Client(ep.address, authkey=b"x" * 32)
    raw = socket.create_connection(ep.address)  # no handshake at all
    raw.close()
    with socket.create_connection(ep.address):  # says nothing: turned away after a second
        link = SocketLink(connect(ep.address, KEY, timeout=10.0))
    link.send("add", (2, 2))
    assert link.receive() == 4
    link.close()


def test_connect_names_the_address_it_cannot_reach_or_that_never_checks_the_key():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LinkUnreachable, match=rf"cannot connect to the worker at 127.0.0.1:{port}"):
        connect(("127.0.0.1", port), KEY, timeout=2.0)
    with socket.create_server(("127.0.0.1", 0)) as mute:  # takes the connection, never says a word
        t0 = time.monotonic()
        with pytest.raises(LinkUnreachable, match=r"127.0.0.1:\d+ within 1 s"):
            connect(mute.getsockname()[:2], KEY, timeout=1.0)
        assert time.monotonic() - t0 < 5


def test_big_calls_to_a_busy_worker_never_hold_up_the_driver(endpoint):
    """A busy worker reads its next call only when done: queued calls bigger than the
    connection's buffers go through the link's writer thread, so `send` returns at once and
    the driver stays free to read answers (a big answer and a big call would otherwise wait
    for each other forever)."""
    ep, _ = endpoint
    link = SocketLink(connect(ep.address, KEY))
    big = b"x" * (32 << 20)
    t0 = time.monotonic()
    link.send("sleep", (1.0, b""))  # the worker is busy for a second
    link.send("sleep", (0.0, big))
    link.send("sleep", (0.0, big))
    link.send("add", (1, 1))  # small, but behind queued ones: keeps its place
    assert time.monotonic() - t0 < 0.5
    assert [link.receive() for _ in range(4)] == [0, len(big), len(big), 2]
    link.close()


def test_abandoned_calls_answers_are_skipped_not_taken_for_later_calls(endpoint):
    ep, _ = endpoint
    link = SocketLink(connect(ep.address, KEY))
    link.send("sleep", (0.3, b"abc"))
    link.send("add", (1, 1))
    link.abandon()  # a wave given up with two calls out
    link.send("add", (2, 3))
    got = []
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        if SocketLink.ready([link], 0.1):
            got.append(link.receive())
    assert got == [5] and link.stale == 0 and link.outstanding == 0
    link.close()


def test_raw_frames_reach_the_method_as_bytes_after_the_pickled_arguments(endpoint):
    ep, _ = endpoint
    link = SocketLink(connect(ep.address, KEY))
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    link.send("echo", ("head", True), raw=[weights, b"tail"])
    head, flag, frame, tail = link.receive()
    assert (head, flag, tail) == ("head", True, b"tail") and type(frame) is bytes
    np.testing.assert_array_equal(np.frombuffer(frame, np.float32).reshape(3, 4), weights)
    link.close()
