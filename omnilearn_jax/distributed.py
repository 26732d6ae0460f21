"""Joining a multi-process JAX run (`distributed.*` config keys).

`jax.distributed.initialize` is called only when `distributed.enabled` is true. Empty or
negative values are left to JAX, which detects them on SLURM, TPU pods and some Kubernetes
set-ups (its cluster auto-detection); on one machine the launcher (`omnilearn_jax.launch`)
passes them explicitly. Must run before the first JAX operation.
"""

from __future__ import annotations

import jax


def initialize(section) -> bool:
    """Joins the run described by the config's `distributed` section; True if it did."""
    if not section.enabled:
        return False
    kwargs = {
        "initialization_timeout": int(section.initialization_timeout),
        "heartbeat_timeout_seconds": int(section.heartbeat_timeout),
        "shutdown_timeout_seconds": int(section.shutdown_timeout),
    }
    if section.coordinator_address:
        kwargs["coordinator_address"] = section.coordinator_address
    if section.num_processes > 0:
        kwargs["num_processes"] = int(section.num_processes)
    if section.process_id >= 0:
        kwargs["process_id"] = int(section.process_id)
    if section.local_device_ids:
        kwargs["local_device_ids"] = list(section.local_device_ids)
    # Collectives between CPU processes need an implementation; it does nothing on GPU/TPU.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**kwargs)
    return True
