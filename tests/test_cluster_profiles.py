"""Speed profiles: paper tables, tiling, schedules, traces and modifiers."""

import numpy as np
import pytest

from omnilearn_jax.cluster import _rng, available_profiles, hetero_defaults, make_profile
from tests.helpers import assert_mean_one_lognormal

RUN = {"num_workers": 4, "num_steps": 1000, "steps_per_epoch": 10, "seed": 0}


def _profile(**hetero):
    run = dict(RUN)
    for key in ("num_workers", "num_steps", "steps_per_epoch", "seed"):
        if key in hetero:
            run[key] = hetero.pop(key)
    return make_profile(hetero, **run)


@pytest.mark.parametrize(
    "variant,level,expected",
    [
        ("bsp", 1, [12, 12, 12, 12]),
        ("bsp", 2, [12, 12, 8, 16]),
        ("bsp", 4, [9, 9, 6, 24]),
        ("bsp", 8, [6, 6, 4, 32]),
        ("asp", 1, [10, 10, 10, 10]),
        ("asp", 2, [8, 8, 8, 16]),
        ("asp", 4, [10, 10, 4, 16]),
        ("asp", 8, [4, 4, 4, 28]),
    ],
)
def test_hl_tables_exact(variant, level, expected):
    speeds = _profile(name="hl", level=level, variant=variant).speeds(123)
    assert speeds.dtype == np.float64
    np.testing.assert_array_equal(speeds, expected)


@pytest.mark.parametrize("num_workers", [8, 32])
def test_hl_tiles_to_more_workers(num_workers):
    speeds = _profile(name="hl", level=8, num_workers=num_workers).speeds(0)
    assert speeds.shape == (num_workers,)
    np.testing.assert_array_equal(speeds, np.tile([6, 6, 4, 32], num_workers // 4))


def test_uniform_and_cores_and_defaults():
    np.testing.assert_array_equal(_profile().speeds(5), np.ones(4))
    np.testing.assert_array_equal(
        _profile(name="cores", cores=(1, 2.5, 3, 4)).speeds(9), [1, 2.5, 3, 4]
    )
    # The profile hands out copies: a caller's edit must not leak into later steps.
    p = _profile(name="cores", cores=(1, 2, 3, 4))
    p.speeds(0)[0] = 99
    assert p.speeds(1)[0] == 1
    assert set(available_profiles()) >= {"uniform", "hl", "cores", "schedule", "trace", "noise"}
    # Every default has the type the command line parses, and together they switch every
    # modifier off: the default profile is uniform at every step.
    assert all(type(v) in (str, int, float, tuple) for v in hetero_defaults().values())
    plain = make_profile(hetero_defaults(), **RUN)
    assert plain.describe() == "uniform"
    np.testing.assert_array_equal([plain.speeds(t) for t in (0, 517, 999)], np.ones((3, 4)))


def test_schedule_levels_per_steps_boundaries():
    p = _profile(name="schedule", levels=(1, 2, 4, 8, 8, 4, 2, 1), segment=5, unit="steps")
    hl = {1: [12, 12, 12, 12], 2: [12, 12, 8, 16], 4: [9, 9, 6, 24], 8: [6, 6, 4, 32]}
    for i, level in enumerate((1, 2, 4, 8, 8, 4, 2, 1)):
        np.testing.assert_array_equal(p.speeds(5 * i), hl[level])
        np.testing.assert_array_equal(p.speeds(5 * i + 4), hl[level])
    # The run outlasts the schedule: the last segment holds.
    np.testing.assert_array_equal(p.speeds(999), hl[1])


def test_schedule_levels_per_epochs():
    p = _profile(
        name="schedule",
        levels=(1, 2, 4, 8),
        segment=2,
        unit="epochs",
        steps_per_epoch=7,
        num_steps=56,
    )
    # Segment length 2 epochs x 7 steps = 14 steps.
    np.testing.assert_array_equal(p.speeds(13), [12, 12, 12, 12])
    np.testing.assert_array_equal(p.speeds(14), [12, 12, 8, 16])
    np.testing.assert_array_equal(p.speeds(27), [12, 12, 8, 16])
    np.testing.assert_array_equal(p.speeds(28), [9, 9, 6, 24])
    np.testing.assert_array_equal(p.speeds(42), [6, 6, 4, 32])
    np.testing.assert_array_equal(p.speeds(55), [6, 6, 4, 32])


def test_schedule_segment_speeds():
    p = _profile(name="schedule", segment_speeds=(1, 1, 1, 1, 1, 2, 3, 4), segment=3, unit="steps")
    np.testing.assert_array_equal(p.speeds(2), [1, 1, 1, 1])
    np.testing.assert_array_equal(p.speeds(3), [1, 2, 3, 4])


def test_trace_replay(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "step,worker,speed\n"
        "0,0,1\n0,1,2\n0,2,3\n0,3,4\n"
        "# worker 1 slows down\n"
        "10,1,0.5\n"
        "\n"
        "25,0,8\n25,3,1\n"
    )
    p = _profile(name="trace", path=str(path))
    np.testing.assert_array_equal(p.speeds(0), [1, 2, 3, 4])
    np.testing.assert_array_equal(p.speeds(9), [1, 2, 3, 4])
    np.testing.assert_array_equal(p.speeds(10), [1, 0.5, 3, 4])
    np.testing.assert_array_equal(p.speeds(24), [1, 0.5, 3, 4])
    np.testing.assert_array_equal(p.speeds(25), [8, 0.5, 3, 1])
    np.testing.assert_array_equal(p.speeds(10_000), [8, 0.5, 3, 1])
    # Saved by a spreadsheet, with a byte-order mark: it was "missing column(s) ['step']".
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    np.testing.assert_array_equal(_profile(name="trace", path=str(path)).speeds(25), [8, 0.5, 3, 1])


def test_noise_is_seeded_and_mean_one():
    a = _profile(name="hl", level=2, noise=0.2, seed=1)
    b = _profile(name="hl", level=2, noise=0.2, seed=1)
    c = _profile(name="hl", level=2, noise=0.2, seed=2)
    np.testing.assert_array_equal(a.speeds(17), b.speeds(17))
    assert not np.allclose(a.speeds(17), c.speeds(17))
    assert not np.allclose(a.speeds(17), a.speeds(18))
    # Random access: asking again, out of order, gives the same numbers.
    first = a.speeds(3)
    a.speeds(500)
    np.testing.assert_array_equal(a.speeds(3), first)
    ratios = np.stack([a.speeds(t) / np.array([12, 12, 8, 16]) for t in range(1000)])
    assert_mean_one_lognormal(ratios, 0.2)
    wide = _profile(name="hl", level=2, noise=0.4, seed=1)
    assert_mean_one_lognormal(
        np.stack([wide.speeds(t) / np.array([12, 12, 8, 16]) for t in range(2000)]), 0.4
    )


def test_noise_shorthand_name_uses_base():
    p = _profile(name="noise", base="hl", level=8, noise=0.1)
    speeds = np.stack([p.speeds(t) for t in range(200)])
    assert speeds.mean(0)[3] / speeds.mean(0)[2] == pytest.approx(8, rel=0.1)


def test_random_walk_seeded_and_clipped():
    kw = {"name": "uniform", "walk_sigma": 0.3, "walk_min": 0.5, "walk_max": 2.0}
    a = _profile(**kw, seed=3)
    b = _profile(**kw, seed=3)
    c = _profile(**kw, seed=4)
    np.testing.assert_array_equal(a.speeds(0), np.ones(4))  # the walk starts at the base
    path_a = np.stack([a.speeds(t) for t in range(1000)])
    path_b = np.stack([b.speeds(t) for t in range(1000)])
    path_c = np.stack([c.speeds(t) for t in range(1000)])
    np.testing.assert_array_equal(path_a, path_b)
    assert not np.allclose(path_a, path_c)
    assert path_a.min() == pytest.approx(0.5) and path_a.max() == pytest.approx(2.0)
    # A walk: away from the clip, consecutive log-speeds differ by sigma z, z ~ N(0, 1).
    # Near a tight clip the unclipped steps are the smaller ones (0.27 here): 15%.
    assert_walk_steps_have_sigma(path_a, 0.3, 0.5, 2.0, rel=0.15)
    wide = _profile(**{**kw, "walk_min": 0.01, "walk_max": 100.0}, seed=3)
    path = np.stack([wide.speeds(t) for t in range(1000)])
    assert_walk_steps_have_sigma(path, 0.3, 0.01, 100, rel=0.05)


def test_random_walk_follows_its_formula_and_holds_its_last_factor():
    """log m_k(0) = 0, log m_k(t) = clip(log m_k(t-1) + sigma z_k(t), log lo, log hi), with
    z_k(t) the seeded counter-based normal of (seed, step t, worker k); past the run's last
    step the last factor holds."""
    sigma, lo, hi, steps = 0.3, 0.5, 2.0, 40
    kw = {"name": "uniform", "walk_sigma": sigma, "walk_min": lo, "walk_max": hi}
    walk = _profile(**kw, seed=3, num_steps=steps)
    logs = np.zeros(4)
    for t in range(steps):
        if t:
            z = _rng.normals(3, _rng.STREAM_RANDOM_WALK, t, np.arange(4))
            logs = np.clip(logs + sigma * z, np.log(lo), np.log(hi))
        np.testing.assert_allclose(walk.speeds(t), np.exp(logs), rtol=1e-12, err_msg=str(t))
    assert not np.array_equal(walk.speeds(steps - 2), walk.speeds(steps - 1))
    np.testing.assert_array_equal(walk.speeds(steps + 100), walk.speeds(steps - 1))


def assert_walk_steps_have_sigma(path, sigma, lo, hi, rel):
    logs = np.log(path)
    inside = (logs > np.log(lo) + 1e-9) & (logs < np.log(hi) - 1e-9)
    free = np.diff(logs, axis=0)[inside[1:] & inside[:-1]]  # neither end clipped
    assert free.size > 1000
    assert free.std() == pytest.approx(sigma, rel=rel), free.std()
    assert abs(free.mean()) < 4 * sigma / np.sqrt(free.size), free.mean()


def test_preempt_intervals():
    p = _profile(name="hl", level=2, preempt_worker=3, preempt_intervals=(5, 8, 20, 21))
    for step, expect in [(4, 16), (5, 0.16), (7, 0.16), (8, 16), (20, 0.16), (21, 16)]:
        speeds = p.speeds(step)
        assert speeds[3] == pytest.approx(expect)
        np.testing.assert_array_equal(speeds[:3], [12, 12, 8])
    lost = _profile(name="preempt", preempt_worker=1, preempt_intervals=(2, 4), preempt_trickle=0.0)
    np.testing.assert_array_equal(lost.speeds(3), [1, 0, 1, 1])
    assert "preempt" in lost.describe()


def test_modifiers_compose_multiplicatively():
    base = dict(name="hl", level=4, seed=9)
    noisy = _profile(**base, noise=0.1)
    both = _profile(**base, noise=0.1, preempt_worker=0, preempt_intervals=(0, 10))
    np.testing.assert_allclose(both.speeds(5), noisy.speeds(5) * [0.01, 1, 1, 1])
    np.testing.assert_array_equal(both.speeds(10), noisy.speeds(10))


def test_changes_past_the_runs_end_are_named(tmp_path, capsys):
    """A trace row or a preemption set at or after the run's last step never applies: the run
    went on without it and without a word (an async run's trace written in updates, not in
    rounds of W updates, lost its changes so)."""
    from omnilearn_jax.engine.timing import check_cluster
    from tests.test_train import smoke_config

    path = tmp_path / "trace.csv"
    path.write_text("step,worker,speed\n" + "".join(f"0,{k},1\n" for k in range(4)) + "5,3,4\n")
    trace = _profile(name="trace", path=str(path))
    assert trace.unreached(6) == [] and len(trace.unreached(5)) == 1
    assert (
        "its speed changes at step(s) 5 never apply, the run has 5 steps" in trace.unreached(5)[0]
    )
    late = _profile(name="hl", level=2, preempt_worker=3, preempt_intervals=(5, 8, 20, 21))
    assert late.unreached(21) == []
    (said,) = late.unreached(20)
    assert said.endswith("interval(s) [20, 21) start after the run's 20 steps")
    config = smoke_config()
    config.mode, config.train.num_steps, config.hetero.name = "asp", 20, "trace"
    config.hetero.path = str(path)
    config.num_workers = config.num_devices = 4  # 20 updates: 5 rounds of 4
    check_cluster(config, steps_per_epoch=8)
    assert "step(s) 5 never apply, the run has 5 rounds of 4 updates" in capsys.readouterr().err
    config.train.num_steps = 24  # 6 rounds: round 5 applies
    check_cluster(config, steps_per_epoch=8)
    assert "never apply" not in capsys.readouterr().err
