"""Controllers on nonlinear cost curves, in the lax.scan simulation.

    python -m experiments.curves.ablate [--out runs/curves/cost_curves.md] [--steps 50] \
        [--trainer_runs DIR] [--data docs/results/cost_curves.json]

(`make report` writes docs/results/cost_curves.md and its JSON through --out and --data; a
trial run's default --out leaves the committed document alone.)
    python -m experiments.curves.ablate --render JSON --out MD   # the document alone

`--trainer_runs` adds a table of the trainer runs of configs/ablation_curves.py in each DIR
(comma-separated; means over their seeds). `--data` writes every number of the document to
JSON (stamped with the commit), from which `--render` rewrites the document alone.

Four workers, B = 128, bounds b_min = 1 and no b_max (bounds the paper's 16..96 would bind
on HL8 and tie every controller); the paper's BSP core tables HL2, HL4, HL8 and the dynamic
schedule HL1, 2, 4, 8, 8, 4, 2, 1 (one segment of `--steps` steps each; static levels run
the same number of steps). Curves (seconds at speed 1; worker k takes curve(b) / cores_k):

- linear: 0.01 b
- fixed: 0.32 + 0.01 b (a fixed cost as large as 32 rows' work)
- saturating: max(0.32, 0.01 b) (the device is not busy below 32 rows)
- cliff: 0.08 + 0.01 b, and the fastest worker's time triples past 64 rows (memory)
- measured: the CPU ResNet-18 curve in data/curves/cpu_resnet18.json, when present

Each cell: the steps from each speed change until the step time stays within 2% of the
oracle's (noise-free plant; mean over segments; "-" = not within 2% by the segment's end),
the steady-state gap (mean step time over the oracle's minus 1 in each segment's second
half, 10% log-normal timing noise, 3 seeds) and the time to target (total virtual time of
the run over the oracle's, same noise). In BSP every split gives the same update, so the
time to any accuracy target is the time to the same number of steps.
The oracle reads the true curve (obs.time_table is the plant's own table).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import controllers
from benchmarks.args import at_least, existing, writable
from controllers import metrics, sim

B = 128
BOUNDS = {"b_min": 1, "b_max": 0}
CONTROLLERS = ("static", "proportional", "pi", "predictive", "oracle")
LEVELS = ("HL2", "HL4", "HL8", "dynamic")
DYNAMIC = (1, 2, 4, 8, 8, 4, 2, 1)
SEEDS = 3
NOISE = 0.1
MEASURED = "data/curves/cpu_resnet18.json"


def curves(measured_path: str = MEASURED) -> dict[str, tuple[np.ndarray, int]]:
    """Name -> (time at speed 1 for b = 0..B, memory limit of the fastest worker or 0)."""
    b = np.arange(B + 1, dtype=np.float64)
    out = {
        "linear": (0.01 * b, 0),
        "fixed": (0.32 + 0.01 * b, 0),
        "saturating": (np.maximum(0.32, 0.01 * b), 0),
        "cliff": (0.08 + 0.01 * b, 64),
    }
    if os.path.exists(measured_path):
        from omnilearn_jax.cluster import load_curve

        measured = load_curve(measured_path)
        t = measured.time(b)
        t[0] = measured.seconds[0]  # the plant zeroes idle workers itself
        out["measured"] = (t / t[32] * 0.32, 0)  # scaled like the others: 0.32 s at 32 rows
    return out


def plant(times: np.ndarray, limit: int, level: str, steps: int, noise: float) -> sim.Plant:
    levels = DYNAMIC if level == "dynamic" else (int(level[2:]),) * len(DYNAMIC)
    speeds = [sim.PAPER_CORES[h] for h in levels]
    # the worker fastest at its fastest: on the dynamic schedule the first segment (HL1) has
    # four equal speeds, and argmax over it put the cliff on worker 0, slow in every later
    # segment, where it never took 64 rows (the cliff row measured no cliff)
    fastest = int(np.argmax(np.max(speeds, axis=0)))
    limits = np.zeros(4, np.int32)
    limits[fastest] = limit
    return sim.make_plant(
        speeds[0],
        changes=tuple((i * steps, s) for i, s in enumerate(speeds[1:], 1)),
        noise=noise,
        curve=(np.arange(B + 1, dtype=np.float32), times.astype(np.float32)),
        limits=limits,
        limit_factor=3.0,
    )


def run(
    name: str, plants: sim.Plant, keys: jax.Array, num_steps: int, **kwargs
) -> tuple[np.ndarray, ...]:
    """Per plant: the step-time ratio to the oracle's [T] and the oracle's step time [T];
    `kwargs` go to the controller beside BOUNDS."""
    controller = controllers.make(name, **BOUNDS, **kwargs)

    def one(p, key):
        trace = sim.simulate(controller, p, global_batch=B, num_steps=num_steps, key=key)
        best = metrics.optimal_step_times(trace, p, global_batch=B, **BOUNDS)
        return trace.model_times.max(-1) / best, best

    ratio, best = jax.jit(jax.vmap(one))(plants, keys)
    return np.asarray(ratio), np.asarray(best)


def changes(level: str, steps: int) -> list[int]:
    """The steps at which a level's speeds change, the start included: a static level has
    one segment, the whole run (it was cut into eight 50-step slices, which divided the settle
    time by eight and let an excursion reset only its own slice); the dynamic schedule's
    HL8 -> HL8 is no change."""
    if level != "dynamic":
        return [0]
    return [i * steps for i, h in enumerate(DYNAMIC) if i == 0 or h != DYNAMIC[i - 1]]


def settling(ratio: np.ndarray, starts: list[int]) -> float:
    """Mean over the segments that start at `starts` of the steps until the ratio stays
    <= 1.02 to the segment's end (nan if some segment never does)."""
    out = []
    for start, end in zip(starts, [*starts[1:], len(ratio)], strict=True):
        bad = np.flatnonzero(ratio[start:end] > 1.02)
        at = bad[-1] + 1 if bad.size else 0
        out.append(np.nan if at >= end - start else at)
    return float(np.mean(out))


def ablate(steps: int) -> dict:
    num_steps = steps * len(DYNAMIC)
    table = curves()
    cells = [(c, lv) for c in table for lv in LEVELS]
    plants, keys = [], []
    for c, lv in cells:
        times, limit = table[c]
        plants.append(plant(times, limit, lv, steps, 0.0))
        keys.append(jax.random.key(0))
        for seed in range(SEEDS):
            plants.append(plant(times, limit, lv, steps, NOISE))
            keys.append(jax.random.key(seed + 1))
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *plants)
    results = {}
    for name in CONTROLLERS:
        ratio, best = run(name, stacked, jnp.stack(keys), num_steps)
        ratio = ratio.reshape(len(cells), 1 + SEEDS, num_steps)
        best = best.reshape(len(cells), 1 + SEEDS, num_steps)
        half = np.arange(num_steps) % steps >= steps // 2
        for i, cell in enumerate(cells):
            noisy, noisy_best = ratio[i, 1:], best[i, 1:]
            results[(name, *cell)] = {
                "settle": settling(ratio[i, 0], changes(cell[1], steps)),
                "gap": float(noisy[:, half].mean() - 1.0),
                "time": float((noisy * noisy_best).sum(-1).mean() / noisy_best.sum(-1).mean()),
            }
    return {"cells": cells, "results": results}


def speedups(curve_times: np.ndarray, levels: tuple[int, ...] = (2, 10)) -> dict:
    """ACSOS'20's setting: 3 workers, 32 rows each under uniform batching (B = 96); the
    oracle's balanced step time against uniform's on a curve, for speeds (1, H, H) (the most
    favourable to balancing at level H) and (1, 1, H)."""
    global_batch = 96
    lo, hi = controllers.resolve_bounds(3, global_batch, 1, 0)
    out = {}
    for h in levels:
        for speeds in ((1.0, h, h), (1.0, 1.0, h)):
            s = np.asarray(speeds)
            t = curve_times[: global_batch + 1][None, :] / s[:, None]
            t[:, 0] = 0.0
            sizes = np.asarray(controllers.oracle.solve_min_max(jnp.asarray(t), lo, hi))
            balanced = t[np.arange(3), sizes].max()
            uniform = t[:, 32].max()
            out[(h, speeds)] = float(uniform / balanced)
    return out


def fmt(value: float, kind: str) -> str:
    if np.isnan(value):
        return "-"
    if kind == "settle":
        return f"{value:.1f}"
    if kind == "gap":
        return f"{100 * value:.1f}%"
    return f"{value:.3f}"


def report(out: dict, steps: int, command: str, date: str = "", commit: str = "") -> str:
    cells, results = out["cells"], out["results"]
    date = date or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    at = f" at commit `{commit}`" if commit else ""
    lines = [
        "## Cost curves: controllers on nonlinear plants",
        "",
        f"Produced by `{command}` on {date}{at} (controller simulation, `lax.scan`; CPU); "
        "every number below is in docs/results/cost_curves.json.",
        "",
        "Four workers, B = 128, b_min = 1, no b_max; HL2/HL4/HL8 are the paper's BSP core "
        f"tables; dynamic runs HL1, 2, 4, 8, 8, 4, 2, 1, {steps} steps each (static levels run "
        f"{steps * len(DYNAMIC)} steps too). Curves at speed 1: linear 0.01 b; fixed "
        "0.32 + 0.01 b; saturating max(0.32, 0.01 b); cliff 0.08 + 0.01 b with the fastest "
        "worker's time tripled past 64 rows; measured = the CPU ResNet-18 curve "
        f"({MEASURED}), scaled to 0.32 s at 32 rows. Each cell is settle / gap / time:",
        "",
        "- settle: steps from each speed change (or the start) until the step time stays "
        "within 2% of the oracle's to the next change (or the end), noise-free, mean over the "
        "changes (`-`: after some change it never does);",
        "- gap: steady-state gap, mean step time over the oracle's minus 1 in each segment's "
        f"second half, {int(NOISE * 100)}% timing noise, mean of {SEEDS} seeds;",
        "- time: time to target (the noise-free time of the splits the noisy runs chose, summed, "
        "over the optimum's: noise moves the decisions, not the time charged; every split gives "
        "the same BSP update, so any accuracy target is reached at the same step).",
        "",
        "| curve | level | " + " | ".join(CONTROLLERS) + " |",
        "|---|---|" + "---|" * len(CONTROLLERS),
    ]
    for c, lv in cells:
        row = []
        for name in CONTROLLERS:
            r = results[(name, c, lv)]
            row.append(" / ".join(fmt(r[k], k) for k in ("settle", "gap", "time")))
        lines.append(f"| {c} | {lv} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n" + conclusions(cells, results)


def conclusions(cells: list, results: dict) -> str:
    """Sentences computed from the table."""

    def count(metric: str, better: str, worse: str, nonlinear: bool) -> tuple[int, int]:
        chosen = [(c, lv) for c, lv in cells if (c != "linear") == nonlinear]
        wins = sum(results[(better, *k)][metric] < results[(worse, *k)][metric] for k in chosen)
        return wins, len(chosen)

    def never(name: str) -> int:
        return sum(np.isnan(results[(name, *k)]["settle"]) for k in cells)

    gap_p, n = count("gap", "predictive", "proportional", True)
    gap_pi, _ = count("gap", "predictive", "pi", True)
    time_pi, _ = count("time", "predictive", "pi", True)
    lin_gap, lin_n = count("gap", "pi", "predictive", False)
    lin_time, _ = count("time", "pi", "predictive", False)
    gain = 100 * controllers.default_kwargs("predictive")["min_gain"]
    dyn = {name: results[(name, "linear", "dynamic")]["gap"] for name in ("pi", "predictive")}
    worst = {
        name: max(results[(name, *k)]["gap"] for k in cells if k[0] != "linear")
        for name in ("proportional", "pi", "predictive")
    }
    return (
        "\n"
        f"Noise-free, some segment never comes within 2% of the oracle's step time (settle "
        f"`-`) in {never('predictive')} of {len(cells)} cells for predictive, in "
        f"{never('proportional')} for proportional and {never('pi')} for pi (P and PI settle "
        f"on a split that a nonlinear curve makes wrong). With 10% noise, on the {n} nonlinear "
        f"cells predictive's steady-state gap is smaller than proportional's in {gap_p} and "
        f"than pi's in {gap_pi}, and its time to target is shorter than pi's in {time_pi}; "
        f"the worst steady-state gap over them is {100 * worst['proportional']:.1f}% for "
        f"proportional, {100 * worst['pi']:.1f}% for pi and {100 * worst['predictive']:.1f}% "
        f"for predictive. On the linear curve, which is what the proportional rule assumes, "
        f"pi's gap is below predictive's in {lin_gap} of {lin_n} cells and its time to target "
        f"shorter in {lin_time}: predictive's probing and its gain threshold (`min_gain` {gain:g}% "
        f"or half a standard error) cost it most in the dynamic schedule, where it re-learns "
        f"after each change (gap {100 * dyn['predictive']:.1f}% against pi's "
        f"{100 * dyn['pi']:.1f}%).\n"
    )


def trainer_data(runs: str) -> dict:
    """The trainer runs of configs/ablation_curves.py under `runs`: per controller, each
    seed's total time, time to target and final accuracy (and the stamp its runs ran at)."""
    import json

    rows, limits = {}, ()
    cells = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
    for cell in cells:
        path = os.path.join(runs, cell, "summary.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            summary = json.load(f)
        with open(os.path.join(runs, cell, "config.json")) as f:
            config = json.load(f)
        keep = ("total_time", "time_to_target", "final_eval_accuracy")
        rows.setdefault(config["controller"]["name"], []).append(
            {"seed": config["seed"], **{k: summary.get(k) for k in keep}}
        )
        limits = tuple(config["cost"]["memory_limits"])
    ran = {}
    if os.path.exists(os.path.join(runs, "stamp.json")):  # reproduce.py writes it
        with open(os.path.join(runs, "stamp.json")) as f:
            ran = json.load(f)
    return {"runs": runs, "limits": list(limits), "stamp": ran, "controllers": rows}


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def trainer_section(data: dict) -> str:
    """A table of the trainer runs (trainer_data): means over the seeds."""
    rows, limits, runs = data["controllers"], tuple(data["limits"]), data["runs"]
    if not rows:
        return ""
    seeds = max(len(v) for v in rows.values())
    # the seeds too: without them the command ran one seed where the table means five
    args = ([f"limit={max(limits)}"] if any(limits) else []) + (
        [f"seeds={seeds}"] if seeds > 1 else []
    )
    variant = ":" + ",".join(args) if args else ""
    base = _mean([r["total_time"] for r in rows.get("static", [])])
    limit = f"memory limits {list(limits)} rows, time x3 past them" if any(limits) else "no limit"
    ran = f", runs at commit `{data['stamp']['commit']}`" if data.get("stamp") else ""
    lines = [
        "",
        f"### On the trainer, with the measured curve ({limit})",
        "",
        f"`python -m experiments.ablate --config=configs/ablation_curves.py{variant}"
        f" --workdir={runs} --parallel 2`{ran} (the Quickstart job: 4 workers, B = 128, "
        "HL2 -> HL8 -> HL4, 5% noise, b_min 4, "
        "88 steps; the virtual clock charges the CPU ResNet-18 curve of data/curves/ over "
        f"each worker's speed; means over {seeds} seed{'s' if seeds > 1 else ''}; time to 0.85 "
        "over the seeds that reached it):",
        "",
        "| controller | total time (s, virtual) | speed-up vs static | time to 0.85 (s) "
        "| final accuracy |",
        "|---|---|---|---|---|",
    ]
    for name in CONTROLLERS:
        if name not in rows:
            continue
        total = _mean([r["total_time"] for r in rows[name]])
        speedup = f"{base / total:.2f}x" if base else "-"
        target = _mean([r["time_to_target"] for r in rows[name]])
        target = "-" if target is None else f"{target:.3f}"
        accuracy = _mean([r["final_eval_accuracy"] for r in rows[name]])
        lines.append(f"| {name} | {total:.3f} | {speedup} | {target} | {accuracy:.4f} |")
    return "\n".join(lines) + "\n"


def to_json(out: dict, found: dict, trainer: list[dict], steps: int, command: str) -> dict:
    """Every number of the document: the simulation's cells, the ACSOS ratios, the trainer."""
    from experiments.paper import stamp

    return {
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "stamp": stamp.stamp(),
        "steps": steps,
        "cells": [list(c) for c in out["cells"]],
        "results": [
            {"controller": k[0], "curve": k[1], "level": k[2]}
            | {m: (None if np.isnan(v) else v) for m, v in r.items()}
            for k, r in out["results"].items()
        ],
        "acsos": {
            name: [{"level": h, "speeds": list(sp), "ratio": v} for (h, sp), v in s.items()]
            for name, s in found.items()
        },
        "trainer": trainer,
    }


def render(data: dict) -> str:
    """The document from its JSON alone (to_json)."""
    out = {
        "cells": [tuple(c) for c in data["cells"]],
        "results": {
            (r["controller"], r["curve"], r["level"]): {
                m: (np.nan if r[m] is None else r[m]) for m in ("settle", "gap", "time")
            }
            for r in data["results"]
        },
    }
    found = {
        name: {(e["level"], tuple(e["speeds"])): e["ratio"] for e in entries}
        for name, entries in data["acsos"].items()
    }
    text = report(out, data["steps"], data["command"], data["date"], data["stamp"]["commit"])
    text += acsos_section(found)
    return text + "".join(trainer_section(t) for t in data["trainer"])


def main(argv: list[str] | None = None) -> None:
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="runs/curves/cost_curves.md", help="the document (the committed one: "
        "docs/results/cost_curves.md, with --data docs/results/cost_curves.json)"
    )  # fmt: skip
    parser.add_argument("--data", default="", help="also write every number here (JSON)")
    parser.add_argument("--render", default="", help="a saved --data JSON: --out from it alone")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument(
        "--trainer_runs", default="", help="comma-separated run dirs of configs/ablation_curves.py"
    )
    args = parser.parse_args(argv)
    # Checked before any run: --steps 0 failed inside jit after the curves were measured, a
    # missing --render file in a traceback, and a mistyped --trainer_runs folder dropped the
    # trainer's table without a word.
    at_least(parser, steps=(args.steps, 1))
    existing(parser, render=args.render)
    for runs in filter(None, args.trainer_runs.split(",")):
        if not os.path.isdir(runs):
            parser.error(f"--trainer_runs {runs}: no such folder")
    writable(parser, data=args.data)  # (--out: its folder is made)
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
    else:
        words = sys.argv[1:] if argv is None else argv
        words = [w for w in words if not w.startswith(("--out", "--data"))]
        command = " ".join(["python -m experiments.curves.ablate", *words])
        found = {name: speedups(times) for name, (times, _) in curves().items()}
        trainer = [trainer_data(r) for r in filter(None, args.trainer_runs.split(","))]
        data = to_json(ablate(args.steps), found, trainer, args.steps, command)
        if args.data:
            with open(args.data, "w") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
    text = render(data)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


def acsos_section(found: dict) -> str:
    """ACSOS'20's setting on each curve; `found`: curve -> speedups() of its times."""
    lines = [
        "",
        "### ACSOS'20's 2.0x (H-level 2) and 2.4x (H-level 10)",
        "",
        "Uniform step time over the oracle's balanced one, 3 workers, B = 96 (32 rows each "
        "under uniform batching), speeds (1, H, H) and (1, 1, H):",
        "",
        "| curve | H2 (1,2,2) | H2 (1,1,2) | H10 (1,10,10) | H10 (1,1,10) |",  # speedups()'s order
        "|---|---|---|---|---|",
    ]
    for name, s in found.items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}x" for v in s.values()) + " |")
    lines.append("")
    lines.append(
        "With 3 workers and speeds in [1, H], a cost proportional to the batch allows at most "
        "(1 + 2H) / 3 (1.67x at H = 2): balancing only removes the slow worker's excess. "
        "A fixed cost lowers that (balancing cannot remove it), and a flat stretch below the "
        "uniform batch removes the gain altogether (saturating: 1.00x). Only a curve far from "
        "proportional exceeds it: steeper than proportional around 32 rows for the slow "
        "worker (a memory or cache limit that uniform batching crosses), or much flatter "
        "above 32 rows for the fast ones (extra rows nearly free: at the extreme, flat above "
        "32 rows, H = 2 gives 2.0x)."
    )
    if "measured" in found:
        m = found["measured"]
        h2 = max(v for (h, _), v in m.items() if h == 2)
        h10 = max(v for (h, _), v in m.items() if h == 10)
        lines.append(
            f"The measured CPU ResNet-18 curve is nearly proportional (about 0.45 to 0.65 ms a "
            f"row from 8 to 128 rows, with no knee), so it gives at most {h2:.2f}x at H = 2: "
            f"ACSOS'20's 2.0x is not reproduced with it; that figure needs one of the two "
            f"departures above, which this CPU measurement does not show (its time per row "
            f"neither falls steadily with the batch nor jumps). At H = 10 the same curve allows "
            f"{h10:.2f}x, above ACSOS'20's 2.4x; their lower figure fits a large per-step cost "
            f"the balancer cannot remove (the fixed curve gives "
            f"{max(v for (h, _), v in found['fixed'].items() if h == 10):.2f}x), which our "
            f"measurement of one device's compute does not include (communication, input)."
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
