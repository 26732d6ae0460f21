"""Experiment tracking: W&B for the trainer, plus offline read-back for notebooks.

`make_tracker` picks an implementation from `config.wandb`; every tracker has the same four
methods (`log_train`, `log_eval`, `summary`, `close`), so the trainer never branches on W&B.
Nothing here imports wandb at import time: the trainer and tests pay for it only when a run
actually logs to W&B or reads an offline run back.
"""

from omnilearn_jax.tracking.offline import (
    find_offline_runs,
    read_offline_config,
    read_offline_history,
    read_offline_summary,
    run_id_of,
)
from omnilearn_jax.tracking.trackers import (
    MemoryTracker,
    NullTracker,
    Tracker,
    WandbTracker,
    flatten_record,
    make_tracker,
    run_metadata,
)

__all__ = [
    "MemoryTracker",
    "NullTracker",
    "Tracker",
    "WandbTracker",
    "find_offline_runs",
    "run_id_of",
    "flatten_record",
    "make_tracker",
    "read_offline_config",
    "read_offline_history",
    "read_offline_summary",
    "run_metadata",
]
