"""How long a call takes to reach a pool worker and to come back, over each transport.

    python benchmarks/link_latency.py [--workers 2] [--busy-ms 0,80] [--calls 60] [--json PATH]

W actors, each with the pool's two ways in (`poet.evaluation.links`): a `SocketLink`
(a direct connection to a `WorkerEndpoint` served from one long Ray task, the default
`ray.transport: socket`) and a `RayLink` (each call a Ray actor task, `ray.transport: ray`).
Each round sends one call to every worker, as a wave sends one chunk to each; the call
carries 3.5 KB (a terrain chunk's packed requests) and keeps its worker busy for `busy`
ms with numpy work, as a chunk keeps it busy with rollouts, then returns the two times it
read from the machine's monotonic clock (when it started and when it finished). Reported,
median over the rounds: `start`, from the driver sending a worker's call to the worker
starting it (first and last worker sent to), and `return`, from the first worker's finish
to the driver holding its answer. Transports alternate round by round on the same actors.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from poet.evaluation.links import RayLink, SocketLink, WorkerEndpoint, connect  # noqa: E402


class Timer:
    """A worker that does `busy` seconds of numpy work per call."""

    def open_link(self, authkey: bytes) -> tuple[str, int]:
        self.endpoint = WorkerEndpoint("127.0.0.1", authkey)
        return self.endpoint.address

    def serve(self) -> None:
        self.endpoint.serve(lambda method, args: self.work(*args))

    def work(self, payload: bytes, busy: float) -> tuple[float, float]:
        start = time.monotonic()
        x = np.zeros((128, 40))
        while time.monotonic() < start + busy:
            np.tanh(x, out=x)
        return start, time.monotonic()


def one_round(links: list, kind: type, payload: bytes, busy: float) -> tuple[list[float], float]:
    """Send one call to each link; returns (per worker: start - send), first finish -> answer held."""
    sent = []
    for link in links:
        sent.append(time.monotonic())
        link.send("work", (payload, busy))
    answers: dict[int, tuple[tuple[float, float], float]] = {}
    while len(answers) < len(links):
        waiting = [i for i in range(len(links)) if i not in answers]
        for k in kind.ready([links[i] for i in waiting], 10.0):
            i = waiting[k]
            answers[i] = (links[i].receive(), time.monotonic())
    starts = [answers[i][0][0] - sent[i] for i in range(len(links))]
    first = min(range(len(links)), key=lambda i: answers[i][0][1])
    return starts, answers[first][1] - answers[first][0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--busy-ms", default="0,80", help="work per call, comma-separated")
    parser.add_argument("--calls", type=int, default=60, help="rounds per transport and busy time")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import ray

    ray.init(
        address="local",
        _node_ip_address="127.0.0.1",
        num_cpus=args.workers,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
    )
    key = np.random.default_rng().bytes(32)
    actor_cls = ray.remote(num_cpus=1, concurrency_groups={"link": 1})(Timer)
    actors = [actor_cls.remote() for _ in range(args.workers)]
    addresses = ray.get([a.open_link.remote(key) for a in actors])
    serving = [a.serve.options(concurrency_group="link").remote() for a in actors]
    transports = {
        "socket": (SocketLink, [SocketLink(connect(addr, key)) for addr in addresses]),
        "ray": (RayLink, [RayLink(a) for a in actors]),
    }
    payload = b"x" * 3500
    results = {}
    for busy_ms in [float(b) for b in args.busy_ms.split(",")]:
        samples = {name: {"start_first": [], "start_last": [], "return": []} for name in transports}
        for kind, links in transports.values():  # warm-up
            one_round(links, kind, payload, busy_ms / 1000)
        for _ in range(args.calls):
            for name, (kind, links) in transports.items():
                starts, back = one_round(links, kind, payload, busy_ms / 1000)
                samples[name]["start_first"].append(starts[0])
                samples[name]["start_last"].append(starts[-1])
                samples[name]["return"].append(back)
        for name, s in samples.items():
            row = {k: round(statistics.median(v) * 1e3, 3) for k, v in s.items()}
            results[f"{name}, busy {busy_ms:g} ms"] = row
            print(
                f"{name:6} busy {busy_ms:4g} ms: start {row['start_first']:.3f} ms (first worker), "
                f"{row['start_last']:.3f} ms (last), return {row['return']:.3f} ms",
                flush=True,
            )
    for _, links in transports.values():
        for link in links:
            link.close()
    ray.get(serving)
    ray.shutdown()
    if args.json is not None:
        args.json.write_text(json.dumps({"workers": args.workers, "calls": args.calls, "median_ms": results}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
