"""What a run pays outside its phases to keep its state checkpointable, on a real run's state.

    python benchmarks/checkpoint_capture.py CHECKPOINT [--repeats 5] [--json out.json]

Loads the checkpoint folder `CHECKPOINT` (for example
`runs/reproduce/enhanced_poet-seed0/checkpoints/ckpt-000010000`, an archive of about 800
agents whose score cache holds 1.5 M scores) and times, best of `--repeats`:

- `boundary`: the work after every iteration: the score cache forgets agents that no longer
  exist (`keep_agents` over the living pairs' agent ids, as the orchestrator calls it), then
  `checkpoint.capture` copies the state for a checkpoint a stop may need;
- `write` and `read`: the score cache's part of writing a checkpoint (its ids as JSON, its
  columns into an `.npz`) and of reading it back into a cache; `checkpoint` and `load`: a
  whole checkpoint written (`checkpoint.write`, into a temporary folder) and read back;
- `lookup`: PATA-EC's score lookup of the scores it finds cached (of every admitted env x
  every agent, as `pata_ec_novelty` asks at each reproduction), through `Scorer.score`.

Beside each, the same work on the layout before this one, rebuilt here from the same scores:
one flat dict keyed by (agent, env), rebuilt to forget agents and copied at every boundary,
written as sorted JSON triples, and every job's agent hashed in the lookup. Nothing here
is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

from poet.evaluation.policy_store import weights_key
from poet.runtime import checkpoint
from poet.scoring import Scorer


def best(fn: Callable[[], object], repeats: int) -> float:
    """The shortest of `repeats` timed calls, in seconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    snapshot = checkpoint.load(args.checkpoint)
    state = snapshot.state
    pop, cache = state.population, state.scores
    # what capture and write read: the run's state, and the record tables (none here)
    records = types.SimpleNamespace(row_counts=dict, sync=lambda: None)
    ctx = types.SimpleNamespace(state=state, records=records)
    flat = {(a, e): s for a, by_env in cache.by_agent.items() for e, s in by_env.items()}

    def boundary() -> None:
        cache.keep_agents({p.agent_id for p in pop.all_pairs})
        checkpoint.capture(ctx)  # type: ignore[arg-type]

    def flat_boundary() -> None:
        alive = {p.agent_id for p in pop.all_pairs}
        kept = {k: v for k, v in flat.items() if k[0] in alive}
        dict(kept)  # the capture's copy

    def write(folder: Path) -> None:
        ids, columns = checkpoint.score_columns(cache.snapshot())
        (folder / "ids.json").write_text(json.dumps(ids))
        np.savez(folder / "columns.npz", **columns)

    def read(folder: Path) -> None:
        with np.load(folder / "columns.npz", allow_pickle=False) as npz:
            checkpoint.read_score_cache(json.loads((folder / "ids.json").read_text()), {k: npz[k] for k in npz.files})

    def flat_write(folder: Path) -> None:
        triples = [[a, e, s] for (a, e), s in sorted(flat.items())]
        (folder / "flat.json").write_text(json.dumps({"score_cache": triples}, sort_keys=True))

    def flat_read(folder: Path) -> None:
        {(a, e): float(s) for a, e, s in json.loads((folder / "flat.json").read_text())["score_cache"]}

    def flat_lookup(jobs: list) -> np.ndarray:  # every job's agent hashed, then looked up
        keys = [(weights_key(t), e.id) for t, e in jobs]
        assert all(flat.get(k) is not None for k in keys)
        return np.array([flat.get(k) for k in keys], dtype=np.float64)

    agents = pop.all_pairs
    jobs = [(a.theta, env) for env in pop.admitted_envs for a in agents]
    scorer = Scorer(evaluator=None, seeds=None, episodes=1, max_steps=1, errors=None, cache=cache)  # type: ignore[arg-type]
    cached = [(t, e) for t, e in jobs if cache.get(weights_key(t), e.id) is not None]

    captured = checkpoint.capture(ctx)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        written = checkpoint.write(ctx, captured, run_dir, "", keep=1)  # type: ignore[arg-type]
        size = sum(f.stat().st_size for f in written.iterdir())
        write(run_dir)
        flat_write(run_dir)
        cache_size = (run_dir / "columns.npz").stat().st_size + (run_dir / "ids.json").stat().st_size
        flat_size = (run_dir / "flat.json").stat().st_size
        seconds = {
            "boundary": best(boundary, args.repeats),
            "flat_boundary": best(flat_boundary, args.repeats),
            "write": best(lambda: write(run_dir), args.repeats),
            "flat_write": best(lambda: flat_write(run_dir), args.repeats),
            "read": best(lambda: read(run_dir), args.repeats),
            "flat_read": best(lambda: flat_read(run_dir), args.repeats),
            "checkpoint": best(lambda: checkpoint.write(ctx, captured, run_dir, "", keep=1), args.repeats),  # type: ignore[arg-type]
            "load": best(lambda: checkpoint.load(written), args.repeats),
            "lookup": best(lambda: scorer.score(cached), args.repeats),
            "flat_lookup": best(lambda: flat_lookup(cached), args.repeats),
        }
    result = {
        "checkpoint": str(args.checkpoint),
        "iteration": snapshot.iteration,
        "active": len(pop.active),
        "archived": len(pop.archive),
        "cached_scores": len(flat),
        "lookup_jobs": len(cached),
        "checkpoint_mb": round(size / 1e6, 1),
        "score_cache_mb": round(cache_size / 1e6, 1),
        "flat_score_cache_mb": round(flat_size / 1e6, 1),
        "repeats": args.repeats,
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
        "flat_over_this": {
            k: round(seconds[f"flat_{k}"] / seconds[k], 1) for k in ("boundary", "write", "read", "lookup")
        },
    }
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
