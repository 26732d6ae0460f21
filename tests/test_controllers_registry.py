"""make / make_from_config / register: names, arguments and plug-ins."""

import json

import jax
import ml_collections
import numpy as np
import pytest

import controllers


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match=r"unknown controller 'nope'.*'oracle', 'pi'"):
        controllers.make("nope")


def test_unknown_argument_names_controller_and_argument():
    with pytest.raises(TypeError, match=r"controller 'proportional' got unknown .*\['kp'\]"):
        controllers.make("proportional", kp=1.0)


def test_bad_values_fail_at_make():
    """Each message names the policy (proportional's and pi's shared settings did not); NaN
    is no value (predictive with jump or persist NaN never moved; static's sizes gave a bare
    "cannot convert float NaN to integer")."""
    with pytest.raises(ValueError, match="^proportional: deadband must be >= 0"):
        controllers.make("proportional", deadband=-0.1)
    with pytest.raises(ValueError, match="^pi: every must be an int >= 0"):
        controllers.make("pi", every=1.5)
    with pytest.raises(ValueError, match="pi: ki must be a number in"):
        controllers.make("pi", ki=3.0)
    for key in ("jump", "persist"):
        with pytest.raises(ValueError, match=f"^predictive: {key} must be >= 0"):
            controllers.make("predictive", **{key: float("nan")})
    with pytest.raises(ValueError, match="^static: sizes must be nonnegative integers"):
        controllers.make("static", sizes=(float("nan"), 8.0))


def test_make_from_config_drops_other_policies_keys():
    config = ml_collections.ConfigDict(
        {
            "name": "proportional",
            "plugin": "",
            "b_min": 0,
            "b_max": 0,
            "deadband": 0.3,
            "kp": 0.5,  # a pi key: dropped for proportional
            "sizes": (),  # a static key: dropped
        }
    )
    controller = controllers.make_from_config(config)
    state = controller.init(4, 128)
    np.testing.assert_array_equal(state.sizes, [32, 32, 32, 32])
    config.name = "static"
    config.sizes = (0, 8, 8, 112)
    np.testing.assert_array_equal(
        controllers.make_from_config(config).init(4, 128).sizes, [0, 8, 8, 112]
    )


def test_make_from_config_rejects_keys_nobody_knows():
    with pytest.raises(ValueError, match=r"key 'deadbnad' is accepted by no registered"):
        controllers.make_from_config({"name": "pi", "deadbnad": 0.1})
    with pytest.raises(ValueError, match="needs a 'name'"):
        controllers.make_from_config({"deadband": 0.1})


def test_the_example_plugin_vmaps_over_its_gain():
    """docs/controllers.md: a policy built inside a vmapped function takes traced gains; the
    example's own check had raised TracerBoolConversionError."""
    import jax
    import jax.numpy as jnp

    from controllers import sim
    from experiments.examples import damped

    def final(gain):
        policy = damped.damped(gain=gain)
        return sim.simulate(policy, sim.paper_plant(8), global_batch=128, num_steps=6).batch_sizes[
            -1
        ]

    sizes = jax.vmap(final)(jnp.array([0.3, 1.0]))
    assert sizes.shape == (2, 4) and bool(jnp.all(sizes.sum(axis=1) == 128))
    assert not bool(jnp.all(sizes[0] == sizes[1]))  # the gains differ, so do the splits


def test_example_plugin_registers_and_balances():
    import experiments.examples.damped  # noqa: F401

    assert "damped" in controllers.available()
    assert "gain" in controllers.accepted_kwargs("damped")
    controller = controllers.make_from_config(
        {"name": "damped", "plugin": "experiments.examples.damped", "gain": 0.5, "ki": 0.1}
    )
    # Two workers, the second 3x faster: the ideal split of 64 is 16/48. Half the gap per step.
    sizes = np.asarray(controller.init(2, 64).sizes)
    for step in range(12):
        obs = controllers.Observation.make(step, sizes, sizes / np.array([1.0, 3.0]))
        sizes, _ = controller.update(None, obs)
        sizes = np.asarray(sizes)
    np.testing.assert_array_equal(sizes, [16, 48])


def test_register_rules():
    @controllers.register("test_only_policy")
    def policy(*, b_min: int = 0) -> controllers.Controller:
        return controllers.make("static", b_min=b_min)

    controllers.register("test_only_policy")(policy)  # re-registering the same function is fine
    with pytest.raises(ValueError, match="already registered"):
        controllers.register("proportional")(policy)
    with pytest.raises(TypeError, match="must be keyword-only"):
        controllers.register("positional")(lambda b_min: None)
    # A number as a name broke sorting the names (every lookup after it); `name` and `plugin`
    # as arguments never received their config values.
    for bad in (3, ""):
        with pytest.raises(TypeError, match="must be a non-empty string"):
            controllers.register(bad)
    with pytest.raises(TypeError, match=r"arguments \['name'\] are reserved config keys"):
        controllers.register("labelled")(lambda *, name="x", b_min=0, b_max=0: None)
    assert "labelled" not in controllers.available()


def test_load_plugin_names_a_missing_module_and_keeps_errors_inside_one(tmp_path, monkeypatch):
    controllers.load_plugin("")  # nothing to import
    with pytest.raises(ValueError, match="controller.plugin=no_such_pkg.policy: cannot import"):
        controllers.load_plugin("no_such_pkg.policy")
    (tmp_path / "broken_policy_probe.py").write_text("import a_module_nobody_has\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_module_nobody_has"):
        controllers.load_plugin("broken_policy_probe")  # its own traceback, not ours
    # A missing dependency whose name begins the plug-in's (needs, needsdep) is its own too.
    (tmp_path / "needsdep_probe.py").write_text("import needs\n")
    with pytest.raises(ModuleNotFoundError, match="'needs'"):
        controllers.load_plugin("needsdep_probe")


def test_shared_from_config_builds_a_policy_once_for_equal_arguments(monkeypatch):
    """Equal sections give the same policy (so jax.jit's cache, keyed by function, compiles
    its decision once a process); a value of another type or another factory gives another."""
    from controllers import registry

    section = {"name": "proportional", "plugin": "", "deadband": 0.25, "b_min": (8, 8)}
    one = controllers.shared_from_config(section)
    assert controllers.shared_from_config(ml_collections.ConfigDict(section)) is one
    assert controllers.shared_from_config({**section, "b_min": [8, 8]}) is one
    assert controllers.shared_from_config({**section, "ki": 0.5}) is one  # a pi key: dropped
    assert controllers.shared_from_config({**section, "deadband": 0.3}) is not one
    assert controllers.shared_from_config({**section, "b_min": (8.0, 8)}) is not one
    assert controllers.shared_from_config({**section, "b_min": (True, 8)}) is not one
    with pytest.raises(ValueError, match="unknown controller 'nope'"):
        controllers.shared_from_config({"name": "nope"})
    with pytest.raises(ValueError, match="accepted by no registered controller"):
        controllers.shared_from_config({**section, "kq": 1.0})

    def other(*, deadband: float = 0.1, b_min=0):
        return registry._FACTORIES["static"]()

    monkeypatch.setitem(registry._FACTORIES, "proportional", other)
    assert controllers.shared_from_config(section) is not one  # another factory
    monkeypatch.setattr(registry, "KEEP_SHARED", 2)
    for deadband in (0.5, 0.6):
        controllers.shared_from_config({**section, "deadband": deadband})
    assert len(registry._SHARED) == 2  # the oldest went first


def test_trainers_of_equal_configs_trace_the_decision_once(tmp_path, monkeypatch):
    """Two trainers of one config in a process share the policy and its jitted decision: the
    policy's update is traced once, not once a run (0.4-0.8 s a run on the 2-core machine)."""
    from controllers import registry
    from omnilearn_jax.run.train import Trainer
    from tests.test_train import smoke_config

    traced = []

    def probe():
        base = controllers.make("static")

        def update(state, obs):
            traced.append(obs.batch_sizes.shape)
            return base.update(state, obs)

        return controllers.Controller(base.init, update)

    monkeypatch.setitem(registry._FACTORIES, "trace_probe", probe)
    config = smoke_config(few_buckets=True)
    config.controller.name = "trace_probe"
    w, b = config.num_workers, config.global_batch_size
    for run in ("a", "b"):
        trainer = Trainer(config, str(tmp_path / run))
        state = trainer.controller.init(w, b)
        trainer.warm_decisions(state, np.asarray(controllers.initial_sizes(state, w, b)))
    assert traced == [(w,)]
    config.global_batch_size = 2 * b  # another batch: another program
    Trainer(config, str(tmp_path / "c")).warm_decisions(state, np.full(w, 2 * b // w))
    assert traced == [(w,), (w,)]


def test_a_policy_argument_needs_a_default_and_one_shared_default(monkeypatch):
    """An argument without a default could never be set (no config key holds it); a shared
    argument with another default silently became the other policies' default too (a plug-in's
    deadband=0.5 ran proportional at 0.5), or lost its own, by the order of the names."""
    from controllers import registry
    from omnilearn_jax.config import schema

    with pytest.raises(TypeError, match=r"arguments \['target'\] default to None, which no"):
        controllers.register("test_none")(lambda *, target=None, b_min=0, b_max=0: None)
    with pytest.raises(TypeError, match=r"arguments \['shift'\] need a default value"):
        controllers.register("test_no_default")(lambda *, shift, b_min=0, b_max=0: None)
    assert "test_no_default" not in controllers.available()

    def clash(*, deadband: float = 0.5, b_min: int = 0, b_max: int = 0):
        return None

    monkeypatch.setitem(registry._FACTORIES, "alpha_test", clash)  # sorts before `pi`
    with pytest.raises(ValueError, match=r"'alpha_test' and 'pi' declare deadband=0.5"):
        schema.controller_defaults()

    def same(*, deadband: float = 0.1, b_min: int = 0, b_max: int = 0):
        return None

    monkeypatch.setitem(registry._FACTORIES, "alpha_test", same)
    assert schema.controller_defaults()["deadband"] == 0.1

    # `persist` too is set by the schema (by the clock): a plug-in's own default is no clash.
    def own_persist(*, persist: float = 0.0, b_min: int = 0, b_max: int = 0):
        return None

    monkeypatch.setitem(registry._FACTORIES, "alpha_test", own_persist)
    assert schema.controller_defaults()["persist"] == 0.0
    # `jump` is shared with other defaults and set by the schema: every config runs 0.25.
    config = schema.base_config()
    config.controller.name = "predictive"
    assert registry._policy_arguments(config.controller)[1]["jump"] == 0.25


def test_the_trainer_names_a_policy_whose_update_breaks_the_contract():
    """A plug-in's update returning the sizes alone, W + 1 sizes, or a state whose dtype
    changed failed deep in the allocation (or recompiled every step) without naming it."""
    import jax
    import jax.numpy as jnp

    from omnilearn_jax.run.train import checked_update

    policy = controllers.make("proportional")
    state = policy.init(4, 128)
    obs = controllers.Observation.make(0, np.full(4, 32, np.int32), np.ones(4, np.float32))
    good = checked_update(policy.update, "proportional")
    assert jax.eval_shape(good, state, obs)[0].shape == (4,)
    broken = {
        "update must return \\(sizes, state\\), got an array of shape \\(4,\\)": lambda s, o: (
            o.batch_sizes
        ),
        "update.s sizes must have shape \\(4,\\) \\(one a worker\\), got \\(5,\\)": lambda s, o: (
            jnp.ones(5, jnp.int32),
            s,
        ),
        "update must return a state of its input's structure, shapes and dtypes": lambda s, o: (
            o.batch_sizes,
            jax.tree.map(lambda a: jnp.asarray(a, jnp.float32) + 0.5, s),
        ),
    }
    for message, update in broken.items():
        with pytest.raises(ValueError, match="controller 'mine': " + message):
            jax.eval_shape(checked_update(update, "mine"), state, obs)


def test_a_controller_key_the_chosen_policy_does_not_take_is_warned():
    """`--config.controller.gain=0.3` without the plug-in's name ran `static` and dropped it
    without a word; so did `deadband` under predictive."""
    import experiments.examples.damped  # noqa: F401
    from omnilearn_jax.config import schema, unread

    config = schema.base_config()
    assert unread.unread_controller_keys(config) == []
    config.controller.gain = 0.3
    config.controller.deadband = 0.3
    config.controller.name = "predictive"
    assert unread.unread_controller_keys(config) == [
        "controller.deadband is set but controller.name='predictive' does not take it (taken "
        "by pi, proportional); set controller.name to one of those to use it",
        "controller.gain is set but controller.name='predictive' does not take it (taken by "
        "damped); set controller.name to one of those to use it",
    ]


def test_a_policy_whose_sizes_the_trainer_must_repair_is_warned_at_warm_up(
    tmp_path, monkeypatch, capsys
):
    """A plug-in returning B - 1 rows (or negative, or float sizes) ran with its split
    repaired every step and no word; the built-in policies' own splits need no repair."""
    import jax.numpy as jnp

    from controllers import registry
    from omnilearn_jax.run import train
    from omnilearn_jax.run.job import train_and_evaluate
    from tests.test_train import smoke_config

    def short(*, b_min: int = 0, b_max: int = 0) -> controllers.Controller:
        def update(state, obs):
            return obs.batch_sizes.at[0].add(-1), state

        return controllers.Controller(lambda w, b: jnp.zeros(()), update)

    monkeypatch.setitem(registry._FACTORIES, "short_test", short)
    config = smoke_config(few_buckets=True)
    config.controller.name = "short_test"
    config.train.num_steps = 2
    train_and_evaluate(config, str(tmp_path))
    assert "warning: controller 'short_test' returned sizes that are not a split of B=" in (
        capsys.readouterr().err
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["repaired_splits"] == 2  # the decisions after steps 0 and 1

    def late_short(*, b_min: int = 0, b_max: int = 0) -> controllers.Controller:
        """A split at warm-up (step 0's made-up times), none from step 2's decision on:
        repaired at every step without a word before."""

        def update(state, obs):
            return jnp.where(obs.step >= 2, obs.batch_sizes.at[0].add(-1), obs.batch_sizes), state

        return controllers.Controller(lambda w, b: jnp.zeros(()), update)

    monkeypatch.setitem(registry._FACTORIES, "late_short_test", late_short)
    config.controller.name, config.train.num_steps = "late_short_test", 5
    train_and_evaluate(config, str(tmp_path / "late"))
    err = capsys.readouterr().err
    assert "warning: controller 'late_short_test' returned sizes that are not a split" in err
    assert "(first after step 3, counted from 1);" in err and err.count("returned sizes") == 1
    summary = json.loads((tmp_path / "late" / "summary.json").read_text())
    assert summary["repaired_splits"] == 3  # the decisions after steps 2, 3 and 4
    w, b = 4, 128
    obs = controllers.Observation.make(
        0, np.full(w, b // w, np.int32), np.ones(w), np.arange(1.0, 5.0)
    )
    lo, hi = controllers.resolve_bounds(w, b, 0, 0)
    for name in controllers.BUILT_IN + ("predictive",):
        policy = controllers.make(name)
        decide = train.decision(policy, b, jax.devices()[0], name)
        assert bool(decide(policy.init(w, b), obs, lo, hi)[2]), name


def test_named_policies_from_a_command_line():
    assert controllers.named("static, pi,") == ["static", "pi"]
    for text, message in [
        (",", "--controllers names none"),
        ("pi,propotional", "'propotional'"),
        ("pi, static,pi", "names pi more than once"),
    ]:
        with pytest.raises(ValueError, match=message):
            controllers.named(text)


def test_a_command_lines_unknown_controller_names_no_config_key():
    """`--controllers` of the benchmarks: the hint named --config.controller.plugin, which
    none of those scripts has."""
    with pytest.raises(ValueError) as err:
        controllers.named("static,nosuch")
    assert "unknown controller 'nosuch'" in str(err.value)
    assert "--config" not in str(err.value)
