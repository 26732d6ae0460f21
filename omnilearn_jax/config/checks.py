"""Config checks that run before anything is loaded or compiled.

`check_config_types(config)` compares a config against the base config (every key with its
typed default): a key the base does not have is almost always a typo that would otherwise be
ignored, so it is an error with the closest known key; a value of the wrong type is an error
naming both types. ml_collections already rejects unknown keys given on the command line, but
a config built in Python can still carry them.

`check_config(config)` adds the name and feasibility checks that need no devices or data
(controller, profile, dataset, model, bounds), so a runner can vet every cell of a grid at once.

`check_for_devices(config, num_devices, num_processes)` checks against the machine: device
count, one process for async, and the per-section rules (buckets, text data, measured costs).
`check_static_sizes` checks an explicit split against the resolved bounds. Every check of a
config lives here; the keys and their defaults are in omnilearn_jax/config/schema.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import ml_collections
import numpy as np

import controllers
from omnilearn_jax.config.args import check_choice, suggest

_SECTION = "section"

# Keys of earlier versions, and what replaced them: one mechanism (per-device buckets) took
# the place of the layouts and their knobs.
REMOVED = {
    "layout": "every device now computes a block of its own rows (docs/trainer.md); drop it",
    "micro_batch_size": "use memory_rows (the most rows a device computes at once)",
    "capacity_buckets": "use bucket_ratio (per-device buckets are always on)",
}


def _kind(value: Any) -> str:
    if isinstance(value, Mapping | ml_collections.ConfigDict):
        return _SECTION
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | np.integer):
        return "int"
    if isinstance(value, float | np.floating):
        return "float"
    if isinstance(value, tuple | list):
        return "tuple"
    return type(value).__name__


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{'a.b': leaf, ...} plus an entry for every section itself."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        full = f"{prefix}{key}"
        out[full] = value
        if _kind(value) == _SECTION:
            out.update(_flatten(value, f"{full}."))
    return out


def _compatible(expected: Any, got: Any) -> bool:
    want, have = _kind(expected), _kind(got)
    if want == "None":
        return True
    if want == "float" and have == "int":
        return True  # ml_collections widens int to float too
    if want != have:
        return False
    if want == "tuple" and expected:  # elements like the default's (ints fit a float tuple)
        return all(
            _compatible(expected[0] if len(set(map(_kind, expected))) == 1 else None, v)
            for v in got
        )
    return True


def default_reference(config: Any = None) -> ml_collections.ConfigDict:
    """The base config, after importing the config's controller plug-in (if it names one), so
    the plug-in's keyword arguments count as known keys."""
    plugin = ""
    if config is not None and "controller" in config:
        plugin = config["controller"].get("plugin", "") or ""
    controllers.load_plugin(plugin)
    from omnilearn_jax.config.schema import base_config

    return base_config()


def check_counts(config: Any) -> None:
    """num_workers and global_batch_size >= 1, checked before any other key is read: the
    paper configs derive their step counts from the batch (train rows // B), so with a zero
    batch reading them (as the type check does, every key) was a ZeroDivisionError."""
    for key in ("num_workers", "global_batch_size"):
        value = config.get(key)
        if isinstance(value, int) and value < 1:
            raise ValueError(f"{key} must be >= 1, got {value}")
    # cpu_devices 0 failed as the CPU backend started (a traceback), -2 ran on one device
    # without a word; num_devices -1 passed until the trainer counted devices.
    for key, least in (("cpu_devices", 1), ("num_devices", 0)):
        value = config.get(key)
        if isinstance(value, int) and value < least:
            raise ValueError(f"{key} must be >= {least}, got {value}")


def check_config_types(config: Any, reference: Any = None) -> None:
    """Raises one ValueError line listing unknown keys (with the closest known key) and values
    whose type differs from the reference's (the base config when None)."""
    check_counts(config)
    reference = default_reference(config) if reference is None else reference
    known, given = _flatten(reference), _flatten(config)
    problems = []
    for key, value in given.items():
        parent = key.rpartition(".")[0]
        if parent and parent in given and _kind(known.get(parent)) != _SECTION:
            continue  # inside an unknown section or a leaf: reported once, at the top
        if key in REMOVED and key not in known:
            problems.append(f"config key {key!r} was removed: {REMOVED[key]}")
        elif key not in known:
            problems.append(f"unknown config key {key!r}{suggest(key, known)}")
        elif not _compatible(known[key], value):
            want, have = _kind(known[key]), _kind(value)
            detail = f"{have} {value!r}" if have != _SECTION else "a section"
            expect = want if want != _SECTION else "a section"
            if want == have == "tuple":  # "should be tuple, got tuple (8, 16.5)" said nothing
                expect = f"a tuple of {_kind(known[key][0])}s"
                bad = next(v for v in value if not _compatible(known[key][0], v))
                detail = f"{value!r} (holding {_kind(bad)} {bad!r})"
            problems.append(f"config key {key!r} should be {expect}, got {detail}")
    if problems:
        raise ValueError("; ".join(problems))


def check_config(config: Any) -> None:
    """Types, then every check that needs neither devices nor data; raises ValueError."""
    check_config_types(config)
    import controllers
    from omnilearn_jax import cluster
    from omnilearn_jax.config import schema

    try:
        check_choice("controller", config.controller.name, controllers.available())
    except ValueError as e:
        raise ValueError(f"{e} ({controllers.registry.PLUGIN_HINT})") from None
    check_choice("hetero.name", config.hetero.name, cluster.available_profiles())
    from omnilearn_jax.data import datasets

    datasets.check_sizes(config.dataset, config.global_batch_size)  # before keys derived from it
    # Devices are checked by the trainer; here assume the requested count (or one a worker).
    # Assumed one a worker unless given; the capacity check waits for the real count (on CPU
    # main.py makes cpu_devices: against W devices it passed cells the trainer refused).
    check_for_devices(
        config, config.num_devices or config.num_workers, known=bool(config.num_devices)
    )
    w, b = config.num_workers, config.global_batch_size
    controllers.check_bounds(w, b, config.controller.b_min, config.controller.b_max)
    if "faults" in config:
        from omnilearn_jax.engine.faults import PlantedFaults

        PlantedFaults(config.faults).check(w)
    try:
        schema.make_controller(config)
    except TypeError as e:  # unknown keyword argument of the policy
        raise ValueError(str(e)) from None
    _check_cluster_values(config)


def _check_cluster_values(config: Any) -> None:
    """The `hetero` and `cost` sections' values, before the data is loaded: a bad level,
    variant or cost (hetero.level=3, cost.noise=-1) passed the ablation runner's check of every
    cell and failed each cell as it started. An epoch is taken as one step here, so a
    schedule counted in epochs is checked against the run's length once the trainer knows the
    epoch's (engine/timing.check_cluster)."""
    from omnilearn_jax.cluster import make_profile
    from omnilearn_jax.engine.timing import check_cost, profile_steps

    steps, _ = profile_steps(config)
    make_profile(
        config.hetero,
        num_workers=config.num_workers,
        num_steps=max(steps, 1),
        steps_per_epoch=1,
        seed=config.seed,
    )
    check_cost(config)


CLOCKS = ("virtual", "wall")
WEIGHTINGS = ("share", "lr", "mean")  # asp.weighting
MODES = ("bsp", "asp")
WANDB_MODES = ("online", "offline", "disabled")


def check_wandb(section: Any) -> None:
    """W&B's names and timeout, which W&B itself refuses only when the run starts (then the
    run trained untracked after one printed line)."""
    for key in ("project", "entity"):
        name = str(section.get(key, "") or "")
        bad = sorted(set(name) & set("/\\#?%:"))
        if bad or len(name) > 128:
            why = f"holds {''.join(bad)!r}" if bad else "is over 128 characters"
            hint = " (a team is wandb.entity, not a prefix of the project)" if "/" in bad else ""
            raise ValueError(f"wandb.{key}={name!r} {why}, which W&B refuses{hint}")
    for tag in section.get("tags", ()) or ():
        if str(tag).startswith("(") and "," in str(tag):  # ml_collections' one-word tuple
            raise ValueError(
                f"wandb.tags got one tag {str(tag)!r}: write a tuple of tags with quotes, "
                f"\"--config.wandb.tags=('hl8','paper')\""
            )
    timeout = float(section.get("init_timeout", 30.0))
    if not timeout > 0:
        raise ValueError(f"wandb.init_timeout must be > 0 seconds, got {timeout}")


def _choice(what: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"unknown {what} {value!r}; valid values: {', '.join(valid)}")


def check_for_devices(
    config: ml_collections.ConfigDict,
    num_available_devices: int,
    num_processes: int = 1,
    known: bool = True,
) -> None:
    """The checks against the devices and processes at hand (what a trainer calls, and
    `check_config` with the requested device count); raises ValueError for the first
    problem found."""
    from omnilearn_jax import models
    from omnilearn_jax.data import datasets
    from omnilearn_jax.engine import mesh, optim, step

    check_counts(config)
    datasets.check_name(config.dataset.name)
    models.check_name(config.model.name)
    models.check_sizes(config.model)
    mesh.check_backend(config.backend)
    optim.check(config.optimizer)
    _choice("clock", config.clock, CLOCKS)
    from omnilearn_jax.run.cpu_limit import DISPATCH  # where CPU programs run

    _choice("cpu_dispatch", config.get("cpu_dispatch", "auto"), DISPATCH)
    _choice("mode", config.mode, MODES)
    _choice("wandb.mode", config.wandb.mode, WANDB_MODES)
    if config.wandb.mode != "disabled":  # a run that never starts W&B is not held to it
        check_wandb(config.wandb)
    orders = step.WAIT_ORDERS
    _choice("hetero.inject_order", config.hetero.get("inject_order", orders[0]), orders)
    inject = config.hetero.get("inject", 0.0)
    if not 0 <= inject < math.inf:
        raise ValueError(f"hetero.inject must be >= 0 seconds a sample, got {inject}")
    if inject and config.clock != "wall":  # the virtual clock models the speeds itself
        raise ValueError(
            f"hetero.inject={inject} makes workers wait on the wall clock; the virtual clock "
            f"ignores it: set clock=wall, or hetero.inject=0"
        )
    if config.mode == "asp":
        _check_asp(config, num_available_devices, num_processes)
    if not 1 < config.bucket_ratio < math.inf:  # NaN and inf: an OverflowError, later
        raise ValueError(
            f"bucket_ratio must be a finite number > 1 (each bucket about that many times the "
            f"last), got {config.bucket_ratio}"
        )
    devices = config.num_devices or num_available_devices
    if known and config.capacity and config.capacity * devices < config.global_batch_size:
        raise ValueError(  # a split could not fit: the framework broke its own rule at step 0
            f"capacity={config.capacity} rows a device x {devices} devices cannot hold "
            f"global_batch_size={config.global_batch_size}: raise capacity"
        )
    if config.memory_rows < 0:
        raise ValueError(f"memory_rows must be >= 0 (0 = no limit), got {config.memory_rows}")
    _choice("train.nan_policy", config.train.nan_policy, ("stop", "skip"))
    _check_measured_cost(config, num_processes)
    _check_text(config)
    num_workers = config.num_workers
    factor = config.train.outlier_factor  # NaN or inf passed `<= 1` and turned the guard off
    if not (math.isfinite(factor) and factor > 1):
        raise ValueError(f"train.outlier_factor must be a finite number > 1, got {factor}")
    if config.train.num_steps < 1:
        raise ValueError(f"train.num_steps must be >= 1, got {config.train.num_steps}")
    warmup = config.optimizer.get("warmup_steps", 0)
    if config.optimizer.get("schedule") == "warmup_cosine" and warmup >= config.train.num_steps:
        raise ValueError(  # the rate never reached its peak: a run left at chance, exit 0
            f"optimizer.warmup_steps={warmup} is not below train.num_steps="
            f"{config.train.num_steps}: the learning rate would never reach "
            f"optimizer.learning_rate"
        )
    _check_train(config.train)
    _check_bound_sentinels(config.controller)
    num_devices = config.num_devices or num_available_devices
    if num_devices > num_available_devices:
        raise ValueError(
            f"num_devices={num_devices} but only {num_available_devices} device(s) are available"
        )
    if num_processes > 1 and config.num_devices:  # each process gives an equal share
        mesh.check_process_share(num_devices, num_processes, num_available_devices // num_processes)
    if num_workers % num_devices:
        divisor = f"a divisor of {num_workers}" + (
            f" that is a multiple of the {num_processes} processes" if num_processes > 1 else ""
        )
        raise ValueError(
            f"num_workers={num_workers} is not a multiple of the {num_devices} devices in use; "
            f"set num_workers to a multiple of {num_devices} or num_devices to {divisor}"
        )
    _check_sizes_shape(config)


# train.KEY: (the least valid value, what the key is), for the loop's periods and limits.
_TRAIN_MIN = {
    "log_every": (1, "steps between progress lines"),
    "eval_every": (1, "steps between evaluations"),
    "eval_batch_size": (1, "rows an evaluation computes at once"),
    "checkpoint_every": (0, "steps between checkpoints; 0 = only at the end"),
    "keep_checkpoints": (1, "checkpoints kept; 0 would keep none to resume from"),
    "max_skipped": (0, "non-finite updates skipped in a row"),
}


def _check_train(train) -> None:
    """A zero period would divide a step count after compiling; a negative one or a zero
    limit would be silently accepted (checkpoint every step, no checkpoint kept)."""
    for key, (least, what) in _TRAIN_MIN.items():
        if train[key] < least:
            raise ValueError(f"train.{key} must be >= {least} ({what}), got {train[key]}")
    if train.nan_policy == "skip" and train.max_skipped < 1:  # 0 would skip nothing
        raise ValueError(
            f"train.max_skipped must be >= 1 with train.nan_policy=skip (non-finite updates "
            f"skipped in a row), got {train.max_skipped}; or set train.nan_policy=stop"
        )


def _check_bound_sentinels(section) -> None:
    """b_min and b_max are sizes or a sentinel (controllers/base.py, `resolve_bounds`); any
    other negative value would silently act as the paper's rule."""
    allowed = {
        "b_min": "0 or -1 (the paper's rule B/(2W))",
        "b_max": "0 (0 = no upper bound) or -1 (the paper's rule 3B/W)",
    }
    for key, what in allowed.items():
        value = section[key]
        if np.any(np.asarray(value) < controllers.PAPER_BOUND):
            raise ValueError(f"controller.{key} must be >= {what}, got {value}")


def _check_sizes_shape(config) -> None:
    num_workers, batch = config.num_workers, config.global_batch_size
    sizes = tuple(config.controller.get("sizes", ()))
    if sizes:
        if len(sizes) != num_workers:
            raise ValueError(
                f"controller.sizes has {len(sizes)} entries for {num_workers} workers: {sizes}"
            )
        if any(s < 0 for s in sizes):
            raise ValueError(f"controller.sizes must be >= 0, got {sizes}")
        if sum(sizes) != batch:
            raise ValueError(
                f"controller.sizes {sizes} sum to {sum(sizes)}, not global_batch_size {batch}"
            )


def check_static_sizes(config, lo, hi) -> None:
    """An explicit split must also respect the bounds the trainer enforces."""
    sizes = tuple(config.controller.get("sizes", ()))
    if config.controller.name != "static" or not sizes:
        return
    bad = [k for k, s in enumerate(sizes) if not lo[k] <= s <= hi[k]]
    if bad:
        k = bad[0]
        raise ValueError(
            f"controller.sizes[{k}]={sizes[k]} is outside the bounds [{lo[k]}, {hi[k]}] "
            f"(controller.b_min/b_max and device capacity); loosen them or change the split"
        )


def _check_asp(config, num_available_devices: int, num_processes: int) -> None:
    if num_processes > 1:  # a push through a collective would wait for every process
        raise ValueError(
            f"mode=asp does not run inside a multi-process JAX run, got {num_processes} "
            f"processes; run it in one process with all the devices, or through "
            f"omnilearn_jax.launch with one worker a process (docs/async.md)"
        )
    section = config.distributed
    if section.enabled and section.num_processes > 1:  # across processes (asp/remote.py)
        if ":" not in section.coordinator_address:
            raise ValueError(
                f"mode=asp across processes needs distributed.coordinator_address=HOST:PORT "
                f"(the server listens there for its workers), got "
                f"{section.coordinator_address!r}; omnilearn_jax.launch sets it"
            )
        alone = bool(config.asp.server_process)  # the server in a process of its own
        if section.num_processes != config.num_workers + alone:
            raise ValueError(
                f"mode=asp across processes runs one worker a process"
                f"{' and the server in one more (asp.server_process)' if alone else ''}: got "
                f"{section.num_processes} processes for num_workers={config.num_workers}; "
                f"launch --num_processes={config.num_workers + alone}"
            )
    elif config.asp.server_process:
        raise ValueError(
            "asp.server_process=True gives the server a process of its own in an async run "
            "across processes; run it through omnilearn_jax.launch --num_processes="
            f"{config.num_workers + 1} (one a worker, one the server), or set it False"
        )
    budget, bound = config.asp.time_budget, config.asp.staleness_bound
    if not 0 <= budget < math.inf:  # a negative budget ran no update and said `complete`
        raise ValueError(
            f"asp.time_budget must be >= 0 seconds (0 = no budget: stop after "
            f"train.num_steps updates), got {budget}"
        )
    if config.asp.controller_every < 0:  # every update decided, as at 1
        raise ValueError(
            f"asp.controller_every must be >= 0 updates (0 = W, about one a worker), got "
            f"{config.asp.controller_every}"
        )
    if bound < -1:
        raise ValueError(
            f"asp.staleness_bound must be >= 0 or -1 (no bound: plain ASP), got {bound}"
        )
    _choice("asp.weighting", config.asp.weighting, WEIGHTINGS)
    _choice("asp.lr_scaling", config.asp.lr_scaling, ("none", "linear"))
    if config.asp.lr_scaling == "linear" and config.asp.weighting != "mean":
        raise ValueError(
            f"asp.lr_scaling=linear with asp.weighting={config.asp.weighting} scales an update "
            f"by the worker's share twice (b_k squared); use weighting=mean with linear "
            f"scaling, or lr_scaling=none"
        )
    num_devices = config.num_devices or num_available_devices
    if config.num_workers != num_devices:
        raise ValueError(
            f"mode=asp needs one worker per device (each worker's gradient is its device's); "
            f"got num_workers={config.num_workers} on {num_devices} devices"
        )
    if config.backend != "shard_map":
        raise ValueError("mode=asp uses the shard_map backend; set backend=shard_map")


def _check_measured_cost(config, num_processes: int) -> None:
    curve = str(config.cost.get("curve", ""))
    if curve and curve != "measure":  # read here too: an ablation's cells all started, and
        # each failed on a missing or damaged curve
        from omnilearn_jax.cluster.curve import load_curve

        load_curve(curve)
    if curve == "measure" and num_processes > 1:  # on every process, before anything runs
        raise ValueError(
            f"cost.curve=measure needs a single-process run, got {num_processes} processes; "
            f"measure once with experiments.curves.measure and pass the file as cost.curve"
        )
    if curve and config.cost.per_sample_cost == 0:
        raise ValueError(
            f"cost.per_sample_cost=0 asks to calibrate a per-sample cost, but cost.curve="
            f"{curve} replaces the per-sample cost model; keep one (with a curve, leave "
            f"cost.per_sample_cost > 0: it is not used)"
        )


def _check_text(config) -> None:
    """Token sequences and perplexity go together: dataset.name=text, model.name=transformer
    and train.target_perplexity."""
    target = config.train.get("target_perplexity", 0.0)
    if target < 0:
        raise ValueError(f"train.target_perplexity must be >= 0 (0 = none), got {target}")
    accuracy = config.train.get("target_accuracy", 0.0)
    if not 0 <= accuracy <= 1:  # 1.5 (a percentage's habit) was silently never reached
        raise ValueError(f"train.target_accuracy must be in [0, 1] (0 = none), got {accuracy}")
    text = config.dataset.name == "text"
    if target > 0 and not text:
        raise ValueError(
            f"train.target_perplexity={target} is for text data (perplexity is reported for "
            f"dataset.name=text only); for dataset.name={config.dataset.name} set "
            f"train.target_accuracy"
        )
    if text and config.model.name != "transformer":
        raise ValueError(
            f"dataset.name=text gives token sequences with a next-token target at every "
            f"position, which only model.name=transformer predicts; got model.name="
            f"{config.model.name}"
        )
    if config.model.name == "transformer" and not text:  # it failed while compiling
        raise ValueError(
            f"model.name=transformer predicts a token at every position of dataset.name=text; "
            f"dataset.name={config.dataset.name} has one label an example: use mlp, cnn or "
            f"resnet18"
        )
    # < 0 failed at the first batch, after compiling, without the key; 2^63 and above
    # overflowed in jax.random.key ("Python int too large to convert to C long")
    if not 0 <= config.seed < 2**63:
        raise ValueError(f"seed must be in [0, 2^63), got {config.seed}")
    if config.dataset.data_seed < 0:  # numpy's "expected non-negative integer", unnamed
        raise ValueError(f"dataset.data_seed must be >= 0, got {config.dataset.data_seed}")
