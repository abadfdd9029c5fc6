"""RunConfig: defaults, YAML loading, `--set` overrides, save/reload, and every config error.

Also `poet.parts.check_parts`, which resolves family, policy and trainer before any work.
All in-process and fast: nothing here trains or rolls out an episode.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from poet.config import ConfigError, RunConfig, apply_override, check_overrides, parse_override, save_config, validate
from poet.parts import check_parts, load_config

REPO_ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = REPO_ROOT / "experiments" / "quickstart.yaml"


# ---------------------------------------------------------------- defaults and loading


def test_defaults_build_and_validate():
    from poet.config import load_config as load_unresolved

    assert load_unresolved() == RunConfig() == validate(RunConfig())  # the curriculum's settings unset
    cfg = load_config()  # and filled from POET's defaults
    assert cfg.curriculum == "poet"
    assert cfg.env.family == "terrain" and cfg.env.options == {}
    assert cfg.policy.hidden == [40, 40] and cfg.policy.activation == "tanh"
    assert cfg.trainer.name == "es"
    assert cfg.reproduction.mc_lower <= cfg.reproduction.mc_upper


def test_quickstart_yaml_loads():
    cfg = load_config(QUICKSTART)
    assert cfg.curriculum == "poet"
    assert cfg.seed == 0
    assert cfg.iterations == 120
    assert cfg.solved_threshold == 230.0 and isinstance(cfg.solved_threshold, float)
    assert cfg.env.family == "terrain"
    assert cfg.policy.hidden == [40, 40]
    assert cfg.evaluation.max_steps == 400 and cfg.evaluation.eval_episodes == 3
    assert cfg.trainer.name == "es"
    assert cfg.trainer.options == {} and cfg.trainer.section("es") == {"population": 32, "noise_table_size": 4_000_000}
    assert cfg.trainer.section("ppo")["n_steps"] == 400
    rp = cfg.reproduction
    assert (rp.every, rp.max_admitted, rp.capacity, rp.mc_lower, rp.mc_upper) == (20, 2, 8, 25.0, 340.0)
    assert cfg.transfer.every == 10
    # sections the file leaves out keep their defaults
    assert cfg.transfer.fine_tune is True
    assert cfg.evaluation.on_error == "stop"


@pytest.mark.parametrize("text", ["", "# nothing but a comment\n\n"])
def test_an_empty_config_file_is_an_error_naming_it(tmp_path, text):
    # it used to run on the built-in defaults (1000 iterations of everything unset) without a word
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"^config file '.*empty\.yaml' holds no settings .*quickstart\.yaml"):
        load_config(path)


@pytest.mark.parametrize(
    "text, key, lines",
    [
        ("seed: 1\niterations: 3\nseed: 2\n", "seed", (1, 3)),
        ("trainer:\n  es:\n    population: 8\n    sigma: 0.1\n    population: 16\n", "trainer.es.population", (3, 5)),
        ("reproduction:\n  every: 5\nreproduction:\n  capacity: 4\n", "reproduction", (1, 3)),
        ("env:\n  options:\n    spec: {params: {a: 1, a: 2}}\n", "env.options.spec.params.a", (3, 3)),
    ],
)
def test_a_key_given_twice_in_yaml_names_the_key_and_both_lines(tmp_path, text, key, lines):
    # plain YAML keeps the last value: one of the two settings would be dropped without a word
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    where = f"both on line {lines[0]}" if lines[0] == lines[1] else f"lines {lines[0]} and {lines[1]}"
    assert str(info.value) == f"config file {str(path)!r}: key {key!r} is given twice ({where}); keep one"


def test_yaml_merge_keys_may_still_override_what_they_merge(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text(
        "env:\n  options: &o {course_length: 20, max_episode_steps: 100}\n"
        "curriculum_options:\n  <<: *o\n  course_length: 30\n"
    )
    cfg = load_config(path)
    assert cfg.curriculum_options == {"course_length": 30, "max_episode_steps": 100}


@pytest.mark.parametrize(
    "given, message",
    [
        ([("--set a=1", "a=1"), ("--set a=2", "a=2")], "a: given twice on the command line (--set a=1 and --set a=2)"),
        (
            [("--iterations 5", "iterations=5"), ("--set iterations=6", "iterations=6")],
            "iterations: given twice on the command line (--iterations 5 and --set iterations=6)",
        ),
        (
            [
                ("--set trainer.es={sigma: 0.1}", "trainer.es={sigma: 0.1}"),
                ("--set trainer.es.population=4", "trainer.es.population=4"),
            ],
            "trainer.es.population: given twice on the command line (--set trainer.es={sigma: 0.1} and "
            "--set trainer.es.population=4)",
        ),
    ],
)
def test_a_field_given_twice_on_the_command_line_names_both(given, message):
    with pytest.raises(ConfigError) as info:
        check_overrides(given)
    assert str(info.value).startswith(message)


def test_distinct_fields_on_the_command_line_are_fine():
    check_overrides(
        [
            ("--set trainer.es.population=4", "trainer.es.population=4"),
            ("--set trainer.es.sigma=0.1", "trainer.es.sigma=0.1"),
            ("--seed 3", "seed=3"),
        ]
    )


# ---------------------------------------------------------------- overrides


@pytest.mark.parametrize(
    "text, parts, value",
    [
        ("iterations=7", ["iterations"], 7),
        ("reproduction.threshold=150.5", ["reproduction", "threshold"], 150.5),
        ("transfer.fine_tune=false", ["transfer", "fine_tune"], False),
        ("progress=true", ["progress"], True),
        ("policy.hidden=[8, 16]", ["policy", "hidden"], [8, 16]),
        ("curriculum=enhanced_poet", ["curriculum"], "enhanced_poet"),
        ("trainer.options={population: 8}", ["trainer", "options"], {"population": 8}),
        (" seed = 3", ["seed"], 3),  # whitespace around key and value
        ("trainer.name=pkg.mod:Cls=x", ["trainer", "name"], "pkg.mod:Cls=x"),  # split at the first '='
        ("env.family=", ["env", "family"], ""),
    ],
)
def test_parse_override_reads_values_as_yaml(text, parts, value):
    got_parts, got_value = parse_override(text)
    assert got_parts == parts
    assert got_value == value
    assert type(got_value) is type(value)


def test_overrides_set_typed_values_and_nested_keys():
    cfg = load_config(
        overrides=[
            "iterations=7",
            "seed=11",
            "solved_threshold=200",
            "progress=false",
            "reproduction.threshold=150.5",
            "reproduction.every=50",
            "transfer.fine_tune=false",
            "policy.hidden=[8, 16]",
            "policy.activation=relu",
            "evaluation.on_error=score_as_failure",
            "evaluation.failure_score=-5",
        ]
    )
    assert cfg.iterations == 7 and cfg.seed == 11
    assert cfg.solved_threshold == 200.0 and isinstance(cfg.solved_threshold, float)
    assert cfg.progress is False
    assert cfg.reproduction.threshold == 150.5 and cfg.reproduction.every == 50
    assert cfg.transfer.fine_tune is False
    assert cfg.policy.hidden == [8, 16] and cfg.policy.activation == "relu"
    assert cfg.evaluation.on_error == "score_as_failure" and cfg.evaluation.failure_score == -5.0


def test_overrides_apply_on_top_of_yaml_and_later_ones_win():
    cfg = load_config(QUICKSTART, overrides=["reproduction.every=5", "iterations=4", "iterations=9"])
    assert cfg.reproduction.every == 5
    assert cfg.iterations == 9
    assert cfg.reproduction.capacity == 8  # untouched quickstart value


def test_override_into_trainer_section_merges_with_yaml():
    cfg = load_config(QUICKSTART, overrides=["trainer.es.population=8"])
    assert cfg.trainer.section("es") == {"population": 8, "noise_table_size": 4_000_000}


def test_a_built_in_trainers_options_come_from_its_own_section():
    from poet.parts import check_parts

    parts = check_parts(load_config(QUICKSTART, overrides=["trainer.es.population=8"]))
    assert (parts.trainer_options.population, parts.trainer_options.noise_table_size) == (8, 4_000_000)
    ppo = check_parts(load_config(QUICKSTART, overrides=["trainer.name=ppo", "trainer.ppo.epochs=3"]))
    assert type(ppo.trainer_options).__name__ == "PPOOptions"
    assert (ppo.trainer_options.n_steps, ppo.trainer_options.epochs) == (400, 3)


@pytest.mark.parametrize("name", ["es", "ppo"])
def test_trainer_options_beside_a_built_in_trainer_is_an_error_naming_its_section(name):
    # trainer.options used to win over trainer.es: `--set trainer.es.population=16` on the paper
    # configs (which set trainer.options) silently ran with 512
    with pytest.raises(
        ConfigError,
        match=rf"^trainer\.options: options of the registered trainer '{name}' go under "
        rf"trainer\.{name} .*got population",
    ):
        check_parts(load_config(QUICKSTART, overrides=[f"trainer.name={name}", "trainer.options.population=8"]))


def test_a_user_trainer_takes_trainer_options_and_ignores_the_built_in_sections():
    from poet.parts import check_parts

    name = "experiments.random_search:RandomSearchTrainer"
    parts = check_parts(load_config(QUICKSTART, overrides=[f"trainer.name={name}", "trainer.options.candidates=3"]))
    assert parts.trainer_options.candidates == 3  # the quickstart's trainer.es section stays, unused
    assert load_config(QUICKSTART, overrides=[f"trainer.name={name}"]).trainer.section("es")["population"] == 32


def test_a_trainer_in_the_registry_gets_a_section_typed_by_its_own_options(monkeypatch):
    """The registry is the one list of trainers: registering one gives it `trainer.<name>`,
    built and checked from the Options class declared next to it, with nothing in the config."""
    from poet.trainers import TRAINERS

    @dataclasses.dataclass
    class Options:
        rate: float = 0.1

        def check(self) -> list[tuple[str, str]]:
            return [] if self.rate > 0 else [("rate", f"must be > 0, got {self.rate}")]

    class Mine:
        def init_state(self): ...
        def reset_state(self): ...
        def step(self): ...

    Mine.Options = Options
    monkeypatch.setitem(TRAINERS, "mine", Mine)
    parts = check_parts(load_config(QUICKSTART, overrides=["trainer.name=mine", "trainer.mine.rate=0.5"]))
    assert parts.trainer_cls is Mine and parts.trainer_options == Options(rate=0.5)
    for override, message in [
        ("trainer.mine.rate=-1", "trainer.mine.rate: must be > 0, got -1.0"),
        ("trainer.mine.rte=1", "trainer.mine.rte: "),
        ("trainer.mine.rate=fast", "trainer.mine.rate: expected a number"),
        (
            "trainer.mnie.rate=1",
            "trainer.mnie: unknown key (known in trainer: name, options, and a section for "
            "each registered trainer: es, ppo, mine)",
        ),
    ]:
        with pytest.raises(ConfigError) as err:
            check_parts(load_config(QUICKSTART, overrides=["trainer.name=es", override]))
        assert str(err.value).startswith(message), (override, str(err.value))


def test_override_into_env_options_creates_the_section():
    cfg = load_config(QUICKSTART, overrides=["env.options.course_length=30"])
    assert cfg.env.options == {"course_length": 30}
    assert cfg.env.family == "terrain"


def test_dict_section_overrides_reach_the_parts():
    from poet.parts import check_parts

    cfg = load_config(QUICKSTART, overrides=["trainer.es.population=8", "env.options.course_length=30"])
    parts = check_parts(cfg)
    assert parts.trainer_options.population == 8
    assert parts.trainer_options.noise_table_size == 4_000_000
    assert parts.family.course_length == 30.0


def test_overrides_on_defaults_create_missing_sections():
    cfg = load_config(overrides=["trainer.es.population=8", "env.options.course_length=30"])
    assert cfg.trainer.section("es") == {"population": 8}
    assert cfg.env.options == {"course_length": 30}


def test_apply_override_creates_nested_dicts():
    data: dict = {"a": {"b": 1}}
    apply_override(data, ["a", "c", "d"], 2)
    assert data == {"a": {"b": 1, "c": {"d": 2}}}


def test_data_mapping_is_deep_merged_over_yaml():
    cfg = load_config(QUICKSTART, data={"trainer": {"es": {"population": 16}}, "seed": 4})
    assert cfg.trainer.section("es") == {"population": 16, "noise_table_size": 4_000_000}
    assert cfg.seed == 4


# ---------------------------------------------------------------- save and reload


def test_save_and_reload_quickstart_is_equal(tmp_path):
    cfg = load_config(QUICKSTART)
    path = tmp_path / "config.yaml"
    save_config(cfg, path)
    assert load_config(path) == cfg


def test_save_and_reload_non_default_config_is_equal(tmp_path):
    cfg = load_config(
        QUICKSTART,
        overrides=[
            "curriculum=enhanced_poet",
            "seed=123",
            "iterations=3",
            "progress=false",
            "solved_threshold=199.5",
            "policy.hidden=[16, 8, 4]",
            "policy.activation=relu",
            "evaluation.on_error=score_as_failure",
            "evaluation.failure_score=-12.25",
            "trainer.es.population=8",
            "trainer.es.sigma=0.05",
            "env.options.course_length=30.5",
            "transfer.fine_tune=false",
            "reproduction.mc_lower=-10",
        ],
    )
    path = tmp_path / "config.yaml"
    save_config(cfg, path)
    again = load_config(path)
    assert again == cfg
    assert again.to_dict() == cfg.to_dict()
    # saving the reloaded config gives the same file
    path2 = tmp_path / "config2.yaml"
    save_config(again, path2)
    assert path2.read_text() == path.read_text()


def test_to_dict_is_a_plain_copy():
    cfg = load_config(QUICKSTART)
    d = cfg.to_dict()
    assert d["trainer"]["es"]["population"] == 32
    d["trainer"]["es"]["population"] = 2
    d["policy"]["hidden"].append(1)
    assert cfg.trainer.section("es")["population"] == 32
    assert cfg.policy.hidden == [40, 40]
    assert set(d) == {f.name for f in dataclasses.fields(RunConfig)}


# ---------------------------------------------------------------- config errors

CONFIG_ERRORS = [
    # (id, data, overrides, field named in the message, another word the message must hold)
    ("unknown_top_level_key", {"iterationz": 3}, [], "iterationz", "unknown key"),
    ("unknown_nested_key", {"reproduction": {"evry": 3}}, [], "reproduction.evry", "unknown key"),
    ("negative_local_wave_steps", {}, ["ray.local_wave_steps=-1"], "ray.local_wave_steps", ">= 0"),
    ("driver_share_not_a_bool", {}, ["ray.driver_share=sometimes"], "ray.driver_share", "true or false"),
    ("unknown_nested_key_override", None, ["reproduction.evry=3"], "reproduction.evry", "unknown key"),
    ("string_for_int", {"seed": "abc"}, [], "seed", "integer"),
    ("float_for_int", {"iterations": 3.0}, [], "iterations", "integer"),
    ("float_for_int_override", None, ["reproduction.every=2.5"], "reproduction.every", "integer"),
    ("bool_for_int", {"evaluation": {"max_steps": True}}, [], "evaluation.max_steps", "integer"),
    ("list_for_number", {"solved_threshold": [1, 2]}, [], "solved_threshold", "number"),
    ("list_for_int", {"iterations": [3]}, [], "iterations", "integer"),
    ("bool_for_number", {"reproduction": {"threshold": False}}, [], "reproduction.threshold", "number"),
    ("string_for_bool", {"transfer": {"fine_tune": "yes please"}}, [], "transfer.fine_tune", "true or false"),
    ("int_for_bool", {"progress": 1}, [], "progress", "true or false"),
    ("bad_list_item", {"policy": {"hidden": [40, "x"]}}, [], "policy.hidden[1]", "integer"),
    ("scalar_for_list", {"policy": {"hidden": 40}}, [], "policy.hidden", "list"),
    ("scalar_for_section", {"reproduction": 5}, [], "reproduction", "mapping"),
    ("scalar_for_options", {"trainer": {"options": "fast"}}, [], "trainer.options", "mapping"),
    ("unknown_mode", {"mode": "poet"}, [], "mode", "unknown"),
    ("literal_activation", {"policy": {"activation": "sigmoid"}}, [], "policy.activation", "sigmoid"),
    ("literal_on_error", {"evaluation": {"on_error": "ignore"}}, [], "evaluation.on_error", "ignore"),
    (
        "mc_reversed",
        {"reproduction": {"mc_lower": 300, "mc_upper": 100}},
        [],
        "reproduction.mc_lower",
        "reproduction.mc_upper",
    ),
    ("capacity_1", {"reproduction": {"capacity": 1}}, [], "reproduction.capacity", "2"),
    ("negative_iterations", {"iterations": -1}, [], "iterations", ">= 0"),
    ("negative_iterations_override", None, ["iterations=-3"], "iterations", ">= 0"),
    ("negative_seed", {"seed": -1}, [], "seed", ">= 0"),
    ("transfer_every_0", {"transfer": {"every": 0}}, [], "transfer.every", ">= 1"),
    ("reproduction_every_0", {"reproduction": {"every": 0}}, [], "reproduction.every", ">= 1"),
    ("max_steps_0", {"evaluation": {"max_steps": 0}}, [], "evaluation.max_steps", "in [1, "),
    ("eval_episodes_0", {"evaluation": {"eval_episodes": 0}}, [], "evaluation.eval_episodes", ">= 1"),
    ("hidden_empty", {"policy": {"hidden": []}}, [], "policy.hidden", "layer"),
    ("hidden_zero_width", {"policy": {"hidden": [40, 0]}}, [], "policy.hidden", ">= 1"),
    ("nan_float", {"solved_threshold": float("nan")}, [], "solved_threshold", "finite"),
    ("inf_override", None, ["reproduction.threshold=.inf"], "reproduction.threshold", "finite"),
    ("neg_inf_override", None, ["reproduction.mc_lower=-.inf"], "reproduction.mc_lower", "finite"),
    ("malformed_override", None, ["foo"], "foo", "key=value"),
    ("override_empty_key_part", None, ["reproduction..every=3"], "reproduction..every", "malformed"),
    ("override_into_scalar", {"seed": 0}, ["seed.x=1"], "seed.x", "seed is not a section"),
    ("override_into_unset_scalar", None, ["seed.x=1"], "seed", "integer"),
    ("override_bad_yaml_value", None, ["policy.hidden=[1, 2"], "policy.hidden", "YAML"),
]


@pytest.mark.parametrize(
    "data, overrides, field, word", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS]
)
def test_config_error_names_the_field(data, overrides, field, word):
    with pytest.raises(ConfigError) as info:
        load_config(data=data, overrides=overrides)
    msg = str(info.value)
    assert field in msg
    assert word in msg
    assert "\n" not in msg


def test_override_into_scalar_of_a_yaml_file_names_the_section():
    # quickstart sets seed: 0, so seed.x cannot descend into it
    with pytest.raises(ConfigError, match=r"seed.x.*seed is not a section"):
        load_config(QUICKSTART, overrides=["seed.x=1"])


def test_override_into_list_is_rejected():
    with pytest.raises(ConfigError, match=r"policy\.hidden"):
        load_config(QUICKSTART, overrides=["policy.hidden.0=3"])


def test_nan_in_yaml_file_is_rejected(tmp_path):
    path = tmp_path / "nan.yaml"
    path.write_text("reproduction:\n  mc_upper: .nan\n")
    with pytest.raises(ConfigError, match=r"reproduction\.mc_upper.*finite"):
        load_config(path)


def test_wrong_types_from_a_yaml_file(tmp_path):
    path = tmp_path / "types.yaml"
    path.write_text("iterations: '10'\n")
    with pytest.raises(ConfigError, match=r"^iterations: expected an integer, got '10'"):
        load_config(path)


def test_huge_int_for_float_field_is_a_config_error():
    with pytest.raises(ConfigError, match="solved_threshold"):
        load_config(data={"solved_threshold": 10**400})


# ---------------------------------------------------------------- file-level errors


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist") as info:
        load_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(info.value)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="is not a file"):
        load_config(tmp_path)


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("curriculum: poet\nseed: 0\n  iterations: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert "broken.yaml" in msg and "line 3" in msg and "not valid YAML" in msg


def test_yaml_list_at_top_level(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- mode\n- seed\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


def test_binary_file_is_rejected(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00\x81\x00")
    with pytest.raises(ConfigError, match="binary.yaml"):
        load_config(path)


# ---------------------------------------------------------------- check_parts


def _parts(*overrides: str, data=None):
    from poet.parts import check_parts

    return check_parts(load_config(QUICKSTART, overrides=list(overrides), data=data))


def test_check_parts_accepts_quickstart():
    from poet.trainers import ESOptions, ESTrainer

    parts = _parts()
    assert parts.trainer_cls is ESTrainer
    assert isinstance(parts.trainer_options, ESOptions)
    assert parts.trainer_options.population == 32
    assert parts.family.name == "terrain"
    assert parts.spec.num_params <= parts.trainer_options.noise_table_size


def test_check_parts_unknown_family_lists_registered():
    import envs

    with pytest.raises(ConfigError) as info:
        _parts("env.family=nope")
    msg = str(info.value)
    assert msg.startswith("env.family")
    assert "'nope'" in msg
    for name in envs.FAMILIES:
        assert name in msg


@pytest.mark.parametrize(
    "override, word",
    [
        ("env.options.course_length=-5", "course_length"),
        ("env.options.course_length=long", "course_length"),
        ("env.options.foo=1", "foo"),
    ],
)
def test_check_parts_bad_env_option(override, word):
    with pytest.raises(ConfigError) as info:
        _parts(override)
    msg = str(info.value)
    assert msg.startswith("env.options")
    assert word in msg


@pytest.mark.parametrize(
    "name, word",
    [
        ("nope", "unknown trainer 'nope'"),
        ("poet.trainers:NoSuchTrainer", "NoSuchTrainer"),
        ("no_such_module_xyz:Trainer", "no_such_module_xyz"),
        ("poet.trainers.es:ESOptions", "Trainer protocol"),
    ],
)
def test_check_parts_bad_trainer_name(name, word):
    with pytest.raises(ConfigError) as info:
        _parts(f"trainer.name={name}")
    msg = str(info.value)
    assert msg.startswith("trainer.name")
    assert word in msg


@pytest.mark.parametrize(
    "override, field, word",
    [
        ("trainer.es.population=many", "trainer.es.population", "integer"),
        ("trainer.es.population=7", "trainer.es.population", "even"),
        ("trainer.es.population=0", "trainer.es.population", "even"),
        ("trainer.es.sigma=0", "trainer.es.sigma", "> 0"),
        ("trainer.es.popsize=8", "trainer.es.popsize", "es has no option"),
        ("trainer.es.noise_table_size=100", "trainer.es.noise_table_size", "smaller than the policy"),
        ("trainer.ppo.epochs=many", "trainer.ppo.epochs", "integer"),  # a type error names its section too
        # the unselected trainer's section is checked too
        ("trainer.ppo.n_stesp=8", "trainer.ppo.n_stesp", "ppo has no option"),
        ("trainer.ppo.clip=0", "trainer.ppo.clip", "> 0"),
        ("trainer.ppo.gamma=1.5", "trainer.ppo.gamma", "[0, 1]"),
        ("trainer.ppo.value_hidden=[]", "trainer.ppo.value_hidden", "at least one layer"),
    ],
)
def test_check_parts_bad_trainer_option(override, field, word):
    with pytest.raises(ConfigError) as info:
        _parts(override)
    msg = str(info.value)
    assert msg.startswith(field)
    assert word in msg


def test_check_parts_noise_table_size_exactly_the_policy_is_fine():
    n = _parts().spec.num_params
    assert _parts(f"trainer.es.noise_table_size={n}").trainer_options.noise_table_size == n
    with pytest.raises(ConfigError, match="noise_table_size"):
        _parts(f"trainer.es.noise_table_size={n - 1}")


@pytest.mark.parametrize(
    "override, field",
    [("evaluation.max_steps=100000000000000000000", "evaluation.max_steps"), ("ray.workers=1000000000", "ray.workers")],
)
def test_sizes_beyond_sane_bounds_are_refused_before_any_work(override, field):
    with pytest.raises(ConfigError, match=rf"^{field}: must be in \[1, "):
        load_config(overrides=[override])


def test_a_bad_spec_yaml_is_one_clear_error(tmp_path):
    from poet.parts import check_parts

    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nparams: [unclosed\n")
    cfg = load_config(overrides=["env.family=gym", f"env.options={{spec: {spec}}}"])
    with pytest.raises(ConfigError, match=r"env.options: GymFamily spec .*bad.yaml is not valid YAML \(line 3"):
        check_parts(cfg)


def test_unknown_curriculum_and_bad_options_are_one_line_errors():
    from poet.parts import check_parts

    with pytest.raises(
        ConfigError,
        match="curriculum: unknown curriculum 'acel'; registered: accel, direct, dr, enhanced_poet, path, poet, robust_plr",
    ):
        check_parts(load_config(data={"curriculum": "acel"}))
    with pytest.raises(ConfigError, match="curriculum: cannot import curriculum module 'no_such_pkg.mod'"):
        check_parts(load_config(data={"curriculum": "no_such_pkg.mod:Thing"}))
    with pytest.raises(
        ConfigError,
        match=r"^curriculum_options\.buffer_size: poet has no option 'buffer_size'; "
        r"it takes no options$",
    ):
        check_parts(load_config(data={"curriculum_options": {"buffer_size": 4}}))


# Option errors used to be raw TypeErrors ("accel does not take them (... unexpected keyword ...)").
@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"curriculum": "accel", "curriculum_options": {"buffer_sz": 4}},
            "curriculum_options.buffer_sz: accel has no option 'buffer_sz'; its options: buffer_size=1000, "
            "replay_prob=0.9, min_fill=0.5, ",
        ),
        (
            {"curriculum": "experiments.ladder_curriculum:LadderCurriculum", "curriculum_options": {"rung": 3}},
            "curriculum_options.rung: experiments.ladder_curriculum:LadderCurriculum has no option 'rung'; its options: "
            "rungs=4, threshold=200.0, edits=2",
        ),
        (
            {"env": {"options": {"course_len": 20}}},
            "env.options.course_len: family 'terrain' has no option 'course_len'; its options: course_length=80.0, "
            "max_episode_steps=600",
        ),
        (
            {"env": {"family": "bipedal_cppn", "options": {"operator": "reference"}}},
            "env.options.operator: family 'bipedal_cppn' has no option 'operator'; its options: max_episode_steps=2000, "
            "operators='reference', ",
        ),
        (
            {"env": {"family": "mypkg.families:make_family", "options": {"length": 20}}},
            "env.options.length: family 'mypkg.families:make_family' has no option 'length'; its options: "
            "course_length=20.0",
        ),
    ],
)
def test_an_unknown_option_is_named_with_the_known_ones_and_their_defaults(data, message, monkeypatch):
    from poet.parts import check_parts

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.syspath_prepend(str(REPO_ROOT / "tests" / "userpkg"))
    with pytest.raises(ConfigError) as info:
        check_parts(load_config(data=data))
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    "curriculum, options, message",
    [
        (
            "experiments.ladder_curriculum:LadderCurriculum",
            {"rungs": 0},
            "curriculum_options.rungs: must be >= 1, got 0",
        ),
        ("accel", {"replay_prob": 2.0}, "curriculum_options.replay_prob: must be in [0, 1], got 2.0"),
        ("accel", {"edits": 0}, "curriculum_options.edits: must be >= 1, got 0"),
        ("robust_plr", {"temperature": 0}, "curriculum_options.temperature: must be > 0, got 0.0"),
        ("robust_plr", {"buffer_size": "big"}, "curriculum_options.buffer_size: expected an integer"),
        ("robust_plr", {"score": "regret"}, "curriculum_options.score: expected one of 'auto'"),
        ("path", {"stages": 1, "target": {"roughness": 2.0}}, "curriculum_options.stages: must be >= 2, got 1"),
        ("path", {}, "curriculum_options.target: give the target env's values"),
    ],
)
def test_curriculum_options_are_typed_and_checked_like_the_config(curriculum, options, message):
    """Each curriculum's options are a dataclass: a wrong type or a broken bound names the field."""
    from poet.parts import check_parts

    with pytest.raises(ConfigError) as info:
        check_parts(load_config(data={"curriculum": curriculum, "curriculum_options": options}))
    assert str(info.value).startswith(message), str(info.value)


def test_a_curriculum_gets_its_options_as_its_dataclass():
    from poet.curricula.plr import ACCELOptions
    from poet.parts import check_parts

    parts = check_parts(load_config(data={"curriculum": "accel", "curriculum_options": {"buffer_size": 8}}))
    assert parts.curriculum.options == ACCELOptions(buffer_size=8) and parts.curriculum.edits == 3


def test_where_only_settings_are_the_ones_a_resume_may_change_and_the_checkpoints_page_names():
    from poet.config import changes_results, where_only_settings

    settings = where_only_settings()
    assert settings == [
        "iterations",
        "progress",
        "evaluation.backend",
        "evaluation.batch_rows",
        "ray.*",
        "checkpoint.*",
        "logging.*",
    ]
    assert not changes_results("ray.workers") and not changes_results("logging") and changes_results("rayx.workers")
    assert changes_results("evaluation.max_steps") and changes_results("trainer.es.lr")
    page = (Path(__file__).resolve().parents[1] / "docs" / "checkpoints.md").read_text()
    assert all(f"`{s}`" in page for s in settings if s != "iterations")


@pytest.mark.parametrize(
    "section,name,value,why",
    [
        ("ray", "transport", "socket", "chunks always travel as Ray actor tasks"),
        ("evaluation", "run_ahead", True, "each wave runs when it is asked for"),
    ],
)
def test_a_retired_where_only_setting_is_dropped_with_a_note_so_old_runs_resume(section, name, value, why):
    kept = {"ray": ("workers", 2), "evaluation": ("max_steps", 300)}[section]
    with pytest.warns(UserWarning, match=rf"{section}.{name} is no longer read \({why}"):
        cfg = load_config(data={section: {name: value, kept[0]: kept[1]}})
    saved = cfg.to_dict()[section]
    assert saved[kept[0]] == kept[1] and name not in saved
