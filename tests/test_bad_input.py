"""Bad input everywhere gives a clear error before anything compiles or is overwritten."""

import os
from pathlib import Path

import numpy as np
import pytest

from omnilearn_jax.engine.compiles import CompileCounter
from omnilearn_jax.run import launch
from omnilearn_jax.run.job import train_and_evaluate
from tests import cli
from tests.test_train import ROOT, smoke_config

SENTINEL = b'{"step": 1, "loss": 1.0}\n'


def _trace(tmp_path, text):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return str(path)


def _npz(tmp_path, **arrays):
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    return str(path)


def _garbage(tmp_path):
    path = tmp_path / "data.npz"
    path.write_bytes(b"not a zip archive")
    return str(path)


def _truncated(tmp_path):
    """A real archive cut short: its members' headers read, their data do not (a traceback
    before, from where the arrays are read)."""
    path = _npz(tmp_path, **{k: np.zeros((500,) + v.shape[1:], v.dtype) for k, v in DIGITS.items()})
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:200] + data[-1000:])  # keep the directory, lose member data
    return path


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


TRACE = "hetero.name", "trace"
PREDICTIVE = {"controller.name": "predictive"}
TEXT = {"dataset.name": "text", "model.name": "transformer", "dataset.num_train": 64}
CURVE = os.path.join(ROOT, "data", "curves", "cpu_mlp_digits.json")
DIGITS = {
    "x_train": np.zeros((10, 4)),
    "y_train": np.arange(10) % 2,  # two classes
    "x_test": np.zeros((5, 4)),
    "y_test": np.zeros(5, int),
}

# (overrides: {key: value or callable(tmp_path)}, text of the error, [its type: ValueError]);
# the text is what the code adds, not only the bad value echoed back.
CASES = [
    ({"dataset.name": "cifar"}, "unknown dataset 'cifar'; valid names: digits, mnist1d"),
    ({"model.name": "vit"}, "unknown model 'vit'; valid names: cnn, mlp, resnet18"),
    ({"backend": "pjit"}, "unknown backend 'pjit'; valid backends: shard_map, pmap"),
    ({"optimizer.name": "lamb"}, "unknown optimizer 'lamb'; valid names: sgd, adamw"),
    (
        {"optimizer.schedule": "step"},
        "unknown optimizer.schedule 'step'; valid schedules: constant, cosine",
    ),
    ({"controller.sizes": (8,) * 7 + (9,)}, "sum to 65, not global_batch_size 64"),
    ({"controller.sizes": (-8, 24) + (8,) * 6}, "controller.sizes must be >= 0"),
    ({"controller.sizes": (8,) * 4}, "has 4 entries for 8 workers"),
    # A data file the run could not have used: each failed after compiling, or gave
    # trivially perfect metrics (one class), or blamed the run (a NaN input).
    ({"dataset.test_fraction": 0.0005}, "leaves 0 of 1797 digits to evaluate on"),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "x_train": np.zeros((10, 0))}),
        },
        "x_train (10, 0) holds no features",
    ),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "x_test": np.full((5, 4), "a")}),
        },
        "x_test holds <U1, not numbers",
    ),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "x_train": np.full((10, 4), np.nan)}),
        },
        "x_train holds NaN or infinite values",
    ),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "y_train": np.zeros(10, int)}),
        },
        "its labels are all 0; a classifier needs 2+",
    ),
    (  # all 1s passed (only all 0s was refused) and reported an accuracy of 1.0
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(
                p, **{**DIGITS, "y_train": np.ones(10, int), "y_test": np.ones(5, int)}
            ),
        },
        "its labels are all 1; a classifier needs 2+",
    ),
    ({"num_workers": 12}, "num_workers=12 is not a multiple of the 8 devices"),
    ({"controller.name": "pid"}, "unknown controller 'pid'; registered: ["),
    ({"controller.b_min": 9}, "infeasible bounds: 8 workers x b_min sum to 72 > global batch 64"),
    ({"controller.b_min": 6, "controller.b_max": 5}, "worker 0: b_min 6 exceeds b_max 5"),
    ({"layout": "ragged"}, "config key 'layout' was removed: every device now computes a"),
    ({"clock": "sundial"}, "unknown clock 'sundial'; valid values: virtual, wall"),
    ({"hetero.inject_order": "during"}, "unknown hetero.inject_order 'during'; valid values: alo"),
    ({"capacity_buckets": 3}, "config key 'capacity_buckets' was removed: use bucket_ratio"),
    ({"micro_batch_size": 8}, "config key 'micro_batch_size' was removed: use memory_rows"),
    (
        {"bucket_ratio": 1.0},
        "bucket_ratio must be a finite number > 1 (each bucket about that many times",
    ),
    ({"memory_rows": -1}, "memory_rows must be >= 0 (0 = no limit), got -1"),
    ({"train.nan_policy": "ignore"}, "unknown train.nan_policy 'ignore'; valid values: stop"),
    ({"hetero.name": "hl9"}, "unknown hetero.name 'hl9'; valid names:"),
    (
        {"hetero.name": "cores", "hetero.cores": (1.0, -2.0) + (1.0,) * 6},
        "speeds must be finite and > 0; got [1.0, -2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0] "
        "(bad entries at flat index [1])",
    ),
    (
        {
            "hetero.name": "schedule",
            "hetero.levels": (1, 2, 4),
            "hetero.segment": 10,
            "hetero.unit": "steps",
        },
        "longer than the run",
    ),
    ({"hetero.inject": 0.003}, "hetero.inject=0.003 makes workers wait on the wall clock; the"),
    (
        {"clock": "wall", "hetero.inject": -0.003},
        "hetero.inject must be >= 0 seconds a sample, got -0.003",
    ),
    (  # async: 20 updates of 8 workers are 3 rounds, so HL8's segment would never run
        {
            "mode": "asp",
            "hetero.name": "schedule",
            "hetero.levels": (1, 8),
            "hetero.segment": 3,
            "hetero.unit": "steps",
        },
        "(async: speeds change by rounds of W=8 updates, and train.num_steps=20 updates is 3 "
        "rounds)",
    ),
    ({"cost.bandwidth": 0.0}, "bad cost config: need ['bandwidth > 0']; got CostModel("),
    ({"faults.bad_times": (1, 2)}, "faults.bad_times must hold (step, worker, seconds) triples"),
    (  # an IndexError mid-run, after compiling
        {"faults.bad_times": (3, 99, 1.0)},
        "faults.bad_times plants a time for worker 99 at step 3: a worker must be in 0..",
    ),
    ({"train.outlier_factor": 0.5}, "train.outlier_factor must be a finite number > 1"),
    # NaN passed `<= 1` and switched the guard off: a planted 100 s time was used, exit 0
    ({"train.outlier_factor": float("nan")}, "train.outlier_factor must be a finite number > 1"),
    # NaN failed after compiling as a "non-finite loss" at step 2, advising nan_policy=skip
    ({"optimizer.learning_rate": float("nan")}, "optimizer.learning_rate must be a finite"),
    (  # the rate never reached its peak: a run left at chance accuracy, exit 0
        {"optimizer.schedule": "warmup_cosine", "optimizer.warmup_steps": 1000},
        "optimizer.warmup_steps=1000 is not below train.num_steps=",
    ),
    ({"faults.crash_step": -7}, "faults.crash_step must be a step >= 0, or -1 (never), got -7"),
    (  # a ZeroDivisionError from the initialiser, after the run started
        {"model.name": "cnn", "model.norm": False, "model.features": (0, 8)},
        "model.features must all be >= 1 channels, got (0, 8)",
    ),
    (
        dict([TRACE, ("hetero.path", lambda p: _trace(p, "step,worker\n0,0\n"))]),
        "trace.csv:1: trace header is missing column(s) ['speed']; need step,worker,speed",
    ),
    (
        dict(
            [
                TRACE,
                (
                    "hetero.path",
                    lambda p: _trace(
                        p,
                        "step,worker,speed\n" + "".join(f"0,{k},1\n" for k in range(8)) + "3,9,1\n",
                    ),
                ),
            ]
        ),
        "trace.csv:10: unknown worker 9",
    ),
    (
        dict([TRACE, ("hetero.path", lambda p: _trace(p, "step,worker,speed\n0,0,fast\n"))]),
        "trace.csv:2: column 'speed' is not a number",
    ),
    (
        dict([TRACE, ("hetero.path", lambda p: str(p / "missing.csv"))]),
        lambda p: f"trace file not found: '{p / 'missing.csv'}' (set hetero.path)",
    ),
    (
        {"dataset.name": "npz", "dataset.path": lambda p: str(p / "none.npz")},
        lambda p: f"dataset file '{p / 'none.npz'}' does not exist",
        FileNotFoundError,
    ),
    (
        {"dataset.name": "npz", "dataset.path": lambda p: _npz(p, x_train=np.zeros((3, 2)))},
        "lacks array(s) y_train, x_test, y_test",
    ),
    ({"dataset.name": "npz", "dataset.path": _garbage}, "is not a readable .npz archive"),
    ({"dataset.name": "npz", "dataset.path": _truncated}, "is not a readable .npz archive"),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "y_test": np.full(5, 2**31)}),
        },
        "y_test must hold integer labels in [0, 2^31)",  # they wrapped when cast to int32
    ),
    ({"dataset.test_fraction": 0.0}, "dataset.test_fraction must be in (0, 1), got 0.0"),
    ({"model.name": "mlp", "model.hidden": 0}, "model.hidden must be >= 1, got 0"),
    (
        {"model.name": "cnn", "model.features": (12, 20)},
        "model.features=(12, 20) gives 12 channels; cnn's group norm needs each channel count",
    ),
    ({"model.name": "resnet18", "model.width": 6}, "model.width=6 gives 12 channels; resnet18"),
    ({"seed": -1}, "seed must be in [0, 2^63), got -1"),
    ({"seed": 2**63}, "seed must be in [0, 2^63), got 9223372036854775808"),
    (
        {
            "dataset.name": "npz",
            "dataset.path": lambda p: _npz(p, **{**DIGITS, "y_test": np.zeros(4, int)}),
        },
        "must be [N, ...] and [N] with the same N",
    ),
    # This wave's keys: the predictive controller, cost curves and memory limits, text data
    # and the transformer, and how they combine (docs/robustness.md, bad input).
    ({**PREDICTIVE, "controller.min_gain": 1.0}, "predictive: min_gain must be in [0, 1), got 1.0"),
    ({**PREDICTIVE, "controller.settle": 0}, "predictive: settle must be an int >= 1, got 0"),
    ({**PREDICTIVE, "controller.memory": 0.0}, "predictive: memory must be in (0, 1], got"),
    ({**PREDICTIVE, "controller.jump": -0.5}, "predictive: jump must be >= 0, got -0.5"),
    ({**PREDICTIVE, "controller.persist": -0.5}, "predictive: persist must be >= 0 seconds, got"),
    ({"controller.name": "proportional", "controller.persist": -0.5}, "persist must be >= 0 s"),
    (
        {"cost.curve": lambda p: str(p / "none.json")},
        lambda p: f"cost curve {p / 'none.json'}: [Errno 2] No such file or directory",
    ),
    (
        {"cost.curve": "measured"},
        "cost curve measured: [Errno 2] No such file or directory: 'measured' (did you mean "
        "'measure'?)",
    ),
    (
        {"cost.curve": lambda p: _file(p, "curve.json", '{"format": "x"}')},
        "not a cost curve: format 'x', want 'omnilearn-cost-curve/1'",
    ),
    (
        {"cost.curve": CURVE, "cost.per_sample_cost": 0.0},
        "cost.per_sample_cost=0 asks to calibrate a per-sample cost, but cost.curve=",
    ),
    ({"cost.memory_limits": (10, 10, 10)}, "cost.memory_limits has 3 entries for 8 workers"),
    ({"cost.memory_factor": 0.5}, "bad cost config: need ['memory_factor >= 1']"),
    (
        {"dataset.name": "text", "model.name": "mlp"},
        "dataset.name=text gives token sequences with a next-token target at every position, "
        "which only model.name=transformer predicts; got model.name=mlp",
    ),
    (  # it said "needs token inputs [L]" for images, and token rows [N, L] with one label
        # each failed while compiling
        {"model.name": "transformer"},
        "model.name=transformer predicts a token at every position of dataset.name=text",
    ),
    ({**TEXT, "model.num_heads": 3}, "model width 64 is not a multiple of num_heads 3"),
    (
        {**TEXT, "model.depth": 0},
        "model transformer needs positive width, depth, num_heads and mlp_ratio; got 64, 0,",
    ),
    ({**TEXT, "dataset.seq_len": 0}, "text dataset needs positive seq_len, num_train and"),
    (
        {**TEXT, "dataset.path": lambda p: str(p / "none.txt")},
        lambda p: f"text corpus '{p / 'none.txt'}' does not exist",
        FileNotFoundError,
    ),
    (  # a folder was said not to exist
        {**TEXT, "dataset.path": lambda p: str(p)},
        lambda p: f"text corpus '{p}' is a folder, not a file",
        FileNotFoundError,
    ),
    ({**TEXT, "dataset.num_train": 10**9}, "sequences of 64 need 64000065538; lower dataset"),
    ({"train.target_perplexity": -1.0}, "train.target_perplexity must be >= 0 (0 = none)"),
    ({"train.target_accuracy": 1.5}, "train.target_accuracy must be in [0, 1] (0 = none)"),
    ({"cpu_dispatch": "bogus"}, "unknown cpu_dispatch 'bogus'"),  # ran from Python
    ({"bucket_ratio": float("inf")}, "bucket_ratio must be a finite number > 1"),  # Overflow
    ({"bucket_ratio": float("nan")}, "bucket_ratio must be a finite number > 1"),
    ({"capacity": 4}, "capacity=4 rows a device x 8 devices cannot hold global_batch_size=64"),
    # W&B refused these only when the run started: it then trained untracked.
    (
        {"wandb.mode": "offline", "wandb.project": "team/proj"},
        "wandb.project='team/proj' holds '/', which W&B refuses",
    ),
    (
        {"wandb.mode": "offline", "wandb.tags": ("(hl8,paper)",)},
        "wandb.tags got one tag '(hl8,paper)'",
    ),
    (
        {"wandb.mode": "offline", "wandb.init_timeout": 0.0},
        "wandb.init_timeout must be > 0 seconds, got 0.0",
    ),
    (
        {"train.target_perplexity": 5.0},
        "train.target_perplexity=5.0 is for text data (perplexity is reported for "
        "dataset.name=text only); for dataset.name=digits set train.target_accuracy",
    ),
    # Periods and limits that crashed after compiling (a zero period divides a step count) or
    # were silently accepted; their sentinels (0, -1) stay valid where the key documents one.
    ({"train.log_every": 0}, "train.log_every must be >= 1 (steps between progress lines), got 0"),
    ({"train.eval_every": 0}, "train.eval_every must be >= 1 (steps between evaluations), got 0"),
    ({"train.eval_batch_size": 0}, "train.eval_batch_size must be >= 1 (rows an evaluation"),
    (
        {"train.checkpoint_every": -1},
        "train.checkpoint_every must be >= 0 (steps between checkpoints; 0 = only at the end), "
        "got -1",
    ),
    ({"train.keep_checkpoints": 0}, "train.keep_checkpoints must be >= 1 (checkpoints kept; 0 "),
    ({"train.max_skipped": -1}, "train.max_skipped must be >= 0 (non-finite updates skipped"),
    (
        {"train.nan_policy": "skip", "train.max_skipped": 0},
        "train.max_skipped must be >= 1 with train.nan_policy=skip (non-finite updates skipped",
    ),
    ({"controller.b_min": -2}, "controller.b_min must be >= 0 or -1 (the paper's rule B/(2W))"),
    ({"controller.b_max": -2}, "controller.b_max must be >= 0 (0 = no upper bound) or -1 (the"),
    (
        {"mode": "asp", "asp.time_budget": -1.0},
        "asp.time_budget must be >= 0 seconds (0 = no budget: stop after train.num_steps "
        "updates), got -1.0",
    ),
    ({"mode": "asp", "asp.time_budget": float("nan")}, "asp.time_budget must be >= 0 seconds"),
    ({"mode": "asp", "asp.time_budget": float("inf")}, "asp.time_budget must be >= 0 seconds"),
    (  # every update decided, as at 1
        {"mode": "asp", "asp.controller_every": -1},
        "asp.controller_every must be >= 0 updates (0 = W, about one a worker), got -1",
    ),
    (
        {"mode": "asp", "asp.staleness_bound": -2},
        "asp.staleness_bound must be >= 0 or -1 (no bound: plain ASP), got -2",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_bad_config_fails_before_compiling_or_writing(tmp_path, case):
    overrides, message, *kind = case
    kind = kind[0] if kind else ValueError
    message = message(tmp_path) if callable(message) else message
    config = smoke_config()
    for key, value in overrides.items():
        section, _, leaf = key.rpartition(".")
        (config[section] if section else config)[leaf] = (
            value(tmp_path) if callable(value) else value
        )
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "metrics.jsonl").write_bytes(SENTINEL)
    with CompileCounter() as compiles, pytest.raises(kind) as err:
        train_and_evaluate(config, str(workdir))
    assert type(err.value) is kind, repr(err.value)
    assert message in str(err.value), str(err.value)
    assert compiles.count == 0
    assert os.listdir(workdir) == ["metrics.jsonl"]
    assert (workdir / "metrics.jsonl").read_bytes() == SENTINEL


CLI_CASES = [
    (["--config=configs/smoke.py", "--config.no_such_key=1"], "no_such_key"),
    (
        ["--config=configs/smoke.py", "--config.train.num_steps=many"],
        "invalid literal for int() with base 10: 'many'",
    ),
    (["--config=configs/nope.py"], "No such file or directory: 'configs/nope.py'"),
    (["--config=configs/smoke.py", "--config.controller.name=pid"], "unknown controller 'pid'"),
]


@pytest.mark.parametrize("args,message", CLI_CASES)
def test_bad_command_line_fails_clearly(tmp_path, args, message):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "metrics.jsonl").write_bytes(SENTINEL)
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    proc = cli.main([f"--workdir={workdir}", *args], env, timeout=120)  # forked: tests/cli.py
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]
    assert (workdir / "metrics.jsonl").read_bytes() == SENTINEL


def test_missing_workdir_flag_is_reported(tmp_path):
    env = launch.child_env()  # main.py makes its devices; other XLA flags stay
    proc = cli.main(["--config=configs/smoke.py"], env, fresh=True, timeout=120)
    assert proc.returncode != 0 and "--workdir" in proc.stderr
