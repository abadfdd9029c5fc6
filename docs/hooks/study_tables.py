"""The reproduction study's tables (docs/study.md), from the `results.json` that
`experiments/reproduce_poet.py` writes, in the order and with the cells of the `results.md`
it writes beside it (tests compare the two). Every number keeps its key in the JSON, as in
docs_tables.py; each generator takes the results file, so a test can build them from a
`--quick` study's.
"""

from __future__ import annotations

from collections.abc import Callable

from docs_tables import Cell, Source, Table, text

from envs.terrain import describe

STUDY = "experiments/results/reproduce_poet/results.json"
CRITERIA = ("stump_height", "pit_gap", "roughness")  # envs.terrain.DIFFICULTY_CRITERIA, in its order


def _num(src: Source, key: str, fmt: str, scale: float = 1.0, suffix: str = "") -> Cell:
    """`src.num`, or "n/a" where the value is None (a class without targets)."""
    return text("n/a") if src.get(key) is None else src.num(key, fmt, scale, suffix)


def study_classes(path: str = STUDY) -> Table:
    """Per class and control: runs and targets at the threshold, the best score, the env steps,
    and the mean difference at the target with its interval (descriptive: no p-value, as the
    study page says why)."""
    src = Source(path)
    seeds = len(src.get("poet"))
    table = Table(
        [
            "class",
            "POET seeds solving one",
            "targets",
            "control",
            f"runs >= {src.get('solved_threshold'):g}",
            "targets a run solved",
            "best",
            "env steps per run (median)",
            "mean difference (POET - control) [95% CI], descriptive",
        ],
        sources=[path],
    )
    for i, c in enumerate(src.get("classes")):
        k = f"classes.{i}."
        for j, (name, summary) in enumerate(c["controls"].items()):
            s, t = f"{k}controls.{name}.", summary["test"]
            head = [
                text(f"{c['class']} {c['name']}"),
                Cell(f"{c['seeds_solving']}/{seeds}", path, k + "seeds_solving", fmt="d"),
                src.num(k + "targets", "d"),
            ]
            diff = (
                text("n/a")
                if t["mean_difference"] is None
                else Cell(
                    f"{t['mean_difference']:.0f} [{t['ci95'][0]:.0f}, {t['ci95'][1]:.0f}]",
                    path,
                    s + "test.mean_difference",
                    fmt=".0f",
                )
            )
            table.rows.append(
                (head if j == 0 else [text("")] * 3)
                + [
                    text(name),
                    Cell(f"{summary['reached_threshold']}/{summary['runs']}", path, s + "reached_threshold", fmt="d"),
                    Cell(f"{t['control_targets_solved']}/{t['k']}", path, s + "test.control_targets_solved", fmt="d"),
                    _num(src, s + "best", ".0f"),
                    _num(src, s + "env_steps_median", ".1f", 1e-6, " M"),
                    diff,
                ]
            )
    return table


def study_targets(path: str = STUDY) -> Table:
    """Per target: when POET solved it, its lineage and the controls' budget, POET's score and
    each control's best (runs solving), and where direct ES's noise reached its floor."""
    src = Source(path)
    controls = list(src.get("classes.0.controls"))
    table = Table(
        [
            "POET seed",
            "class",
            "target",
            "solved at",
            "lineage steps",
            "budget",
            "POET",
            *(f"{n}: best (solved)" for n in controls),
            "direct: noise at floor from",
        ],
        sources=[path],
    )
    for i, t in enumerate(src.get("targets")):
        k = f"targets.{i}."
        cells = [
            src.num(k + "poet_seed", "d"),
            src.num(k + "class", "d"),
            text(f"{t['env_id'][:8]} ({describe(t['params'])})"),
            src.num(k + "solved_iteration", ",d"),
            src.num(k + "lineage_steps", ",d"),
            src.num(k + "budget", ",d"),
            src.num(k + "poet_score", ".0f"),
        ]
        for n in controls:
            runs = t["controls"].get(n, [])
            solved = f" ({sum(r['solved'] for r in runs)}/{len(runs)})"
            if runs:
                best = max(range(len(runs)), key=lambda r: runs[r]["score"])
                cells.append(src.num(f"{k}controls.{n}.{best}.score", ".0f", suffix=solved))
            else:
                cells.append(text("n/a" + solved))
        floors = [r.get("sigma_floor_iteration") for r in t["controls"].get("direct", [])]
        cells.append(text(", ".join("never" if f is None else str(f) for f in floors)))
        table.rows.append(cells)
    return table


def study_climb(path: str = STUDY) -> Table:
    """Per POET seed and class: envs created / solved, and when the first was solved."""
    src = Source(path)
    names = list(src.get("poet.0.classes"))
    table = Table(["POET seed", *names], sources=[path])
    for i, s in enumerate(src.get("poet")):
        row = [src.num(f"poet.{i}.seed", "d")]
        for name, c in s["classes"].items():
            first = f" (first at {c['first_solved_iteration']:,})" if c["solved"] else ""
            row.append(
                Cell(f"{c['created']} / {c['solved']}{first}", path, f"poet.{i}.classes.{name}.created", fmt="d")
            )
        table.rows.append(row)
    return table


def study_climb_maxima(path: str = STUDY) -> Table:
    """Per POET seed, at each quarter of the run: envs solved and the largest of each criterion
    among them."""
    src = Source(path)
    table = Table(
        ["POET seed", "by iteration", "envs solved", *(f"largest {c.replace('_', ' ')}" for c in CRITERIA)],
        sources=[path],
    )
    for i, s in enumerate(src.get("poet")):
        every = max(1, s["iterations"] // 4)
        for j, r in enumerate(s["climb"]):
            if (r["iteration"] + 1) % every:
                continue
            k = f"poet.{i}.climb.{j}."
            table.rows.append(
                [
                    src.num(f"poet.{i}.seed", "d"),
                    text(f"{r['iteration'] + 1:,}"),  # the row holds the last iteration before this one
                    src.num(k + "envs_solved", "d"),
                    *(_num(src, f"{k}max_{c}", ".1f") for c in CRITERIA),
                ]
            )
    return table


def study_annecs(path: str = STUDY) -> Table:
    """ANNECS of each POET and Enhanced POET run at every mark of the study's ANNECS part."""
    src = Source(path)
    names = [k for k in src.get("annecs.table.0") if k != "iteration"]
    table = Table(["iteration", *names], sources=[path])
    for i, _ in enumerate(src.get("annecs.table")):
        k = f"annecs.table.{i}."
        table.rows.append([src.num(k + "iteration", ",d"), *(src.num(k + n, "d") for n in names)])
    return table


def study_annecs_cost(path: str = STUDY) -> Table:
    """Each ANNECS run's hours and env steps, in all and by phase."""
    src = Source(path)
    cost = src.get("annecs.cost")
    phases = sorted({p for c in cost.values() for p in c["by_phase"]})
    table = Table(
        ["arm", "hours", *(f"{p} (hours)" for p in phases), "M env steps", *(f"{p} (M env steps)" for p in phases)],
        sources=[path],
    )
    for name, c in cost.items():
        k = f"annecs.cost.{name}."
        table.rows.append(
            [text(name), src.num(k + "seconds", ".2f", 1 / 3600)]
            + [src.num(f"{k}by_phase.{p}", ".2f", 1 / 3600) if p in c["by_phase"] else text("0.00") for p in phases]
            + [src.num(k + "env_steps", ",.0f", 1e-6)]
            + [src.num(f"{k}env_steps_by_phase.{p}", ",.0f", 1e-6) if p in c["by_phase"] else text("0") for p in phases]
        )
    return table


def study_reproduce_cost(path: str = STUDY) -> Table:
    """Each ANNECS run's env steps in its reproduce phase per block of the ANNECS table's
    iterations: Enhanced POET's PATA-EC grows with the archive."""
    src = Source(path)
    cost, every = src.get("annecs.cost"), src.get("annecs.every")
    per_block = {name: c["env_steps_by_phase_per_block"].get("reproduce", []) for name, c in cost.items()}
    table = Table(["iterations", *(f"{name}: reproduce (M env steps)" for name in cost)], sources=[path])
    for j in range(max(map(len, per_block.values()), default=0)):
        row = [text(f"{j * every + 1:,}-{(j + 1) * every:,}")]
        for name, steps in per_block.items():
            key = f"annecs.cost.{name}.env_steps_by_phase_per_block.reproduce.{j}"
            row.append(src.num(key, ".1f", 1e-6) if j < len(steps) else text("n/a"))
        table.rows.append(row)
    return table


def study_parts(path: str = STUDY) -> Table:
    """The seconds of every part of the study: its runs' own seconds, summed."""
    src = Source(path)
    table = Table(["part", "hours (its runs' own seconds, summed)"], sources=[path])
    for name in src.get("parts_seconds"):
        table.rows.append([text(name), src.num(f"parts_seconds.{name}", ".2f", 1 / 3600)])
    return table


TABLES: dict[str, Callable[..., Table]] = {
    f.__name__: f
    for f in (
        study_classes,
        study_targets,
        study_climb,
        study_climb_maxima,
        study_annecs,
        study_annecs_cost,
        study_reproduce_cost,
        study_parts,
    )
}
