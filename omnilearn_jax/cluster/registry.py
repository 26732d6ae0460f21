"""Build a speed profile from the config's `hetero` section."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from omnilearn_jax.cluster.defaults import hetero_defaults, is_whole, read_section, set_away
from omnilearn_jax.cluster.modifiers import (
    ModifiedProfile,
    Modifier,
    Preempt,
    RandomWalk,
    SpeedNoise,
)
from omnilearn_jax.cluster.profiles import Profile, StaticProfile, hl_speeds
from omnilearn_jax.cluster.schedule import schedule_profile, trace_profile

BASE_PROFILES = ("uniform", "hl", "cores", "schedule", "trace")
MODIFIER_PROFILES = ("noise", "random_walk", "preempt")


def available_profiles() -> tuple[str, ...]:
    """Every valid `hetero.name`: base profiles, then modifier shorthands."""
    return BASE_PROFILES + MODIFIER_PROFILES


def _whole(h: dict, key: str) -> int:
    """hetero.KEY as an int, refused unless it is a whole number, Python's or NumPy's (given
    as a dict, 2.5 had been cut to 2 without a word; a ConfigDict refuses a float for an int
    field itself)."""
    value = h[key]
    if not is_whole(value):
        raise ValueError(f"hetero.{key} must be a whole number, got {value!r}")
    return int(value)


def _base(name: str, h: dict, num_workers: int, num_steps: int, steps_per_epoch: int) -> Profile:
    if name == "uniform":
        return StaticProfile(np.ones(num_workers), "uniform")
    if name == "hl":
        level, variant = _whole(h, "level"), str(h["variant"])
        speeds = hl_speeds(level, variant, num_workers)
        return StaticProfile(speeds, f"hl level={level} ({variant}) {speeds.tolist()}")
    if name == "cores":
        cores = tuple(h["cores"])
        if len(cores) != num_workers:
            raise ValueError(
                f"hetero.cores has {len(cores)} entries but num_workers={num_workers}: "
                f"give one speed per worker, e.g. '--config.hetero.cores=(12,12,8,16)'"
            )
        return StaticProfile(np.asarray(cores, dtype=np.float64), f"cores {list(cores)}")
    if name == "schedule":
        return schedule_profile(
            levels=tuple(h["levels"]),
            segment_speeds=tuple(h["segment_speeds"]),
            variant=str(h["variant"]),
            segment=_whole(h, "segment"),
            unit=str(h["unit"]),
            num_workers=num_workers,
            num_steps=num_steps,
            steps_per_epoch=steps_per_epoch,
        )
    if name == "trace":
        return trace_profile(str(h["path"]), num_workers=num_workers)
    raise ValueError(f"unknown base profile {name!r}; valid base profiles: {list(BASE_PROFILES)}")


# The keys each base profile reads, checked when another profile runs. Left out: `variant`
# (shared by hl and schedule, set by the async configs whatever the profile) and hl's `level`
# (configs built on paper_bsp.py keep its default HL8's level under a schedule or cores).
_READS = {
    "uniform": (),
    "hl": (),
    "cores": ("cores",),
    "schedule": ("levels", "segment_speeds", "segment", "unit"),
    "trace": ("path",),
}


def unread_keys(hetero: Mapping[str, Any] | Any) -> list[str]:
    """Sentences naming each base profile's key that is set (not its default) while another
    profile runs: it is ignored (`cores=(1,...,8)` with name uniform runs uniform). Not an
    error: an ablation over `hetero.name` may set one profile's keys for every cell."""
    defaults = hetero_defaults()
    h = read_section(hetero, defaults, "hetero")
    base = str(h["base"]) if h["name"] in MODIFIER_PROFILES else str(h["name"])

    out = []
    for owner, keys in _READS.items():
        for key in keys:
            unread = owner != base and key not in _READS.get(base, ())
            if unread and set_away(h[key], defaults[key]):
                out.append(
                    f"hetero.{key} is set but hetero.name={h['name']!r} does not read it (the "
                    f"{owner!r} profile does; set hetero.name={owner} to use it)"
                )
    # A modifier's own keys do nothing while its strength key is unset (walk_min without
    # walk_sigma); `base` is read only under a modifier's name (noise with base hl).
    for switch, keys in _MODIFIER_KEYS.items():
        off = not _is_on(h[switch])
        for key in keys:
            if off and set_away(h[key], defaults[key]):
                out.append(
                    f"hetero.{key} is set but hetero.{switch} is not, so it does nothing (set "
                    f"hetero.{switch} to use it)"
                )
    if h["name"] not in MODIFIER_PROFILES and set_away(h["base"], defaults["base"]):
        out.append(
            f"hetero.base is set but hetero.name={h['name']!r} is a base profile itself (base "
            f"is read under a modifier's name, {sorted(MODIFIER_PROFILES)}; a modifier's key "
            f"such as hetero.noise applies to hetero.name's profile)"
        )
    return out


# The keys each modifier reads beside its strength key (`_SWITCH`), only while that is set.
_MODIFIER_KEYS = {
    "walk_sigma": ("walk_min", "walk_max"),
    "preempt_intervals": ("preempt_worker", "preempt_trickle"),
}


def _is_on(value: Any) -> bool:
    """A modifier's strength key is set: a non-empty tuple or a non-zero number."""
    return bool(len(value)) if isinstance(value, tuple | list) else float(value) != 0


def _modifiers(h: dict, num_workers: int, num_steps: int, seed: int) -> list[Modifier]:
    # A modifier is on exactly when its strength key is set, so a single override such as
    # --config.hetero.noise=0.1 adds it to whatever base profile is configured.
    mods: list[Modifier] = []
    if _is_on(h["noise"]):
        mods.append(SpeedNoise(float(h["noise"]), num_workers=num_workers, seed=seed))
    if _is_on(h["walk_sigma"]):
        mods.append(
            RandomWalk(
                float(h["walk_sigma"]),
                float(h["walk_min"]),
                float(h["walk_max"]),
                num_workers=num_workers,
                num_steps=num_steps,
                seed=seed,
            )
        )
    if _is_on(h["preempt_intervals"]):
        mods.append(
            Preempt(
                int(h["preempt_worker"]),
                tuple(h["preempt_intervals"]),
                float(h["preempt_trickle"]),
                num_workers=num_workers,
            )
        )
    return mods


_SWITCH = {"noise": "noise", "random_walk": "walk_sigma", "preempt": "preempt_intervals"}


def make_profile(
    hetero: Mapping[str, Any] | Any,
    *,
    num_workers: int,
    num_steps: int,
    steps_per_epoch: int,
    seed: int,
) -> Profile:
    """The speed profile described by a `hetero` config section (ConfigDict or dict).

    `hetero.name` picks a base profile; the modifiers whose strength keys are set
    (`noise`, `walk_sigma`, `preempt_intervals`) multiply it. A modifier name as
    `hetero.name` means base `hetero.base` and insists that modifier's key is set.
    """
    h = read_section(hetero, hetero_defaults(), "hetero")
    name = str(h["name"])
    if name not in available_profiles():
        raise ValueError(f"unknown hetero.name {name!r}; valid names: {list(available_profiles())}")
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    base_name = name
    if name in MODIFIER_PROFILES:
        key = _SWITCH[name]
        value = h[key]
        if not _is_on(value):
            raise ValueError(f"hetero.name={name!r} needs hetero.{key} to be set, got {value!r}")
        base_name = str(h["base"])
        if base_name not in BASE_PROFILES:
            raise ValueError(
                f"hetero.base must be a base profile {list(BASE_PROFILES)}, got {base_name!r}"
            )
    base = _base(base_name, h, num_workers, num_steps, steps_per_epoch)
    mods = _modifiers(h, num_workers, num_steps, seed)
    return ModifiedProfile(base, mods) if mods else base
