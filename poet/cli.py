"""Command line: `poet run [CONFIG] ...`, `poet resume DIR [--iterations N]`, `poet report DIR`,
`poet score DIR --levels NAME`, `poet render DIR`, `poet profile DIR`."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from envs import EnvParamError
from poet.config import ConfigError, check_overrides
from poet.errors import EvaluationFailed, RunInterrupted, StorageError
from poet.version import __version__

QUICKSTART = Path("experiments") / "quickstart.yaml"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        self.exit(2, f"poet: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `poet` command."""
    parser = _Parser(prog="poet", description="POET and Enhanced POET runs.")
    parser.add_argument("--version", action="version", version=f"poet {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run_commands(sub)
    _add_analysis_commands(sub)
    return parser


def _add_run_commands(sub: argparse._SubParsersAction) -> None:
    """`poet run` and `poet resume`."""
    r = sub.add_parser("run", help="start a new run")
    r.add_argument("config", nargs="?", help=f"YAML config (default: {QUICKSTART})")
    r.add_argument("--out", help="run directory to create (default: runs/<config>-<time>)")
    r.add_argument("--iterations", type=int, help="number of POET iterations")
    r.add_argument("--seed", type=int, help="root seed")
    r.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set reproduction.every=50 (repeatable)",
    )
    r.add_argument("--backend", choices=["ray", "inprocess"], help="where rollouts run (default: ray)")
    r.add_argument("--address", help="join this Ray cluster instead of starting a local one (e.g. auto)")
    r.add_argument("--workers", type=int, help="Ray workers (default: the CPUs Ray sees)")
    r.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or phase lines (the run directory and the closing line still print)",
    )
    rs = sub.add_parser("resume", help="continue a run from its newest checkpoint")
    rs.add_argument("run_dir", help="the run directory")
    rs.add_argument(
        "--iterations",
        type=int,
        help="new total number of iterations (default: the run's; saved in the run's config.yaml)",
    )
    rs.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a setting that does not change results, e.g. --set ray.runtime_env=... (this resume only)",
    )
    rs.add_argument("--backend", choices=["ray", "inprocess"], help="where rollouts run, this resume only")
    rs.add_argument("--address", help="Ray cluster to continue on (ray.address), this resume only")
    rs.add_argument("--workers", type=int, help="pool size (ray.workers), this resume only")
    rs.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or phase lines (the run directory and the closing line still print)",
    )


def _add_analysis_commands(sub: argparse._SubParsersAction) -> None:
    """`poet report`, `compare`, `render` and `profile`: they read run directories."""
    rp = sub.add_parser("report", help="write PNG figures and index.html of a run")
    rp.add_argument("run_dir", help="the run directory")
    rp.add_argument("--out", help="folder for the report (default: DIR/report)")
    rp.add_argument(
        "--score",
        action="store_true",
        help="also score the active agents: on every env (cross-evaluation, kept in DIR/analysis) and on "
        "100 levels of each paper class (robustness curves); prints the cost first",
    )
    cp = sub.add_parser("compare", help="PNG figures and index.html putting several runs side by side")
    cp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="two or more run directories")
    cp.add_argument("--out", help="folder for the figures (default: runs/compare-<date-time>)")
    cp.add_argument(
        "--score",
        action="store_true",
        help="also score every run's active agents on the same 100 levels of each paper class (robustness "
        "curves, by curriculum)",
    )
    sc = sub.add_parser("score", help="a run's final agents on a named level set (dcd's test envs, POET-Rose)")
    sc.add_argument("run_dir", help="the run directory")
    sc.add_argument("--levels", required=True, help="the family's level set, e.g. dcd, dcd-extended, poet-rose")
    sc.add_argument("--episodes", type=int, help="episodes per level, each on its own course (default: the set's, 100)")
    sc.add_argument("--all", action="store_true", help="every agent's row, not the best agent per level")
    sc.add_argument("--out", help="folder for score-NAME.json and score-NAME.png (default: DIR/analysis)")
    rd = sub.add_parser("render", help="animated GIF of one episode of a pair's agent")
    rd.add_argument("run_dir", help="the run directory")
    rd.add_argument("--pair", required=True, help="pair id of the agent (active or archived), e.g. p3")
    rd.add_argument(
        "--env", dest="env_id", help="env id to run on, or a pair id for that pair's env (default: the pair's own env)"
    )
    rd.add_argument("--seed", type=int, default=0, help="episode seed, for envs not pinned to one course (default: 0)")
    rd.add_argument("--out", required=True, help="GIF file to write (.gif); prints the episode's return and length")
    pf = sub.add_parser("profile", help="figure of the whole course of one env (terrain families)")
    pf.add_argument("run_dir", help="the run directory")
    pf.add_argument(
        "--env",
        dest="env_id",
        required=True,
        help="env id (see the envs table or `poet report`), or a pair id for its own env, e.g. p3",
    )
    pf.add_argument("--seed", type=int, default=0, help="course seed, for envs not pinned to one course (default: 0)")
    pf.add_argument("--out", required=True, help="figure to write: .png, .svg or .pdf")


def _report(args: argparse.Namespace) -> int:
    from poet.analysis.report import write_report

    print(write_report(args.run_dir, args.out, score=args.score))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from poet.analysis.compare import write_comparison

    out = write_comparison(
        args.run_dirs, args.out, say=lambda note: print(f"poet: note: {note}", file=sys.stderr), score=args.score
    )
    print(out)
    return 0


def _score(args: argparse.Namespace) -> int:
    from poet.analysis import load_run
    from poet.analysis.level_sets import write_scores

    run = load_run(args.run_dir)
    table, paths = write_scores(run, args.levels, args.episodes, "all" if args.all else "best", args.out)
    print(table, end="")
    print("\n".join(str(p) for p in paths))
    return 0


def _render(args: argparse.Namespace) -> int:
    from poet.analysis.render import Episode, check_gif_out, render_gif

    check_gif_out(args.out)  # before the run is read: a wrong extension costs nothing

    def done(ep: Episode) -> None:
        whose = "its own env" if args.env_id is None else "env"
        print(
            f"episode: {args.pair} on {whose} {ep.env_id} (course seed {ep.seed}): "
            f"return {ep.ret:.2f} over {ep.length} steps",
            flush=True,
        )

    print(render_gif(args.run_dir, args.pair, args.out, env_id=args.env_id, seed=args.seed, on_episode=done))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from poet.analysis.render import render_profile_png

    print(render_profile_png(args.run_dir, args.env_id, args.out, seed=args.seed))
    return 0


# Flags that say where a run goes (`run` and `resume` take them), and the config field each sets.
POOL_FLAGS = (("backend", "evaluation.backend"), ("address", "ray.address"), ("workers", "ray.workers"))


def _given(args: argparse.Namespace, flags: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """(as written on the command line, `key=value`) for each flag of `flags` that was set."""
    return [
        (f"--{flag} {getattr(args, flag)}", f"{key}={getattr(args, flag)}")
        for flag, key in flags
        if getattr(args, flag) is not None
    ]


def _check_sets(args: argparse.Namespace, flags: tuple[tuple[str, str], ...]) -> list[str]:
    """The overrides of `--set` and of `flags`, checked before any file is read: each `--set` is
    KEY=VALUE and no field is given twice. Returns them as `key=value` strings."""
    sets = getattr(args, "overrides", [])
    for text in sets:
        if "=" not in text:
            hint = ""
            # `--set iterations 5`: argparse gave `iterations` to --set and took `5` for CONFIG
            after = [
                args.argv[i + 2]
                for i in range(len(args.argv) - 2)
                if args.argv[i] == "--set" and args.argv[i + 1] == text
            ]
            if getattr(args, "config", None) is not None and args.config in after:
                hint = f"; the {args.config!r} after it was taken for CONFIG (the config file): write --set {text}={args.config}"
            raise ConfigError(
                f"--set {text!r}: expected key=value, e.g. --set {text}=VALUE"
                if not hint
                else f"--set {text!r}: expected key=value{hint}"
            )
    given = [*((f"--set {text}", text) for text in sets), *_given(args, flags)]
    check_overrides(sorted(given, key=lambda item: _position(args.argv, *item[0].split(" ", 1))))  # in typed order
    return [text for _, text in given]


def _position(argv: list[str], flag: str, value: str) -> int:
    """Where `flag value` (or `flag=value`) stands in argv (its end if not found as such)."""
    for i, word in enumerate(argv):
        if (word == flag and argv[i + 1 : i + 2] == [value]) or word == f"{flag}={value}":
            return i
    return len(argv)


def _resume(args: argparse.Namespace) -> int:
    from poet.runtime.runner import resume

    if args.iterations is not None and args.iterations < 0:
        raise ConfigError(f"--iterations: must be >= 0, got {args.iterations}")
    overrides = _check_sets(args, POOL_FLAGS)
    resume(args.run_dir, iterations=args.iterations, progress=False if args.quiet else None, overrides=overrides)
    return 0


def _run(args: argparse.Namespace) -> int:
    from poet.runtime.runner import run

    overrides = _check_sets(args, (("iterations", "iterations"), ("seed", "seed"), *POOL_FLAGS))
    config = args.config
    if config is None:
        if not QUICKSTART.exists():
            raise ConfigError(f"no CONFIG given and {QUICKSTART} not found; run from the project root or name a config")
        config = str(QUICKSTART)
    run(config, out=args.out, overrides=overrides, progress=False if args.quiet else None)
    return 0


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A warning to the user as one line in their terms (not Python's file:line form)."""
    print(f"poet: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `poet` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # for messages that need the order of the words (`--set KEY VALUE`)
    with warnings.catch_warnings():
        warnings.showwarning = _warning_line
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "resume":
            return _resume(args)
        if args.command == "report":
            return _report(args)
        if args.command == "compare":
            return _compare(args)
        if args.command == "score":
            return _score(args)
        if args.command == "render":
            return _render(args)
        if args.command == "profile":
            return _profile(args)
    except (ConfigError, EnvParamError) as exc:
        print(f"poet: error: {exc}", file=sys.stderr)
        return 2
    except (EvaluationFailed, StorageError) as exc:
        print(f"poet: error: {exc}", file=sys.stderr)
        return 1
    except RunInterrupted as exc:
        print(f"poet: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("poet: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
