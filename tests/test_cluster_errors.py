"""Bad input fails early with a message that says what is wrong and where."""

import math

import numpy as np
import pytest

from omnilearn_jax.cluster import (
    CostModel,
    VirtualClock,
    make_profile,
    ring_allreduce_time,
    unavailable_workers,
)

RUN = {"num_workers": 4, "num_steps": 100, "steps_per_epoch": 10, "seed": 0}


def test_unknown_profile_lists_names():
    with pytest.raises(ValueError, match="unknown hetero.name 'fast'") as err:
        make_profile({"name": "fast"}, **RUN)
    for name in ("uniform", "hl", "cores", "schedule", "trace", "noise", "random_walk", "preempt"):
        assert repr(name) in str(err.value)


def test_unknown_key_and_level():
    with pytest.raises(ValueError, match=r"unknown hetero key\(s\) \['levle'\]"):
        make_profile({"name": "hl", "levle": 8}, **RUN)
    with pytest.raises(ValueError, match=r"unknown hl level 3; valid levels: \[1, 2, 4, 8\]"):
        make_profile({"name": "hl", "level": 3}, **RUN)
    for key, value in (("level", 2.5), ("level", "2"), ("level", True), ("segment", 1.5)):
        name = "hl" if key == "level" else "schedule"
        with pytest.raises(ValueError, match=rf"hetero.{key} must be a whole number, got"):
            make_profile({"name": name, key: value, "levels": (1, 2)}, **RUN)
    whole = make_profile({"name": "hl", "level": 2}, **RUN).speeds(0)
    assert make_profile({"name": "hl", "level": 2.0}, **RUN).speeds(0).tolist() == whole.tolist()
    assert (
        make_profile({"name": "hl", "level": np.int64(2)}, **RUN).speeds(0).tolist()
        == whole.tolist()
    )
    for levels in ((1, 2.5), (1, True)):  # 2.5 ran as level 2 without a word
        with pytest.raises(ValueError, match="hetero.levels must be whole HL levels, got"):
            make_profile({"name": "schedule", "levels": levels, "segment": 2}, **RUN)
    schedule = make_profile(
        {"name": "schedule", "levels": (1, 2.0), "segment": 2, "unit": "steps"}, **RUN
    )
    assert schedule.speeds(2).tolist() == whole.tolist()
    with pytest.raises(ValueError, match="unknown cost key"):
        CostModel.from_config({"per_sample": 1.0}, seed=0)


@pytest.mark.parametrize("cores", [(1, 2, 0, 4), (1, -2, 3, 4)])
def test_non_positive_speeds(cores):
    with pytest.raises(ValueError, match=r"speeds must be finite and > 0.*flat index \[\d\]"):
        make_profile({"name": "cores", "cores": cores}, **RUN)


def test_cores_length():
    with pytest.raises(ValueError, match="hetero.cores has 3 entries but num_workers=4"):
        make_profile({"name": "cores", "cores": (1, 2, 3)}, **RUN)


def test_schedule_longer_than_run():
    with pytest.raises(
        ValueError,
        match=r"8 segments x 2 epochs = 160 steps.*num_steps=100; set train.num_steps >= 160",
    ):
        make_profile({"name": "schedule", "levels": (1, 2, 4, 8, 8, 4, 2, 1), "segment": 2}, **RUN)
    with pytest.raises(ValueError, match="exactly one of hetero.levels"):
        make_profile({"name": "schedule"}, **RUN)
    with pytest.raises(ValueError, match="speeds must be finite and > 0"):
        make_profile(
            {"name": "schedule", "segment_speeds": (1, 1, 1, 1, 1, 0, 1, 1), "unit": "steps"},
            **RUN,
        )


def _trace(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    return {"name": "trace", "path": str(path)}


GOOD_HEAD = "step,worker,speed\n0,0,1\n0,1,1\n0,2,1\n0,3,1\n"


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("step,speed\n0,1\n", r"t.csv:1: trace header is missing column\(s\) \['worker'\]"),
        (GOOD_HEAD + "5,4,2\n", r"t.csv:6: unknown worker 4; valid 0..3"),
        (GOOD_HEAD + "5,1,fast\n", r"t.csv:6: column 'speed' is not a number: 'fast'"),
        (GOOD_HEAD + "5,1.5,2\n", r"t.csv:6: column 'worker' must be an integer"),
        (GOOD_HEAD + "5,1,0\n", r"t.csv:6: speed must be finite and > 0, got 0.0"),
        # an OverflowError without file or line, and a wrong "must increase"
        (GOOD_HEAD + "1e20,1,2\n", r"t.csv:6: column 'step' is '1e20', over 9007199254740992"),
        (GOOD_HEAD + f"{2**63 - 1},1,2\n", r"t.csv:6: column 'step' is '9223372036854775807'"),
        (GOOD_HEAD + "5,1,-2\n", r"t.csv:6: speed must be finite and > 0"),
        (
            GOOD_HEAD + "9,1,2\n\n4,1,2\n",
            r"t.csv:8: steps must be non-decreasing; step 4 follows 9",
        ),
        (GOOD_HEAD + "5,1,2\n5,1,3\n", r"t.csv:7: worker 1 set twice at step 5"),
        ("step,worker,speed\n0,0,1\n0,1,1\n", r"worker\(s\) \[2, 3\] have no speed at step 0"),
        (GOOD_HEAD + "5,1\n", r"t.csv:6: expected 3 fields, got 2"),
        (  # the last 'step' column was read: "worker(s) [0, 1] have no speed at step 0"
            "step,worker,speed,step\n0,0,1,5\n0,1,1,5\n",
            r"t.csv:1: trace header names column\(s\) \['step'\] twice",
        ),
    ],
)
def test_trace_errors_name_line(tmp_path, text, pattern):
    with pytest.raises(ValueError, match=pattern):
        make_profile(_trace(tmp_path, text), **RUN)


def test_trace_missing_file_names_path(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(ValueError, match=f"trace file not found: '{missing}'"):
        make_profile({"name": "trace", "path": str(missing)}, **RUN)


def test_modifier_errors():
    with pytest.raises(ValueError, match="hetero.name='noise' needs hetero.noise to be set"):
        make_profile({"name": "noise"}, **RUN)
    with pytest.raises(ValueError, match="start,end pairs"):
        make_profile({"preempt_intervals": (1, 2, 3)}, **RUN)
    with pytest.raises(ValueError, match="preempt_worker=4 out of range"):
        make_profile({"preempt_worker": 4, "preempt_intervals": (1, 2)}, **RUN)
    with pytest.raises(ValueError, match="walk_min"):
        make_profile({"walk_sigma": 0.1, "walk_min": 2.0}, **RUN)


def test_cost_errors():
    with pytest.raises(ValueError, match=r"per_sample_cost > 0"):
        CostModel(per_sample_cost=0.0)
    # an infinite latency ran to the end, every time inf; an infinite bandwidth is no cost
    with pytest.raises(ValueError, match=r"need \['latency finite'\]"):
        CostModel(latency=float("inf"))
    assert CostModel(bandwidth=float("inf")).bandwidth == float("inf")
    with pytest.raises(ValueError, match=r"must both be \[W\]"):
        CostModel().worker_times(0, np.array([1, 2]), np.array([1.0]))
    with pytest.raises(ValueError, match="step must be >= 0"):
        make_profile({}, **RUN).speeds(-1)


def test_modifier_bounds_are_checked_at_their_edges():
    """The edges that are allowed work; one step past them is the error, in the code's
    words (these are the ranges the docstrings promise)."""
    walk = {"walk_sigma": 0.1}
    flat = make_profile({**walk, "walk_min": 1.0, "walk_max": 1.0}, **RUN)  # 0 < 1 <= 1 <= 1
    np.testing.assert_array_equal(flat.speeds(50), np.ones(4))  # a walk clipped to nothing
    need = r"need 0 < hetero.walk_min <= 1 <= hetero.walk_max, got "
    with pytest.raises(ValueError, match=need + r"0.0, 2.0$"):
        make_profile({**walk, "walk_min": 0.0, "walk_max": 2.0}, **RUN)
    with pytest.raises(ValueError, match=need + r"0.5, 0.9$"):
        make_profile({**walk, "walk_min": 0.5, "walk_max": 0.9}, **RUN)
    # NaN and inf strengths had made NaN speeds, read as zero times: a made-up clock.
    for key, value in (("walk_sigma", -0.1), ("walk_sigma", math.inf), ("noise", math.nan)):
        with pytest.raises(ValueError, match=rf"^hetero.{key} must be a finite number >= 0, got"):
            make_profile({key: value}, **RUN)
    for bad in ((1.7, 3), (2, math.inf), (math.nan, 3)):  # [1, 3); an OverflowError traceback
        with pytest.raises(ValueError, match=r"are whole steps; got \("):
            make_profile({"preempt_intervals": bad}, **RUN)
    lost = {"preempt_intervals": (2, 4, 6, 9)}
    profile = make_profile({**lost, "preempt_trickle": 0.0}, **RUN)  # trickle 0: a lost worker
    assert profile.speeds(2)[0] == 0.0 and profile.speeds(4)[0] == 1.0
    assert "steps [2, 4), [6, 9), trickle=0" in profile.describe()
    with pytest.raises(ValueError, match=r"^hetero.preempt_trickle must be in \[0, 1\), got 1.0$"):
        make_profile({**lost, "preempt_trickle": 1.0}, **RUN)
    for pairs in ((5, 5), (-1, 3), (0, 2, 7, 6)):
        with pytest.raises(ValueError, match=r"^preempt intervals need 0 <= start < end; got \["):
            make_profile({"preempt_intervals": pairs}, **RUN)


@pytest.mark.parametrize(
    "args", [(1e6, 0, 1e-3, 1e9), (1e6, 4, -1e-3, 1e9), (1e6, 4, 1e-3, 0.0), (-1.0, 4, 1e-3, 1e9)]
)
def test_allreduce_rejects_each_bad_argument(args):
    message = r"^need num_workers >= 1, latency >= 0, bandwidth > 0, param_bytes >= 0; got "
    with pytest.raises(ValueError, match=message):
        ring_allreduce_time(*args)


def test_allreduce_edges_are_allowed():
    assert ring_allreduce_time(0.0, 4, 1e-3, 1e9) == pytest.approx(2 * 3 * 1e-3)  # no bytes
    assert ring_allreduce_time(1e6, 4, 0.0, 0.5) == pytest.approx(2 * 3 / 4 * 1e6 / 0.5)


def test_virtual_clock_rejects_bad_times():
    clock = VirtualClock(4)
    with pytest.raises(ValueError, match=r"^worker_times must have shape \(4,\), got \(3,\)$"):
        clock.step(np.ones(3))
    for bad in ([1.0, -0.5, 1.0, 1.0], [1.0, float("nan"), 1.0, 1.0]):
        with pytest.raises(ValueError, match=r"^worker times must be finite and >= 0, got \["):
            clock.step(np.array(bad))
    # Sizes without speeds (or speeds without sizes) cannot name a lost worker: no hint.
    with pytest.raises(ValueError, match=r"got \[1.0, inf, 1.0, 1.0\]$"):
        clock.step(np.array([1.0, np.inf, 1.0, 1.0]), batch_sizes=[1, 1, 1, 1])
    for bad in (-1.0, float("inf"), float("nan")):  # inf and nan made the clock's time so
        with pytest.raises(ValueError, match=rf"^comm_time must be finite and >= 0, got {bad}$"):
            clock.step(np.ones(4), comm_time=bad)
    assert clock.steps == 0 and clock.time == 0.0  # nothing was counted
    with pytest.raises(ValueError, match=r"^num_workers must be >= 1, got 0$"):
        VirtualClock(0)


def test_virtual_clock_idle_steps_and_empty_totals():
    clock = VirtualClock(2)
    assert clock.totals()["mean_idle_fraction"] == 0.0 and clock.totals()["idle_fraction"] == 0.0
    rec = clock.step(np.zeros(2))  # nothing to do, no communication: a step of 0 s
    assert rec["step_time"] == 0.0 and rec["idle_fraction"] == 0.0 and rec["balance"] == 1.0
    totals = clock.totals()
    assert (totals["steps"], totals["mean_idle_fraction"], totals["idle_fraction"]) == (1, 0.0, 0.0)
    # With sizes given, a worker with samples counts in the balance even at 0 s.
    rec = VirtualClock(4).step(np.array([0.0, 2.0, 2.0, 1.0]), batch_sizes=[5, 40, 40, 43])
    assert rec["balance"] == pytest.approx(2.0 / (5.0 / 4))
    assert unavailable_workers([1, 0, 3], [0.0, 0.0, 1.0]) == [0]  # one sample is samples


def test_a_profiles_key_that_the_profile_in_use_ignores_is_warned(capsys):
    """`hetero.cores` set with the default name ran uniform without a word. A warning, not an
    error: an ablation over hetero.name may set one profile's keys for every cell."""
    from omnilearn_jax.cluster.registry import unread_keys
    from omnilearn_jax.engine.timing import check_cluster
    from tests.test_train import smoke_config

    config = smoke_config()
    config.hetero.cores = (1, 1, 1, 1, 1, 1, 1, 8)
    check_cluster(config, steps_per_epoch=10)
    assert capsys.readouterr().err == (
        "warning: hetero.cores is set but hetero.name='uniform' does not read it (the 'cores' "
        "profile does; set hetero.name=cores to use it)\n"
    )
    config.hetero.name = "cores"
    assert unread_keys(config.hetero) == []
    assert unread_keys({"name": "preempt", "base": "hl", "path": "t.csv"}) == [
        "hetero.path is set but hetero.name='preempt' does not read it (the 'trace' profile "
        "does; set hetero.name=trace to use it)"
    ]
    assert unread_keys({"name": "trace", "cores": []}) == []  # a list read back from JSON
    # A modifier's own keys without its strength key, and a base under a base profile's name.
    assert unread_keys({"name": "uniform", "base": "hl", "noise": 0.1}) == [
        "hetero.base is set but hetero.name='uniform' is a base profile itself (base is read "
        "under a modifier's name, ['noise', 'preempt', 'random_walk']; a modifier's key such as "
        "hetero.noise applies to hetero.name's profile)"
    ]
    assert unread_keys({"walk_max": 2.0, "preempt_trickle": 0.5}) == [
        "hetero.walk_max is set but hetero.walk_sigma is not, so it does nothing (set "
        "hetero.walk_sigma to use it)",
        "hetero.preempt_trickle is set but hetero.preempt_intervals is not, so it does nothing "
        "(set hetero.preempt_intervals to use it)",
    ]
    assert unread_keys({"walk_sigma": 0.1, "walk_max": 2.0, "preempt_intervals": (2, 4)}) == []
