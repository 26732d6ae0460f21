"""docs/BENCHMARKS.md from the JSON files `python -m benchmarks.report` saved: every number
in the document is read from one of them, and each section names its file and machine."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from experiments.paper import stamp
from experiments.paper.fmt import fmt, md_table, rel


def _load(out_dir: str) -> dict[str, dict]:
    records = {}
    for name in sorted(os.listdir(out_dir)):
        if name.endswith(".json") and not name.endswith(".failed.json"):  # a failure kept aside
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
    d = r["per_device"]
    head = (
        f"{r['model']} on inputs {tuple(r['input_shape'])}, global batch {r['global_batch']}, "
        f"median of {r['repeats']} interleaved repeats, inputs already on the devices. Ratio = "
        "plain homogeneous step time / this step's (goal >= 0.95 for the uniform split, which "
        "runs as one fused program over the mesh).\n\n"
        + md_table(["variant", "median step (ms)", "ratio"], rows)
    )
    if "skipped" in d:
        return head + f"\nEach device's compute time against its rows: skipped ({d['skipped']}).\n"
    dev_rows = [
        [k, n, b, fmt(t * 1e3, 3)]
        for k, (n, b, t) in enumerate(
            zip(d["sizes"], d["buckets"], d["device_seconds"], strict=True)
        )
    ]
    return (
        head + "\nEach device's compute time (from its own launch until its sums are ready, the "
        "wall clock's measurement) for a split where one device holds 25 times the rows of "
        "each other one: the busiest device takes "
        f"{fmt(d['ratio_busiest_to_others'], 3)}x the median of the others, for "
        f"{fmt(d['ideal_rows_ratio'], 3)}x the rows and {fmt(d['computed_rows_ratio'], 3)}x "
        "the rows computed (its bucket against theirs; a fixed cost per launch keeps the "
        "measured ratio below the rows').\n\n"
        + md_table(["device", "rows", "bucket (rows computed)", "compute (ms)"], dev_rows)
    )


def _hetero_wall(r: dict) -> str:
    if "cells" not in r:  # a result from before the acceptance benchmark (one run a level)
        return _hetero_wall_single(r)
    from benchmarks import wall_acceptance

    return wall_acceptance.section(r)


def _hetero_wall_single(r: dict) -> str:
    rows = [
        [
            level,
            fmt(v["wall"]["static_seconds"], 3),
            fmt(v["wall"]["proportional_seconds"], 3),
            f"{v['wall']['reduction']:.1%}",
            f"{v['virtual']['reduction']:.1%}",
            f"{v['delivered']:.0%}",
        ]
        for level, v in r["levels"].items()
    ]
    return (
        f"{r['job']}, {r['steps']} steps a run. Heterogeneity injected on the devices: worker "
        f"k sleeps {r['inject']} * b_k / speed_k seconds before it computes "
        "(`hetero.inject`), so a slow worker really takes longer and a worker given fewer "
        "rows really computes fewer. Wall = the sum of measured step times; the prediction "
        "is the virtual clock's for the same profile (linear cost of the injected seconds "
        "per sample, same bounds 16..96 and controller). Goal: delivered >= 80%.\n\n"
        + md_table(
            [
                "level",
                "uniform (s)",
                "proportional (s)",
                "wall reduction",
                "predicted",
                "delivered",
            ],
            rows,
        )
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
        "counted with `omnilearn_jax.engine.compiles.CompileCounter` (goal: 0 after warm-up).\n\n"
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
        "`update`, allocation and checks); medians after warm-up"
        + (
            ", each decision timed right after a step, in turn in every repeat (timed alone in "
            "a block of decisions, as until 2026-12-06, a decision took 0.12-0.34 ms, 1.4-3.6 % "
            "of a step: the figures below are what the loop pays after its step)"
            if r.get("interleaved")
            else ""
        )
        + ".\n\n"
        + md_table(["controller", "step (ms)", "decision (ms)", "decision / step"], rows)
    )


def _controller_sim(r: dict) -> str:
    rows = [[name, f"{rate:,.0f}"] for name, rate in r["steps_per_s"].items()]
    return (
        f"Controller plus emulated cluster inside `lax.scan` ({r['workers']} workers, "
        f"B = {r['global_batch']}, {r['steps']:,} steps a run, best of three).\n\n"
        + md_table(["controller", "steps / s"], rows)
    )


def _host_cpu(v: dict) -> str:
    if "trainer_host_cpu_ms_per_step" not in v:
        return "-"
    return f"{v['trainer_host_cpu_ms_per_step']:.3f} / {v['plain_host_cpu_ms_per_step']:.3f}"


def _end_to_end(r: dict) -> str:
    rows = [
        [
            cap,
            fmt(v["trainer_steps_per_s"], 4),
            fmt(v["plain_steps_per_s"], 4),
            fmt(v["ratio"], 3),
            fmt(v["ratio_paired_median"], 3) if "ratio_paired_median" in v else "-",
            fmt(v["overhead_ms_per_step"], 3),
            _host_cpu(v),
        ]
        for cap, v in r["by_capacity"].items()
    ]
    return (
        f"{r['job']}; {r['workers']} workers on {r['devices']} devices, B = "
        f"{r['global_batch']}. The plain loop runs the same model, optimiser and batches as one "
        "jitted step over the global batch sharded on the same devices (no masks, controller, "
        "clock or logging). Blocks of "
        f"{r['steps_per_block']} steps alternate between the two, {r['blocks']} each; each "
        "rate is the best block, and *paired* is the median over rounds of the ratio of a "
        "round's two blocks (the figure a slow minute moves least). *Capacity* is the most "
        "rows a device may hold: 32 = the uniform share, 96 = the paper job's default "
        "(b_max). Each device computes only the smallest bucket holding its rows "
        "(docs/trainer.md), so with the uniform split both compute 32 rows a device (goal "
        "ratio >= 0.95 for both). *Host CPU* is the median over blocks of the calling "
        "thread's CPU time a step, trainer / plain (`time.thread_time`): on the CPU backend "
        "the host's work takes cores from the devices' compute, and it moves far less with "
        "the machine than the wall clock."
        "\n\n"
        + md_table(
            [
                "capacity",
                "trainer steps/s",
                "plain steps/s",
                "ratio",
                "paired",
                "overhead (ms/step)",
                "host CPU (ms/step)",
            ],
            rows,
        )
    )


def _async(r: dict) -> str:
    rows = []
    for clock in ("virtual", "wall"):
        c = r[clock]
        rows.append(
            [f"{clock}: BSP step vs async round", fmt(c["bsp_step_s"] * 1e3, 3),
             fmt(c["async_round_s"] * 1e3, 3), fmt(c["ratio"], 3)]
        )  # fmt: skip
        rows.append(
            [f"{clock}: BSP vs async loop body", fmt(c["bsp_loop_per_step_s"] * 1e3, 3),
             fmt(c["async_loop_per_round_s"] * 1e3, 3), fmt(c["loop_ratio"], 3)]
        )  # fmt: skip
    return (
        f"{r['model']} on digits, W = {r['workers']}, B = {r['batch']}: a BSP step against an "
        "async round of W updates over the same B samples, and the runner's loop body per B "
        f"samples in both modes; best of {r['blocks']} alternating blocks each "
        "(benchmarks/async_bench.py; docs/async.md, Execution). Goal: async / BSP <= 1.3.\n\n"
        + md_table(["", "BSP (ms)", "async (ms)", "async / BSP"], rows)
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


def _step_overhead(r: dict) -> str:
    rows = [
        [
            ", ".join(map(str, v["sizes"])),
            fmt(v["step_ms"], 3),
            fmt(v["busiest_ms"], 3),
            f"{v['overhead_median']:.0%}",
            f"{v['overhead_worst']:.0%}",
            *(
                [
                    fmt(v["late_step_ms"], 3),
                    f"{v['late_overhead_median']:.0%}",
                    f"{fmt(v['early_over_late'], 3)} ({fmt(v['early_over_late_worst'], 3)})",
                ]
                if "late_step_ms" in v
                else ["", "", ""]
            ),
        ]
        for v in r["splits"].values()
    ]
    return (
        "configs/paper_bsp.py:runlocal,model=cnn (4 workers on 4 devices, B = 128), static "
        f"split, `clock=wall`, {r['steps']} steps a run, {r['reps']} runs a split, "
        "interleaved (benchmarks/step_overhead.py). Step = from the first launch until the "
        "updated state is ready; busiest = the largest of the devices' own compute times "
        "(launch to sums ready); medians over each run's steps, the first five left out. "
        "Every device's program is launched from one thread and computes at once with the "
        "others, so on this machine's cores the busiest device's time includes its share of "
        "them. Overhead = step / busiest - 1 (goal: at most 15% for the uneven split). "
        "Late: the same runs with the reduction and update dispatched only after every "
        "device's time is read (`WallTimer.finish_early = False`), each paired with an early "
        "one; early / late = the ratio of their median steps, median (worst) over the pairs."
        "\n\n"
        + md_table(
            [
                "split",
                "step (ms)",
                "busiest device (ms)",
                "overhead median",
                "overhead worst",
                "late: step (ms)",
                "late: overhead",
                "step early / late",
            ],
            rows,
        )
    )


def _multiprocess_step(r: dict) -> str:
    if "skipped" in r:
        return f"Skipped: {r['skipped']}."
    base = next(iter(r.values()))["runs"]  # one process, run for run (interleaved)

    def worst(v: dict) -> str:
        pairs = zip(v["runs"], base, strict=True)
        return fmt(max(run["step_ms"] / one["step_ms"] for run, one in pairs), 3)

    rows = [
        [name, fmt(v["step_ms"], 3), fmt(v["step_ratio"], 3), worst(v), fmt(v["loop_ms"], 3),
         fmt(v["loop_ratio"], 3), len(v["runs"])]
        for name, v in r.items()
    ]  # fmt: skip
    return (
        "configs/paper_bsp.py:runlocal,model=cnn, 2 workers, B = 64, static uniform split, "
        "`clock=wall`; each variant a fresh command, interleaved (benchmarks/"
        "multiprocess_step.py). Step = the median step from the run store (collectives "
        "included); loop = the loop's wall time a step (decisions and batches; "
        "the split travels in the step's one collective). Ratios to one process (goal: step at "
        "most 1.5x, pinned or not); worst = the largest ratio of a run to the one-process run "
        "of the same round.\n\n"
        + md_table(
            ["variant", "step (ms)", "step ratio", "worst", "loop (ms/step)", "loop ratio", "runs"],
            rows,
        )  # fmt: skip
    )


def _collective_cost(r: dict) -> str:
    if "skipped" in r:
        return f"Skipped: {r['skipped']}."
    from benchmarks.collective_cost import table

    quotas = "/".join(map(str, r["quotas"])) if r.get("quotas") else None
    return (
        "Two processes of one CPU device each run one jitted `psum` over and over, then the "
        "engine's own sum (an all-gather added up in device order, `engine/step.py` "
        "`_all_summed`), as a multi-process step's finish does once a step; wall time a call "
        "and each process's CPU time a call in the psum (`getrusage`), measured "
        "(benchmarks/collective_cost.py; what it shows: "
        "docs/cluster_quotas.md). `pinned`: a core each; `quota`: CPU quotas "
        + (f"{quotas} (`launch --cpu_quota`)" if quotas else "(not measured: no writable cgroups)")
        + "; the last row has process 0 arrive 20 ms late to each call, so process 1's CPU "
        "is what a wait in the all-reduce costs.\n\n" + table(r)
    )


SECTIONS: tuple[tuple[str, str, Callable[[dict], str]], ...] = (
    ("step", "Block step vs homogeneous step; per-device time against rows", _step),
    ("compiles", "Compilations across split changes", _compiles),
    ("controller_cost", "Controller decision cost in the training loop", _controller_cost),
    ("controller_sim", "Controller-only simulation", _controller_sim),
    ("end_to_end", "End to end: trainer loop vs a plain Flax/optax loop", _end_to_end),
    ("async", "Asynchronous update vs BSP step", _async),
    ("multiprocess", "Multi-process overhead", _multiprocess),
    ("step_overhead", "An uneven step against its busiest device's compute", _step_overhead),
    ("multiprocess_step", "One step in 2 processes against 1, pinned and not", _multiprocess_step),
    (
        "hetero_wall",
        "Wall-clock saving with injected heterogeneity (emulated) vs prediction (modelled)",
        _hetero_wall,
    ),
    (
        "collective_cost",
        "One cross-process all-reduce, pinned, unpinned and under quotas",
        _collective_cost,
    ),  # fmt: skip
)


def _committed(source: str) -> str:
    """Which commit holds the file as it is: its numbers were measured at or before it."""
    head, date = stamp.file_commit(source)
    if not head:
        return ", not committed (measured by this run)"
    changed = stamp.changed_since(source)
    return f", committed in `{head}` ({date}){', changed since' if changed else ''}"


def render(out_dir: str, stamped: dict | None = None) -> str:
    """The markdown of BENCHMARKS.md; paths relative to the repository root. `stamped`: the
    tree's state before the caller wrote anything (default: now)."""
    records = _load(out_dir)
    lines = [
        "# Benchmarks",
        "",
        f"Generated at {stamp.line(stamped or stamp.stamp())}, by "
        "`python -m benchmarks.report` (or "
        "`make report`) from the JSON files in "
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
            f"{' (small run)' if record.get('small') else ''}{_committed(source)}."
        )
        lines.append("")
        if "error" in record:
            lines += [f"Failed: `{record['error']}`", ""]
            continue
        failed = os.path.join(out_dir, f"{name}.failed.json")
        if os.path.exists(failed):  # the last good result stands in for a failed rerun
            with open(failed) as f:
                error = json.load(f).get("error", "")
            lines += [
                f"**The latest run failed** (`{error}`, `{rel(failed)}`): the numbers below are "
                f"an earlier run's.",
                "",
            ]
        lines += [body(record["result"]), ""]
    lines += ["## Sources", ""]
    lines += [f"- `{rel(os.path.join(out_dir, n + '.json'))}`" for n in records]
    return "\n".join(lines) + "\n"
