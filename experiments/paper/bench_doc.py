"""docs/BENCHMARKS.md from the JSON files `python -m benchmarks.report` saved: every number
in the document is read from one of them, and each section names its file and machine."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from experiments.paper.fmt import fmt, md_table, rel


def _load(out_dir: str) -> dict[str, dict]:
    records = {}
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".json"):
            with open(os.path.join(out_dir, name)) as f:
                records[name[:-5]] = json.load(f)
    return records


def machine_line(m: dict) -> str:
    load = ", ".join(f"{v:.1f}" for v in m.get("load_average", []))
    return (
        f"{m['platform']}, {m['cpu_model'] or 'unknown CPU'}, {m['usable_cores']} usable cores "
        f"(load average {load or 'n/a'}), Python {m['python']}, jax {m['jax']}, backend "
        f"{m['backend']} x{m['num_devices']} ({m['device_kind']})"
    )


def _step(r: dict) -> str:
    rows = [
        [name, fmt(s * 1e3, 3), fmt(r["ratio_vs_homogeneous"][name], 3)]
        for name, s in r["step_seconds"].items()
    ]
    trips = r["trip_seconds"]
    one = trips["1"]
    trip_rows = [
        [k, int(k) * r["micro_batch"], fmt(s * 1e3, 3), fmt(s / one, 3)] for k, s in trips.items()
    ]
    return (
        f"{r['model']} on inputs {tuple(r['input_shape'])}, global batch {r['global_batch']}, "
        f"median of {r['repeats']} interleaved repeats. Ratio = homogeneous step time / this "
        "step's (goal >= 0.95 for the padded layout).\n\n"
        + md_table(["variant", "median step (ms)", "ratio"], rows)
        + "\nStep time against the micro-batches one device runs (micro layout, one compiled "
        f"step, micro-batch {r['micro_batch']}): it must grow with the trip count, which is "
        "what lets a device with fewer samples finish sooner.\n\n"
        + md_table(["trips", "rows", "median step (ms)", "x one trip"], trip_rows)
    )


def _compiles(r: dict) -> str:
    rows = [
        ["first step (warm-up)", r["compiles_first_step"]],
        [
            f"next {r['steps']} steps, {r['distinct_splits']} distinct splits",
            r["compiles_after_warmup"],
        ],
    ]
    return (
        "The paper's BSP job (CNN on digits, 4 workers, B = 128); a random split every step, "
        "counted with `omnilearn_jax.compiles.CompileCounter` (goal: 0 after warm-up).\n\n"
        + md_table(["phase", "XLA compilations"], rows)
    )


def _controller_cost(r: dict) -> str:
    rows = [
        [name, fmt(v["step_s"] * 1e3, 3), fmt(v["decision_s"] * 1e3, 3), f"{v['fraction']:.2%}"]
        for name, v in r["controllers"].items()
    ]
    return (
        f"`{r['config']}`: one training step as the loop runs it against one controller "
        "decision as the loop runs it (observation with the oracle's time table, jitted "
        "`update`, allocation and checks); medians after warm-up.\n\n"
        + md_table(["controller", "step (ms)", "decision (ms)", "decision / step"], rows)
    )


def _controller_sim(r: dict) -> str:
    rows = [[name, f"{rate:,.0f}"] for name, rate in r["steps_per_s"].items()]
    return (
        f"Controller plus emulated cluster inside `lax.scan` ({r['workers']} workers, "
        f"B = {r['global_batch']}, {r['steps']:,} steps a run, best of three).\n\n"
        + md_table(["controller", "steps / s"], rows)
    )


def _end_to_end(r: dict) -> str:
    rows = [
        [
            cap,
            fmt(v["trainer_steps_per_s"], 4),
            fmt(v["plain_steps_per_s"], 4),
            fmt(v["ratio"], 3),
            fmt(v["overhead_ms_per_step"], 3),
        ]
        for cap, v in r["by_capacity"].items()
    ]
    return (
        f"{r['job']}; {r['workers']} workers on {r['devices']} devices, B = "
        f"{r['global_batch']}. The plain loop runs the same model, optimiser and batches as one "
        "jitted step over the global batch sharded on the same devices (no masks, controller, "
        "clock or logging). Blocks of "
        f"{r['steps_per_block']} steps alternate between the two, {r['blocks']} each; each "
        "rate is the best block. *Capacity* is the rows each device computes in the padded "
        "layout: 32 = the uniform share (the same rows as the plain loop; goal ratio >= 0.95), "
        "96 = the paper job's default (b_max), which also computes 64 padded rows a device to "
        "leave room for uneven splits; *96, 4 buckets* is the same room with "
        "`capacity_buckets=4` (docs/trainer.md), where each step runs at the smallest of the "
        "capacities 32, 56, 80, 96 that holds its busiest device (here, the uniform split: 32)."
        "\n\n"
        + md_table(
            ["capacity", "trainer steps/s", "plain steps/s", "ratio", "overhead (ms/step)"], rows
        )
    )


def _async(r: dict) -> str:
    rows = [
        ["BSP step (W batches, 1 update)", fmt(r["bsp_step_s"] * 1e3, 3)],
        ["async round (W batches, W updates)", fmt(r["async_round_s"] * 1e3, 3)],
        ["async / BSP", fmt(r["ratio"], 3)],
    ]
    return (
        f"{r['model']} on digits, W = {r['workers']}, B = {r['batch']}, medians after "
        "compilation.\n\n" + md_table(["", "ms (ratio)"], rows)
    )


def _multiprocess(r: dict) -> str:
    if "skipped" in r:
        return f"Skipped: {r['skipped']}."
    one, two = r["one_process"], r["two_processes"]
    rows = [
        ["1 process x 8 devices", fmt(one["wall_s"], 3), fmt(one["loop_wall_s"], 3)],
        ["2 processes x 4 devices (launch)", fmt(two["wall_s"], 3), fmt(two["loop_wall_s"], 3)],
        ["ratio 2 / 1", fmt(r["wall_ratio"], 3), fmt(r["loop_ratio"], 3)],
    ]
    return (
        f"{r['job']}: the same run through `python -m omnilearn_jax.main` and through "
        "`python -m omnilearn_jax.launch --num_processes=2` (Gloo collectives over localhost). "
        "Wall = the whole command (start-up, compilation, coordination); loop = the training "
        "loop's own `wall_time` from summary.json.\n\n"
        + md_table(["run", "wall (s)", "loop (s)"], rows)
    )


SECTIONS: tuple[tuple[str, str, Callable[[dict], str]], ...] = (
    ("step", "Masked uneven step vs homogeneous step; trip count", _step),
    ("compiles", "Compilations across split changes", _compiles),
    ("controller_cost", "Controller decision cost in the training loop", _controller_cost),
    ("controller_sim", "Controller-only simulation", _controller_sim),
    ("end_to_end", "End to end: trainer loop vs a plain Flax/optax loop", _end_to_end),
    ("async", "Asynchronous update vs BSP step", _async),
    ("multiprocess", "Multi-process overhead", _multiprocess),
)


def render(out_dir: str) -> str:
    """The markdown of BENCHMARKS.md; paths relative to the repository root."""
    records = _load(out_dir)
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python -m benchmarks.report` (or `make report`) from the JSON files in "
        f"`{rel(out_dir)}/`; do not edit by hand. Wall-clock figures on a shared "
        "machine are noisy: each is a median or a best-of, and each section names the file it "
        "comes from and the machine it ran on.",
        "",
    ]
    for i, (name, title, body) in enumerate(SECTIONS, 1):
        lines.append(f"## {i}. {title}")
        lines.append("")
        record = records.get(name)
        if record is None:
            lines += ["Not run in this report (`--small` runs only the quick ones).", ""]
            continue
        source = rel(os.path.join(out_dir, f"{name}.json"))
        lines.append(
            f"Machine: {machine_line(record['machine'])}. Source: `{source}`"
            f"{' (small run)' if record.get('small') else ''}."
        )
        lines.append("")
        if "error" in record:
            lines += [f"Failed: `{record['error']}`", ""]
            continue
        lines += [body(record["result"]), ""]
    lines += ["## Sources", ""]
    lines += [f"- `{rel(os.path.join(out_dir, n + '.json'))}`" for n in records]
    return "\n".join(lines) + "\n"
