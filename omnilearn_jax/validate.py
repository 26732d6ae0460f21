"""Checks a config before anything is loaded or compiled, with errors that name the fix."""

from __future__ import annotations

import ml_collections

from omnilearn_jax import data, mesh, models, optim

CLOCKS = ("virtual", "wall")
MODES = ("bsp", "asp")
WANDB_MODES = ("online", "offline", "disabled")


def _choice(what: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"unknown {what} {value!r}; valid values: {', '.join(valid)}")


def check_config(
    config: ml_collections.ConfigDict, num_available_devices: int, num_processes: int = 1
) -> None:
    """Raises ValueError for the first problem found; returns None when the config is sound."""
    data.check_name(config.dataset.name)
    models.check_name(config.model.name)
    mesh.check_backend(config.backend)
    optim.check(config.optimizer)
    _choice("clock", config.clock, CLOCKS)
    _choice("mode", config.mode, MODES)
    _choice("wandb.mode", config.wandb.mode, WANDB_MODES)
    if config.mode == "asp":
        _check_asp(config, num_available_devices, num_processes)
    if config.bucket_ratio <= 1:
        raise ValueError(
            f"bucket_ratio must be > 1 (each bucket about that many times the last), got "
            f"{config.bucket_ratio}"
        )
    if config.memory_rows < 0:
        raise ValueError(f"memory_rows must be >= 0 (0 = no limit), got {config.memory_rows}")
    _choice("train.nan_policy", config.train.nan_policy, ("stop", "skip"))
    _check_measured_cost(config, num_processes)
    _check_text(config)
    num_workers, batch = config.num_workers, config.global_batch_size
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if batch < 1:
        raise ValueError(f"global_batch_size must be >= 1, got {batch}")
    if config.train.outlier_factor <= 1:
        raise ValueError(f"train.outlier_factor must be > 1, got {config.train.outlier_factor}")
    if config.train.num_steps < 1:
        raise ValueError(f"train.num_steps must be >= 1, got {config.train.num_steps}")
    num_devices = config.num_devices or num_available_devices
    if num_devices > num_available_devices:
        raise ValueError(
            f"num_devices={num_devices} but only {num_available_devices} device(s) are available"
        )
    if num_workers % num_devices:
        raise ValueError(
            f"num_workers={num_workers} is not a multiple of the {num_devices} devices in use; "
            f"set num_workers to a multiple of {num_devices} or num_devices to a divisor of "
            f"{num_workers}"
        )
    _check_sizes_shape(config)


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
    if num_processes > 1:  # its server and workers address every device from one process
        raise ValueError(
            f"mode=asp runs in one process only, got {num_processes} processes; run it "
            f"without the launcher (one process with all the devices) or use mode=bsp"
        )
    _choice("asp.weighting", config.asp.weighting, ("share", "lr", "mean"))
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
