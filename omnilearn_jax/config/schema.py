"""The full set of config keys with typed defaults; every config in configs/ starts here.

Each key has a default of the type the command line parses (tuples for lists, '' for
unset strings, 0 for "automatic" numbers, or -1 where 0 is a value: `controller.persist`,
picked by the clock, `distributed.process_id`, and the switches `asp.staleness_bound` and
`faults.*_step`, off at -1), so any key can be overridden with
`--config.KEY=VALUE` (ml_collections cannot override a None default).
"""

from __future__ import annotations

import ml_collections
import numpy as np

import controllers
from omnilearn_jax.cluster import cost_defaults, hetero_defaults

# Arguments several policies share with different defaults, whose one value in a config
# `base_config` sets itself (each policy's own default applies only to `controllers.make`).
SET_BY_SCHEMA = ("b_min", "b_max", "jump", "persist")


def controller_defaults() -> dict:
    """Every keyword argument of every registered controller, with its default.

    One section holds them all, so `--config.controller.name=pi --config.controller.ki=0.5`
    works on any config; `controllers.make_from_config` passes each policy only its own. An
    argument two policies declare with different defaults has one value there, so it is an
    error (a plug-in's `deadband=0.5` had become proportional's default, or the other way
    round, by the order of the names), unless `base_config` sets it (SET_BY_SCHEMA).
    """
    merged: dict = {}
    owner: dict = {}
    for name in controllers.available():
        for arg, default in controllers.default_kwargs(name).items():
            value = tuple(default) if isinstance(default, list) else default
            if arg in merged and merged[arg] != value and arg not in SET_BY_SCHEMA:
                raise ValueError(
                    f"controllers {owner[arg]!r} and {name!r} declare {arg}={merged[arg]!r} "
                    f"and {arg}={value!r}: one config section holds every registered "
                    f"policy's arguments, so a shared argument needs one default; give one "
                    f"of them another name or the same default"
                )
            merged.setdefault(arg, value)
            owner.setdefault(arg, name)
    return merged


# `controller.persist` when the config leaves it unset: the trainer picks it by the clock
# (`controller_section`). Any value >= 0 given in a config or on the command line is kept.
PERSIST_BY_CLOCK = -1.0


def make_controller(
    config: ml_collections.ConfigDict, bounds: tuple | None = None
) -> controllers.Controller:
    """The run's controller, built from `controller_section(config)` (persist by the clock);
    the same object for an equal section (`controllers.shared_from_config`). `bounds`, the
    trainer's per-worker (lo, hi), reach the policy where they are tighter than the config's
    own (a device's capacity): the oracle's min-max solve, for one, must see them, not have
    its split cut down to them afterwards (5 % slower a step at HL8 with capacity=64)."""
    section = controller_section(config)
    if bounds is not None:
        w, b = config.num_workers, config.global_batch_size
        own = controllers.resolve_bounds(w, b, section["b_min"], section["b_max"], xp=np)
        if any(not np.array_equal(a, o) for a, o in zip(bounds, own, strict=True)):
            section["b_min"], section["b_max"] = (tuple(int(v) for v in a) for a in bounds)
    return controllers.shared_from_config(section)


def controller_section(config: ml_collections.ConfigDict) -> dict:
    """`config.controller` as a dict, with `persist` picked by the run's clock when the config
    leaves it at PERSIST_BY_CLOCK (the default): 0 on the virtual clock, 0.1 s on the wall.

    `persist` (controllers/tracking.py) makes a speed change last that many seconds of
    measured steps, as well as `confirm` samples, before a policy believes it. It guards the
    wall clock against host-scheduler bursts, so there it stays DEFAULT_PERSIST (0.1 s). The
    virtual clock models each step's time: it has no bursts, only `cost.noise`, independent
    per step, which `confirm` already handles; there `persist` only delays every decision
    (0.1 s is 30+ steps of ~3 ms), so it is 0. Measured (configs/curves.py:curve=resnet18,
    limit=0,hetero=changing, proportional): 0.29 s of virtual time at persist 0.1, 0.21 s at
    0, static 0.37 s; the predictive trainer study fell from ~1.73x to 1.28x with 0.1 s.
    """
    from controllers.tracking import DEFAULT_PERSIST

    section = config.controller.to_dict()
    if section.get("persist") == PERSIST_BY_CLOCK:
        section["persist"] = 0.0 if config.clock == "virtual" else DEFAULT_PERSIST
    return section


def base_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_workers = 8
    c.global_batch_size = 128
    c.num_devices = 0  # devices to use; 0 = all (must divide num_workers; an equal share a process)
    c.cpu_devices = 8  # CPU devices that main.py creates when the run is on CPU
    # Where CPU programs run: auto (in the calling thread only where that measured faster:
    # one core's quota of a larger mask, or one device a process of several unpinned;
    # run/cpu_limit.py), async (a runtime thread, JAX's default) or sync (the calling thread).
    c.cpu_dispatch = "auto"
    c.backend = "shard_map"  # shard_map | pmap
    # Each device computes one block of its own rows, of the smallest precompiled bucket
    # size that holds them (docs/trainer.md); buckets run from 8 rows to the capacity, each
    # about bucket_ratio times the last (smaller ratio: less padding, more programs).
    c.bucket_ratio = 1.25
    c.memory_rows = 0  # most rows a device computes at once (larger blocks accumulate); 0 = all
    c.capacity = 0  # rows one device may hold; 0 = min(B, workers_per_device * b_max)
    c.clock = "virtual"  # virtual | wall
    c.mode = "bsp"  # bsp (synchronous) | asp (parameter server, docs/async.md)

    c.asp = ml_collections.ConfigDict()
    c.asp.staleness_bound = -1  # SSP bound s: a worker waits when s iterations ahead; -1 = none
    # share: gradient scaled by b_k / B (decay too) | lr: step size scaled by b_k / B (for
    # adamw) | mean: each update full size
    c.asp.weighting = "share"
    c.asp.lr_scaling = "none"  # none | linear (update scaled by b_k / (B / W)): weighting=mean
    c.asp.time_budget = 0.0  # stop when the clock passes this (seconds); 0 = num_steps updates
    c.asp.controller_every = 0  # updates between controller decisions; 0 = W
    # Across processes (launch, docs/async.md): True gives the server process 0 to itself and
    # runs worker k in process k + 1 (W + 1 processes); False runs it beside worker 0.
    c.asp.server_process = False

    c.dataset = ml_collections.ConfigDict()
    c.dataset.name = "digits"  # digits | mnist1d | synthetic | npz | text
    c.dataset.data_dir = "data_cache"  # where generated data sets are cached
    c.dataset.path = ""  # npz: a local file with x_train, y_train, x_test, y_test; text: a file
    c.dataset.seq_len = 64  # text: tokens (bytes) per sequence, the model's context
    c.dataset.input_shape = (32, 32, 3)  # synthetic
    c.dataset.num_classes = 10  # synthetic
    c.dataset.num_train = 4096  # synthetic, text (sequences)
    c.dataset.num_test = 1024  # synthetic, text (sequences)
    c.dataset.data_seed = 0  # synthetic
    c.dataset.test_fraction = 0.2  # digits

    c.model = ml_collections.ConfigDict()
    c.model.name = "cnn"  # mlp | cnn | resnet18 | transformer
    c.model.hidden = 128  # mlp: width of each hidden layer; cnn: dense width before the head
    c.model.depth = 1  # mlp: hidden layers; transformer: blocks
    c.model.features = (32, 64)  # cnn: conv channels
    c.model.width = 64  # resnet18: stem channels; transformer: model width
    c.model.num_heads = 4  # transformer: attention heads (width must be a multiple)
    c.model.mlp_ratio = 4  # transformer: MLP hidden width / model width
    c.model.norm = True  # cnn: GroupNorm after each conv

    c.optimizer = ml_collections.ConfigDict()
    c.optimizer.name = "sgd"  # sgd | adamw
    c.optimizer.learning_rate = 0.05
    c.optimizer.momentum = 0.9
    c.optimizer.nesterov = False
    c.optimizer.weight_decay = 0.0
    c.optimizer.schedule = "constant"  # constant | cosine | warmup_cosine
    c.optimizer.warmup_steps = 0

    c.train = ml_collections.ConfigDict()
    c.train.num_steps = 200
    c.train.eval_every = 50  # steps between evaluations (and one at the end)
    c.train.log_every = 20  # steps between progress lines
    c.train.eval_batch_size = 512
    c.train.target_accuracy = 0.0  # time_to_target is reported when > 0
    # Lower is better: time_to_target is the first eval at or under it, when > 0 (text only).
    c.train.target_perplexity = 0.0
    c.train.save_params = False  # write WORKDIR/final_params.npz at the end
    # Steps between checkpoints (and one at the end; 0 = end only). Each save costs orbax tens
    # of ms whatever the model: at 50, a 30,000-step smoke run spent two thirds of its 188 s
    # saving. A run stopped by a signal saves where it stops (docs/robustness.md: which).
    c.train.checkpoint_every = 500
    c.train.keep_checkpoints = 2  # newest checkpoints kept (>= 1: a run resumes from one)
    c.train.resume = True  # continue from WORKDIR/checkpoints when a checkpoint is there
    c.train.nan_policy = "stop"  # stop | skip (drop non-finite updates, max_skipped in a row)
    c.train.max_skipped = 10  # >= 1 under nan_policy=skip (0 would skip nothing)
    c.train.outlier_factor = 10.0  # reject a worker time this far from its last per-sample time

    # Planted faults, for robustness experiments (see omnilearn_jax/engine/faults.py).
    c.faults = ml_collections.ConfigDict()
    c.faults.nan_step = -1  # 0-based: this step's inputs become NaN (7: the 8th); -1 = never
    c.faults.bad_times = ()  # flat (step, worker, seconds) triples replacing measured times
    c.faults.crash_step = -1  # the run raises after this many steps (a stand-in for a kill)

    c.controller = ml_collections.ConfigDict(controller_defaults())
    # -1 = by the clock: 0 on the virtual clock, 0.1 s on the wall clock (make_controller).
    c.controller.persist = PERSIST_BY_CLOCK
    c.controller.name = "static"  # see controllers.available()
    c.controller.plugin = ""  # a module to import first, registering user controllers
    c.controller.sizes = ()  # static: an explicit split
    c.controller.capacities = ()  # static: split proportional to these (e.g. cores)
    # Bounds on every worker's batch, enforced by the trainer for every controller:
    # 0/0 = none (device capacity only); -1 = the paper's rule B/(2W) and 3B/W.
    c.controller.b_min = 0
    c.controller.b_max = 0
    # One `jump` for pi, proportional and predictive: 0.25 (predictive's own default, 0.4,
    # applies to `controllers.make("predictive")`, controllers/predictive.py DEFAULT_JUMP;
    # configs ran it at 0.25, which the held-out tuning also picks for it,
    # benchmarks/controller_heldout.py).
    c.controller.jump = 0.25

    c.hetero = ml_collections.ConfigDict(hetero_defaults())
    c.cost = ml_collections.ConfigDict(cost_defaults())

    c.distributed = ml_collections.ConfigDict()
    c.distributed.enabled = False  # call jax.distributed.initialize (multi-process runs)
    c.distributed.coordinator_address = ""  # host:port of process 0; '' = auto-detect
    c.distributed.num_processes = 0  # 0 = auto-detect
    c.distributed.process_id = -1  # -1 = auto-detect
    c.distributed.local_device_ids = ()  # () = all of this process's devices
    c.distributed.initialization_timeout = 120  # seconds to wait for every process
    c.distributed.heartbeat_timeout = 20  # seconds before a silent process counts as dead
    c.distributed.shutdown_timeout = 30  # seconds a finished process waits for the others

    c.wandb = ml_collections.ConfigDict()
    c.wandb.mode = "disabled"  # online | offline | disabled
    c.wandb.project = "omnilearn-jax"
    c.wandb.entity = ""  # '' = the account's default entity
    c.wandb.group = ""  # runs of one ablation share a group (the runner sets it)
    c.wandb.tags = ()  # extra tags; controller and profile are always added
    c.wandb.dir = ""  # '' = the run's workdir (offline runs land in WORKDIR/wandb)
    c.wandb.init_timeout = 30.0  # seconds; an online run that cannot start goes offline
    return c
