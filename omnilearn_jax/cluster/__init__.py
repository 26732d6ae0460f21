"""Host-side model of a heterogeneous cluster: worker speeds, compute costs, a virtual clock.

Pure numpy, deterministic given seeds; the trainer calls it once per step on the host.
See docs/cluster.md for every profile, config key and formula.
"""

from omnilearn_jax.cluster.analytic import uniform_vs_balanced_reduction
from omnilearn_jax.cluster.clock import VirtualClock
from omnilearn_jax.cluster.cost import CostModel, ring_allreduce_time, unavailable_workers
from omnilearn_jax.cluster.curve import CostCurve, load_curve, measure_curve
from omnilearn_jax.cluster.defaults import cost_defaults, hetero_defaults
from omnilearn_jax.cluster.profiles import HL_TABLES, Profile, hl_speeds
from omnilearn_jax.cluster.registry import available_profiles, make_profile

__all__ = [
    "HL_TABLES",
    "CostCurve",
    "CostModel",
    "Profile",
    "VirtualClock",
    "available_profiles",
    "cost_defaults",
    "hetero_defaults",
    "hl_speeds",
    "load_curve",
    "make_profile",
    "measure_curve",
    "ring_allreduce_time",
    "unavailable_workers",
    "uniform_vs_balanced_reduction",
]
