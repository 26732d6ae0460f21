"""Bad input fails early with a message that says what is wrong and where."""

import numpy as np
import pytest

from omnilearn_jax.cluster import CostModel, make_profile

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
    with pytest.raises(ValueError, match=r"8 segments x 2 epochs = 160 steps.*num_steps=100"):
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
        (GOOD_HEAD + "5,1,-2\n", r"t.csv:6: speed must be finite and > 0"),
        (
            GOOD_HEAD + "9,1,2\n\n4,1,2\n",
            r"t.csv:8: steps must be non-decreasing; step 4 follows 9",
        ),
        (GOOD_HEAD + "5,1,2\n5,1,3\n", r"t.csv:7: worker 1 set twice at step 5"),
        ("step,worker,speed\n0,0,1\n0,1,1\n", r"worker\(s\) \[2, 3\] have no speed at step 0"),
        (GOOD_HEAD + "5,1\n", r"t.csv:6: expected 3 fields, got 2"),
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
    with pytest.raises(ValueError, match=r"must both be \[W\]"):
        CostModel().worker_times(0, np.array([1, 2]), np.array([1.0]))
    with pytest.raises(ValueError, match="step must be >= 0"):
        make_profile({}, **RUN).speeds(-1)
