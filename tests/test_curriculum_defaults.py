"""Every curriculum built with no options runs with its authors' shipped settings.

Each row: a setting, the value in the authors' script, and where it is written there
(uber-research/poet: branch `original_poet` for POET and its controls, `master` for Enhanced
POET; facebookresearch/dcd at commit 72991be for ACCEL, robust PLR and DR). The run's
length and seed (`n_iterations`, `master_seed`) are not algorithm settings and are left out:
`experiments/poet_bipedal.yaml` and `enhanced_poet_bipedal.yaml` set them as the scripts do.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from functools import cache

import pytest
import yaml

import poet
from poet.config import RunConfig
from poet.curricula import CURRICULA, curriculum_defaults
from poet.parts import RunParts, check_parts
from poet.trainers import TRAINERS
from tests.conftest import ROOT

RUN_SH = "run_poet_local.sh"
ES_AND_POET = [
    ("trainer.name", "es", "master.py:32 (MultiESOptimizer: poet_distributed/es.py)"),
    ("trainer.es.population", 512, f"{RUN_SH}:19-20 (--batch_size=1 x --batches_per_chunk=256, mirrored)"),
    ("trainer.es.sigma", 0.1, f"{RUN_SH}:24 --noise_std"),
    ("trainer.es.sigma_decay", 0.999, f"{RUN_SH}:25 --noise_decay"),
    ("trainer.es.sigma_floor", 0.01, f"{RUN_SH}:26 --noise_limit"),
    ("trainer.es.lr", 0.01, f"{RUN_SH}:16 --learning_rate"),
    ("trainer.es.lr_decay", 0.9999, f"{RUN_SH}:17 --lr_decay"),
    ("trainer.es.lr_floor", 0.001, f"{RUN_SH}:18 --lr_limit"),
    ("trainer.es.l2", 0.01, "master.py:50 --l2_coeff"),
    ("trainer.es.beta1", 0.9, "poet_distributed/optimizers.py:49 Adam(beta1=0.9)"),
    ("trainer.es.beta2", 0.999, "poet_distributed/optimizers.py:49 Adam(beta2=0.999)"),
    ("trainer.es.adam_eps", 1e-8, "poet_distributed/optimizers.py:49 Adam(epsilon=1e-08)"),
    ("trainer.es.propose_with", "adam", f"{RUN_SH}:32 --propose_with_adam"),
    ("trainer.es.episodes_per_perturbation", 1, f"{RUN_SH}:19 --batch_size=1"),
    ("policy.hidden", [40, 40], "poet_distributed/niches/box2d/env.py:42 layers=[40, 40]"),
    ("policy.activation", "tanh", "poet_distributed/niches/box2d/env.py:43 activation='tanh'"),
    ("policy.init", "reference", f"{RUN_SH}:15 --init=random (model.py get_random_model_params)"),
    ("evaluation.max_steps", 2000, "poet_distributed/niches/box2d/model.py:175 max_episode_length = 2000"),
    ("evaluation.eval_episodes", 5, f"{RUN_SH}:21-22 --eval_batch_size=1 x --eval_batches_per_step=5"),
    ("evaluation.course", "fixed", "master.py:68 --stochastic off"),
    ("reproduction.threshold", 200, "master.py:61 --repro_threshold"),
    ("reproduction.mc_lower", 25, "master.py:59 --mc_lower"),
    ("reproduction.mc_upper", 340, "master.py:60 --mc_upper"),
    ("reproduction.max_children", 8, "poet_distributed/poet_algo.py adjust_envs_niches(max_children=8)"),
    ("reproduction.max_admitted", 1, "poet_distributed/poet_algo.py adjust_envs_niches(max_admitted=1)"),
    ("reproduction.novelty_k", 5, "poet_distributed/poet_algo.py:299 compute_novelty_vs_archive(k=5)"),
    ("transfer.every", 25, f"{RUN_SH}:33 --steps_before_transfer=25"),
]
POET = [
    *ES_AND_POET,
    ("reproduction.every", 200, f"{RUN_SH}:31,33 --adjust_interval=8 x --steps_before_transfer=25"),
    ("reproduction.capacity", 25, f"{RUN_SH}:30 --max_num_envs=25"),
]
ENHANCED_POET = [
    *ES_AND_POET,
    ("reproduction.every", 150, f"{RUN_SH}:31,33 --adjust_interval=6 x --steps_before_transfer=25"),
    ("reproduction.capacity", 40, f"{RUN_SH}:30 --max_num_envs=40"),
]

JSON = "train_scripts/grid_configs/bipedal/bipedal_{}.json"  # the same line numbers in all three
DCD_PPO = [
    ("trainer.name", "ppo", "algos/ppo.py (the student's PPO)"),
    ("trainer.ppo.n_steps", 2048, ':10 "num_steps"'),
    ("trainer.ppo.epochs", 5, ':11 "ppo_epoch"'),
    ("trainer.ppo.minibatch_size", 1024, ':8,10,12 16 x 2048 / "num_mini_batch" 32'),
    ("trainer.ppo.lr", 3e-4, ':22 "lr"'),
    ("trainer.ppo.max_grad_norm", 0.5, ':23 "max_grad_norm"'),
    ("trainer.ppo.gamma", 0.99, ':24 "gamma"'),
    ("trainer.ppo.gae_lambda", 0.9, ':25 "gae_lambda"'),
    ("trainer.ppo.vf_coef", 0.5, ':26 "value_loss_coef"'),
    ("trainer.ppo.ent_coef", 0.001, ':27 "entropy_coef"'),
    ("trainer.ppo.value_loss", "huber", ':29 "clip_value_loss": false -> algos/ppo.py:115 F.smooth_l1_loss'),
    ("trainer.ppo.clip", 0.2, ':30 "clip_param"'),
    ("trainer.ppo.normalize_rewards", True, ':13 "normalize_returns"'),
    ("trainer.ppo.reward_clip", 10.0, "envs/wrappers/vec_normalize.py:21 cliprew=10."),
    ("trainer.ppo.normalize_obs", False, "util/__init__.py:193 VecNormalize(ob=False)"),
    ("trainer.ppo.scoring_updates_stats", True, "envs/wrappers/vec_normalize.py:42 ret_rms.update in every step"),
    ("trainer.ppo.advantage_norm", "batch", "algos/ppo.py:67-69 over the whole rollout, std + 1e-5"),
    ("trainer.ppo.adam_eps", 1e-5, "arguments.py:30-32 --eps"),
    ("trainer.ppo.beta1", 0.9, "algos/ppo.py:48 optim.Adam defaults"),
    ("trainer.ppo.beta2", 0.999, "algos/ppo.py:48 optim.Adam defaults"),
    ("trainer.ppo.init_log_std", 0.0, "models/walker_models.py:57 AddBias(torch.zeros(num_outputs))"),
    ("trainer.ppo.value_hidden", [64, 64], "models/walker_models.py:346,359-361 MLPBase critic, hidden_size=64"),
    ("trainer.ppo.updates_per_iteration", 1, "envs/runners/adversarial_runner.py run(): one update per cycle"),
    ("policy.hidden", [64, 64], "models/walker_models.py:346,355-357 MLPBase actor, hidden_size=64"),
    ("policy.activation", "tanh", "models/walker_models.py:356 nn.Tanh()"),
    ("policy.init", "orthogonal", "models/walker_models.py:352-357 orthogonal_, gain sqrt 2; :53-55 mean head, gain 1"),
    ("trainer.ppo.value_init", "orthogonal", "models/walker_models.py:352-363 critic and critic_linear, gain sqrt 2"),
    ("evaluation.max_steps", 2000, "envs/bipedalwalker/adversarial.py:573 max_episode_steps=2000"),
]
LEVEL_BUFFER = [
    ("curriculum.num_levels", 16, ':8 "num_processes"'),
    ("curriculum.min_fill", 0.5, ':42 "level_replay_rho"'),
    ("curriculum.buffer_size", 1000, ':43 "level_replay_seed_buffer_size"'),
    ("curriculum.staleness_coef", 0.5, ':44 "staleness_coef"'),
    ("curriculum.temperature", 0.1, "arguments.py:232-234 --level_replay_temperature"),
    ("curriculum.buffer_priority", "replay_support", "arguments.py --level_replay_seed_buffer_priority"),
    ("scores", "positive_value_loss", ':39 "level_replay_strategy"'),
]
REFERENCE = {
    "poet": POET,
    "enhanced_poet": ENHANCED_POET,
    "direct": POET,  # the POET paper's control: ES with POET's settings
    "path": POET,
    "accel": [
        *DCD_PPO,
        *LEVEL_BUFFER,
        ("curriculum.replay_prob", 0.9, ':41 "level_replay_prob"'),
        ("curriculum.edits", 3, ':50 "num_edits"'),
    ],
    "robust_plr": [*DCD_PPO, *LEVEL_BUFFER, ("curriculum.replay_prob", 0.5, ':41 "level_replay_prob"')],
    "dr": [*DCD_PPO, ("curriculum.num_levels", 16, ':8 "num_processes"')],
}
SOURCE = {
    "poet": "uber-research/poet@original_poet",
    "enhanced_poet": "uber-research/poet@master",
    "direct": "uber-research/poet@original_poet",
    "path": "uber-research/poet@original_poet",
    "accel": f"facebookresearch/dcd {JSON.format('accel')}",
    "robust_plr": f"facebookresearch/dcd {JSON.format('robust_plr')}",
    "dr": f"facebookresearch/dcd {JSON.format('dr')}",
}


NEEDED = {"path": {"target": {"roughness": 4.0, "pit_gap": [], "stump_height": []}}}  # no default can exist


@cache
def built(curriculum: str) -> RunParts:
    """The run's parts for a config that names only the curriculum (and what it cannot do without)."""
    return check_parts(
        poet.load_config(data={"curriculum": curriculum, "curriculum_options": NEEDED.get(curriculum, {})})
    )


def setting(parts: RunParts, key: str) -> object:
    """A setting as the run uses it: the built trainer's and curriculum's options, else the config."""
    head, _, rest = key.partition(".")
    if key == "scores":  # what a level is scored by, as the built curriculum decides with this trainer
        return "positive_value_loss" if parts.trainer_cls.__dict__.get("regret") else "maxmc"
    if head == "curriculum":
        return getattr(parts.curriculum.options, rest)
    if head == "trainer" and "." in rest:
        name, field = rest.split(".")
        assert parts.cfg.trainer.name == name, f"{key}: the run trains with {parts.cfg.trainer.name}"
        return getattr(parts.trainer_options, field)
    value: object = parts.cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


CASES = [(name, key, value, where) for name, rows in REFERENCE.items() for key, value, where in rows]


@pytest.mark.parametrize(("curriculum", "key", "value", "where"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_curriculum_with_no_options_runs_its_authors_setting(curriculum, key, value, where):
    got = setting(built(curriculum), key)
    assert got == value, f"{curriculum} {key}: {got!r}, but {SOURCE[curriculum]} {where} says {value!r}"


def test_every_registered_curriculum_is_checked_against_its_authors_script():
    assert set(REFERENCE) == set(CURRICULA) == set(SOURCE)


def test_a_setting_the_config_gives_wins_over_the_curriculums_default():
    cfg = poet.load_config(
        data={"curriculum": "accel", "trainer": {"ppo": {"n_steps": 400}}, "policy": {"hidden": [8]}},
        overrides=["reproduction.capacity=6"],
    )
    assert cfg.trainer.section("ppo")["n_steps"] == 400 and cfg.trainer.section("ppo")["gae_lambda"] == 0.9
    assert (cfg.trainer.name, cfg.policy.hidden, cfg.reproduction.capacity) == ("ppo", [8], 6)
    assert poet.load_config(data={"curriculum": "accel"}, overrides=["trainer.name=es"]).trainer.name == "es"


@pytest.mark.parametrize("curriculum, space", [("accel", "dcd"), ("robust_plr", "dcd"), ("dr", "dcd"), ("poet", None)])
def test_dcds_curricula_on_a_family_with_stairs_take_dcds_8d_level_space(curriculum, space):
    # dcd's bipedal_accel.json, bipedal_dr.json and bipedal_robust_plr.json train on the 8-D
    # BipedalWalker-Adversarial(-Easy)-v0 (stairs included); POET keeps its own 5-D levels
    pytest.importorskip("Box2D")
    cfg = poet.load_config(
        data={"curriculum": curriculum, "env": {"family": "bipedal", "options": {"max_episode_steps": 50}}}
    )
    assert cfg.env.options.get("level_space") == space and cfg.env.options["max_episode_steps"] == 50
    given = poet.load_config(
        data={"curriculum": curriculum, "env": {"family": "bipedal", "options": {"level_space": "poet"}}}
    )
    assert given.env.options["level_space"] == "poet"  # a config's own choice wins
    # the terrain family has dcd's levels too (its stairs analogue): the same default there
    assert poet.load_config(data={"curriculum": curriculum}).env.options.get("level_space") == space


def test_a_runconfig_object_gets_its_curriculums_defaults_where_unset():
    cfg = RunConfig(curriculum="enhanced_poet")
    assert cfg.reproduction.capacity is None  # unset until loaded
    loaded = poet.load_config(data=cfg.to_dict())
    assert (loaded.reproduction.every, loaded.reproduction.capacity) == (150, 40)


def test_the_defaults_never_share_a_list_with_a_run():
    cfg = poet.load_config(data={"curriculum": "accel"})
    cfg.policy.hidden.append(1)
    cfg.trainer.section("ppo")["value_hidden"].append(1)
    assert curriculum_defaults("accel")["policy"]["hidden"] == [64, 64]
    assert curriculum_defaults("accel")["trainer"]["ppo"]["value_hidden"] == [64, 64]


def test_a_saved_config_holds_every_resolved_default(tmp_path):
    from poet.config import load_config as load_plain
    from poet.config import save_config

    cfg = poet.load_config(data={"curriculum": "poet"})
    save_config(cfg, tmp_path / "config.yaml")
    again = load_plain(tmp_path / "config.yaml")  # no curriculum defaults: the file has them all
    assert again == cfg
    unset = [f.name for f in dataclasses.fields(again.reproduction) if getattr(again.reproduction, f.name) is None]
    assert unset == [] and again.trainer.name == "es" and again.policy.hidden == [40, 40]


# ------------------------------------------------------------------ the docs against the code
DOCS = ROOT / "docs" / "curricula"
PAGES = {
    "poet.md": "poet",
    "enhanced-poet.md": "enhanced_poet",
    "accel.md": "accel",
    "robust-plr.md": "robust_plr",
    "dr.md": "dr",
    "direct.md": "direct",
    "path.md": "path",
}
KEY = re.compile(r"^`([\w.]+)`$")
VALUE = re.compile(r"^`([^`]*)`|^(-?[\d.]+(?:e-?\d+)?)\b")


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each markdown table of a page: its header cells and its rows' cells (lower-case header)."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1].replace("|", "").strip()) <= {"-", ":"}:
            if i > 0 and lines[i - 1].startswith("|"):
                continue
            head = [c.strip().lower() for c in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split(" | ")])
            out.append((head, rows))
    return out


def number_or_yaml(text: str) -> object:
    """A value as the docs write it (YAML 1.1 reads `1e-08` as a string; it is a number)."""
    try:
        return float(text) if re.fullmatch(r"-?\d+(\.\d*)?e-?\d+", text) else yaml.safe_load(text)
    except ValueError:
        return text


def documented_defaults(page: str) -> list[tuple[str, object]]:
    """(setting, value) of every row of the page's tables with a `default` column: a `setting`
    table names config keys, an `option` table the curriculum's options."""
    found = []
    for head, rows in tables((DOCS / page).read_text()):
        column = next((i for i, h in enumerate(head) if h.startswith("default")), None)
        if column is None or head[0] not in ("setting", "option"):
            continue
        for row in rows:
            key, value = KEY.match(row[0]), VALUE.match(row[column])
            if key and value:
                name = key.group(1) if head[0] == "setting" else f"curriculum.{key.group(1)}"
                found.append((name, number_or_yaml(value.group(1) or value.group(2))))
    return found


DOCUMENTED = [(page, key, value) for page in PAGES for key, value in documented_defaults(page)]


@pytest.mark.parametrize(("page", "key", "value"), DOCUMENTED, ids=[f"{p}-{k}" for p, k, _ in DOCUMENTED])
def test_a_default_the_docs_state_is_the_codes(page, key, value):
    got = setting(built(PAGES[page]), key)
    assert got == value, f"docs/curricula/{page} says {key} defaults to {value!r}; the code runs {got!r}"


def test_the_docs_state_every_default_checked_against_the_authors():
    stated = {(PAGES[p], k) for p, k, _ in DOCUMENTED}
    for name, rows in REFERENCE.items():
        home = {"enhanced_poet": "poet", "direct": "poet", "path": "poet", "robust_plr": "accel", "dr": "accel"}
        missing = [
            k for k, _, _ in rows if k != "scores" and (name, k) not in stated and (home.get(name), k) not in stated
        ]
        assert not missing, f"{name}: no docs page states the default of {missing}"


def test_a_changed_value_fails_the_docs_check(tmp_path, monkeypatch):
    page = (
        (DOCS / "poet.md")
        .read_text()
        .replace("| `reproduction.capacity` | `25` |", "| `reproduction.capacity` | `20` |")
    )
    (tmp_path / "poet.md").write_text(page)
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    (key, value) = next((k, v) for k, v in documented_defaults("poet.md") if k == "reproduction.capacity")
    assert value == 20 != setting(built("poet"), key)


def departure_options(page: str) -> list[str]:
    """Every option a departures table names (its `option` column): `key` or `key: value`."""
    found = []
    for head, rows in tables((DOCS / page).read_text()):
        if head[0] != "rule" or head[-1] != "option":
            continue
        for row in rows:
            found += re.findall(r"`([^`]+)`", row[-1])
    return found


DEPARTURES = [(page, option) for page in PAGES for option in departure_options(page)]


@pytest.mark.parametrize(("page", "option"), DEPARTURES, ids=[f"{p}-{o}" for p, o in DEPARTURES])
def test_an_option_a_departure_names_exists_and_takes_its_value(page, option):
    name = PAGES[page]
    key, _, value = (part.strip() for part in option.partition(":"))
    if "." not in key:  # one of the curriculum's options
        options = built(name).curriculum.options
        assert key in {f.name for f in dataclasses.fields(options)}, f"{page}: {name} has no option {key!r}"
        key = f"curriculum_options.{key}"
    given = {"curriculum": name, "curriculum_options": NEEDED.get(name, {})}
    if key.startswith("env.options."):  # the pages name the bipedal family's options
        pytest.importorskip("Box2D")
        given["env"] = {"family": "bipedal"}
    sets = [f"{key}={value}"] if value else []
    if value and key.startswith("trainer."):
        sets.append(f"trainer.name={key.split('.')[1]}")
    parts = check_parts(poet.load_config(data=given, overrides=sets))  # a ConfigError names a bad key or value
    head, *rest = key.split(".")
    if head == "trainer" and len(rest) == 2:  # an option of that trainer
        assert rest[1] in {f.name for f in dataclasses.fields(TRAINERS[rest[0]].Options)}, f"{page}: no {key}"
    elif key.startswith("env.options."):  # a family option: the family took it
        assert parts.cfg.env.options[key.removeprefix("env.options.")] == value, f"{page}: {key}"
    elif head != "curriculum_options":
        value_of: object = parts.cfg
        for part in key.split("."):
            assert hasattr(value_of, part), f"{page}: no setting {key}"
            value_of = getattr(value_of, part)


# ------------------------------------------------------------------ shipped configs
NOT_ALGORITHM = ("seed", "iterations", "progress", "env.", "evaluation.test_every", "evaluation.backend", "checkpoint.")


def flat(data: dict, prefix: str = "") -> dict[str, object]:
    """A nested mapping as dotted keys (a trainer's section and curriculum_options stay whole)."""
    out = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in ("curriculum_options", "trainer.es", "trainer.ppo"):
            out.update(flat(value, name + "."))
        elif isinstance(value, dict):
            out.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            out[name] = value
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_a_shipped_config_says_where_it_departs_from_its_curriculums_defaults(path):
    """Every algorithm setting a shipped config gives another value than its curriculum's
    default is named in the file's comments (which value, and why)."""
    cfg = poet.load_config(path)
    given = flat(yaml.safe_load(path.read_text()))
    defaults = flat(
        poet.load_config(
            data={
                "curriculum": cfg.curriculum,
                **({"curriculum_options": NEEDED[cfg.curriculum]} if cfg.curriculum in NEEDED else {}),
            }
        ).to_dict()
    )
    comments = "\n".join(line.partition("#")[2] for line in path.read_text().splitlines() if "#" in line)
    trainer = f"trainer.{cfg.trainer.name}."
    silent = [
        key
        for key, value in given.items()
        if not key.startswith(NOT_ALGORITHM)
        and not (key.startswith("trainer.") and key.count(".") == 2 and not key.startswith(trainer))
        and key in defaults
        and defaults[key] != value
        and key.rpartition(".")[2] not in comments
    ]
    assert not silent, f"{path.name} departs from {cfg.curriculum}'s defaults without a word on {silent}"


def test_resume_takes_the_saved_config_as_it_is(tmp_path, monkeypatch):
    """A run saved before a curriculum default changed resumes with what it was saved with."""
    from poet.config import load_config as load_as_saved
    from poet.config import save_config
    from poet.runtime import runner

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    old = {"trainer": {"name": "ppo", "ppo": {"n_steps": 64}}, "policy": {"hidden": [8], "init": "reference"}}
    old["reproduction"] = {"every": 150, "capacity": 20}  # as an earlier version saved an ACCEL run
    save_config(load_as_saved(data={"curriculum": "accel", **old}), run_dir / "config.yaml")
    (run_dir / "run.json").write_text("{}")

    class Stop(Exception):
        pass

    def checked(cfg):
        seen.append(cfg)
        raise Stop

    seen: list = []
    monkeypatch.setattr(runner, "check_parts", checked)
    with pytest.raises(Stop):
        poet.resume(run_dir)
    assert seen[0].trainer.section("ppo") == {"n_steps": 64} and seen[0].policy.init == "reference"
    assert (seen[0].reproduction.every, seen[0].reproduction.capacity) == (150, 20)
