"""The language-model study of docs/results/lm.md, from the two LM ablations' run stores.

    python -m experiments.lm_results --bsp runs/abl_lm_bsp --asp runs/abl_lm_asp \
        --out docs/results/lm.md [--target 15] [--data docs/results/lm.json] [--note TEXT]
    python -m experiments.lm_results --render docs/results/lm.json --out MD  # document alone

Reads each cell's eval records (metrics.jsonl) and summary.json and writes, per mode and
heterogeneity level and controller:
- perplexity at equal time: every run's eval perplexity at T, interpolated log-linearly in
  time between its evals either side of T, where T is the earliest end time of all runs of
  that mode and level (BSP: the fastest controller's 300 steps; async: the shared time
  budget, which every run passes by up to one update), so every run is compared at a time
  every run reached (its latest eval before T had read a run whose last eval came 1 ms after
  T an eval interval early);
- time to the target perplexity (the first eval at or below it, lower is better; async: at
  or before T, the shared budget), over the seeds that reached it, and how many did; against
  static, over the seeds both reached;
- the final perplexity and total time.
Means over seeds with 95% Student-t intervals (mean ± t * std / sqrt(n)).
`--data` writes every run's eval curve and what the document needs besides (the set-up,
the note, the commits the cells ran at: each workdir's stamp.json), so `--render` rewrites
the document from that JSON alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import sys
from collections import defaultdict

import numpy as np

from experiments.paper.fmt import curve_name, rel
from experiments.stats import mean_half
from omnilearn_jax.analysis.table import ties
from omnilearn_jax.run import metrics


def read_runs(workdir: str) -> list[dict]:
    """One dict per complete cell: its grid values, eval records, total time."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        cells = json.load(f)["cells"]
    runs = []
    for cell in cells:
        path = os.path.join(workdir, cell["name"])
        try:
            with open(os.path.join(path, "summary.json")) as f:
                summary = json.load(f)
            with open(os.path.join(path, "metrics.jsonl")) as f:
                records = [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError):
            continue
        if summary.get("status") != "complete":
            continue
        evals = [r for r in records if r.get("eval_perplexity") is not None]
        if not evals:  # not a text cell
            continue
        v = cell["values"]
        runs.append(
            {
                "dir": path,
                "mode": _config(path).get("mode", "bsp"),
                "controller": v["controller.name"],
                "level": int(v["hetero.level"]),
                "seed": int(v["seed"]),
                "evals": sorted(evals, key=lambda r: r["time"]),
                "total_time": float(summary["total_time"]),
            }
        )
    return runs


def _config(cell_dir: str) -> dict:
    try:
        with open(os.path.join(cell_dir, "config.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def at_time(evals: list[dict], t: float) -> float:
    """Perplexity at time t: an eval's own at t, else interpolated log-linearly in time
    between the evals either side of t (NaN outside the run's evals)."""
    times = [r["time"] for r in evals]
    for i, (when, r) in enumerate(zip(times, evals, strict=True)):
        if abs(when - t) <= 1e-9:
            return float(r["eval_perplexity"])
        if when > t:
            if i == 0:
                return math.nan
            t0, p0, p1 = times[i - 1], evals[i - 1]["eval_perplexity"], r["eval_perplexity"]
            share = (t - t0) / (when - t0)
            return float(math.exp((1 - share) * math.log(p0) + share * math.log(p1)))
    return math.nan


def interval(values: list[float]) -> tuple[float, float, int]:
    """(mean, 95% half-width, n) over the finite values; half-width NaN with n < 2."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], float)
    if len(x) == 0:
        return math.nan, math.nan, 0
    if len(x) < 2:
        return float(x.mean()), math.nan, 1
    return (*mean_half(x), len(x))


def summarise(runs: list[dict], target: float, asp: bool = False) -> dict:
    """{level: {"T": equal time, "rows": {controller: numbers}}}; `asp`: async runs, stopped
    by the shared budget T (a reach after it is not counted)."""
    by_level: dict[int, list[dict]] = defaultdict(list)
    for r in runs:
        by_level[r["level"]].append(r)
    out = {}
    for level, group in sorted(by_level.items()):
        t_eq = min(r["evals"][-1]["time"] for r in group if r["evals"])
        rows: dict[str, dict] = {}
        for controller in dict.fromkeys(r["controller"] for r in group):
            mine = [r for r in group if r["controller"] == controller]
            # Async runs are cut off at T, the shared budget the perplexities are compared at:
            # they pass it by different amounts (8.001-8.012 s), and a reach at 8.012 counted
            # for one arm. BSP runs make the same steps, each in its own time: none is cut.
            reach = [metrics.time_to_target(r["evals"], target, "eval_perplexity") for r in mine]
            reach = [None if t is None or (asp and t > t_eq + 1e-9) else t for t in reach]
            rows[controller] = {
                "at_time": interval([at_time(r["evals"], t_eq) for r in mine]),
                "to_target": interval([t for t in reach if t is not None]),
                "reached": f"{sum(t is not None for t in reach)}/{len(mine)}",
                "final": interval([r["evals"][-1]["eval_perplexity"] for r in mine]),
                "total_time": interval([r["total_time"] for r in mine]),
                "final_by_seed": {r["seed"]: r["evals"][-1]["eval_perplexity"] for r in mine},
                "reach_by_seed": {r["seed"]: t for r, t in zip(mine, reach, strict=True)},
            }
        out[level] = {"T": t_eq, "rows": rows}
    return out


def _fmt(stat: tuple[float, float, int], digits: int = 3) -> str:
    mean, half, n = stat
    if n == 0:
        return "—"
    text = f"{mean:.{digits}g}"
    if math.isfinite(half):  # identical seeds print ± 0, not float noise
        text += f" ± {half:.2g}" if half > 1e-9 * max(abs(mean), 1.0) else " ± 0"
    return text


def table(mode: str, summary: dict, target: float) -> list[str]:
    lines = [
        f"| HL | controller | perplexity at T (T, s) | time to perplexity {target:g} (s) | "
        f"reached | final perplexity | total time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for level, s in summary.items():
        for controller, row in s["rows"].items():
            lines.append(
                f"| {level} | {controller} | {_fmt(row['at_time'], 4)} ({s['T']:.2f}) | "
                f"{_fmt(row['to_target'])} | {row['reached']} | {_fmt(row['final'], 4)} | "
                f"{_fmt(row['total_time'])} |"
            )
    return lines


def findings(mode: str, summary: dict) -> list[str]:
    """Sentences read off the numbers: the lowest perplexity at equal time, and each
    controller's time to target against static, with whether the intervals overlap."""
    out = []
    for level, s in summary.items():
        rows = s["rows"]
        at = {c: r["at_time"] for c, r in rows.items() if r["at_time"][2]}
        best = min(at, key=lambda c: at[c][0])
        worst = max(at, key=lambda c: at[c][0])
        low = [c for c in at if ties(at[c][0], at[best][0])]  # the rounding of a split
        high = [c for c in at if ties(at[worst][0], at[c][0])]
        if set(low) == set(at):
            text = (
                f"- {mode.upper()} HL{level}: at {s['T']:.2f} s, every controller has the same "
                f"perplexity ({at[best][0]:.3f})."
            )
        else:
            if min(at[best][2], at[worst][2]) < 2:
                spread = "; one seed: no interval."
            elif at[best][0] + at[best][1] >= at[worst][0] - at[worst][1]:
                spread = "; their 95% intervals overlap."
            else:
                spread = "; their intervals do not overlap."
            text = (
                f"- {mode.upper()} HL{level}: at {s['T']:.2f} s, {_names(low)} "
                f"{'has' if len(low) == 1 else 'tie for'} the lowest perplexity "
                f"({at[best][0]:.3f}) and {_names(high)} the highest ({at[worst][0]:.3f})" + spread
            )
        faster = [
            f"`{c}` {ratio:.2f}x ({k}/{n} seeds)"
            for c in rows
            if c != "static"
            for ratio, k, n in [to_target_ratio(rows, c)]
            if k
        ]
        if faster:
            text += (
                " Static's time to target over each one's (> 1: sooner than static; over the "
                "seeds both reached it, of those both ran): " + ", ".join(faster) + "."
            )
        gap = _largest_gap_to_static(rows)
        if gap is not None:
            text += (
                f" Final perplexity equals static's for the same seed to within {gap:.1e}: "
                "a split changes how long a step takes, not the update."
                if gap < 1e-3
                else f" Final perplexity differs from static's by up to {gap:.3f} (same seed)."
            )
        out.append(text)
    return out


def to_target_ratio(rows: dict, controller: str) -> tuple[float, int, int]:
    """(static's mean time to target / `controller`'s, k, n) over the k seeds both reached
    the target of the n both ran (NaN and k = 0: none, or no static)."""
    mine = rows[controller]["reach_by_seed"]
    ref = rows.get("static", {}).get("reach_by_seed", {})
    both = [seed for seed in mine if seed in ref]
    reached = [seed for seed in both if mine[seed] is not None and ref[seed] is not None]
    if not reached:
        return math.nan, 0, len(both)
    ratio = np.mean([ref[seed] for seed in reached]) / np.mean([mine[seed] for seed in reached])
    return float(ratio), len(reached), len(both)


def _largest_gap_to_static(rows: dict) -> float | None:
    """Largest |final perplexity - static's| over controllers and shared seeds (None: no
    static or no shared seed)."""
    if "static" not in rows:
        return None
    ref = rows["static"]["final_by_seed"]
    gaps = [
        abs(p - ref[seed])
        for c, r in rows.items()
        if c != "static"
        for seed, p in r["final_by_seed"].items()
        if seed in ref
    ]
    return max(gaps) if gaps else None


def _names(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def document(
    parts: dict[str, dict],
    target: float,
    setup: dict,
    note: str = "",
    command: str = "",
    date: str = "",
    stamps: list[dict] = (),
) -> str:
    date = date or datetime.date.today().isoformat()
    curve = setup.get("curve", "")
    ran = sorted(
        {f"commit `{s['commit']}`" + (" (dirty)" if s.get("dirty") else "") for s in stamps}
    )
    lines = [
        "## A small GPT on offline text: perplexity, BSP and async"
        + (": the GPT's measured cost curve" if curve else ""),
        "",
        f"Generated by `{command}` on {date}, from the ablations "
        "`python -m experiments.ablate --config=configs/ablation_lm.py:mode=bsp|asp"
        + (f",curve={curve}" if curve else "")
        + "` (docs/lm.md)"
        + (f"; the cells ran at {', '.join(ran)}" if ran else "")
        + f". {setup.get('clock', 'Virtual clock')}; lower perplexity is better.",
        "",
        f"Set-up: {setup['text']}",
        "",
        "Perplexity at T is each run's eval perplexity at T, interpolated log-linearly in "
        "time between its evals either side of T, the earliest end time of the runs of that "
        "mode and level (so every run is compared at a time all of them reached); time to "
        "target is the first eval at or below the target perplexity (async: at or before T, "
        "the budget: a reach in a run's overrun past it does not count), over the seeds that "
        "reached it (against static: over the seeds both reached). Means over seeds ± 95% "
        "Student-t half-widths. A time "
        "± 0 means every seed took the same time: the HL core tables here have no timing "
        "noise, so times follow the split alone, while the seeds change the initialisation "
        "and the data order (and so the perplexity).",
    ]
    if note:
        lines += ["", note]
    for mode, summary in parts.items():
        lines += ["", f"### {mode.upper()}", "", *table(mode, summary, target), ""]
        lines += findings(mode, summary)
    return "\n".join(lines) + "\n"


def setup_text(cell_dir: str) -> dict:
    """A sentence about the model, data and cluster, from a cell's resolved config."""
    c = _config(cell_dir)
    m, d = c["model"], c["dataset"]
    source = (
        f"the text file {d['path']}" if d.get("path") else "the Python standard library's source"
    )
    text = (
        f"a {m['depth']}-block transformer of width {m['width']} ({m['num_heads']} heads, "
        f"{c['resolved']['param_count']:,} parameters, tied embeddings) on byte-level "
        f"sequences of {d['seq_len']} tokens of {source} "
        f"({d['num_train']} training and {d['num_test']} test sequences); "
        f"{c['num_workers']} workers, B = {c['global_batch_size']}, {c['optimizer']['name']} "
        f"at {c['optimizer']['learning_rate']:g}; BSP: {c['train']['num_steps']} steps, "
        f"bounds {c['controller']['b_min']}..{c['controller']['b_max']}; async: the "
        f"paper's async core tables, a budget of the same virtual time for every run."
    )
    cost = c.get("cost", {})
    curve = curve_name(cost["curve"]) if cost.get("curve") else ""
    clock = (
        f"Modelled: the virtual clock charges the GPT's own measured CPU cost curve `{curve}`, "
        "read at the bucket each device computes, over each worker's cores, plus the cost "
        "model's communication"
        if curve
        else f"Modelled: the virtual clock charges the formula ({cost.get('fixed_cost', 0.05):g} "
        f"+ {cost.get('per_sample_cost', 0.01):g} b) / cores, as for every model"
    )
    return {"text": text, "curve": curve, "clock": clock}


def stamps(workdirs: list[str]) -> list[dict]:
    """The stamp.json of each ablation directory (the commit its cells last ran at, written
    by experiments/paper/reproduce.py), where there is one."""
    out = []
    for d in workdirs:
        try:
            with open(os.path.join(d, "stamp.json")) as f:
                out.append({"workdir": d, **json.load(f)})
        except (OSError, ValueError):
            continue
    return out


def from_data(data: dict) -> dict[str, list[dict]]:
    """The runs as read_runs gives them, from a --data JSON (evals as [time, perplexity])."""
    return {
        mode: [
            {**r, "evals": [{"time": t, "eval_perplexity": p} for t, p in r["evals"]]}
            for r in data[mode]
        ]
        for mode in ("bsp", "asp")
        if mode in data
    }


def _as_typed(arg: str) -> str:
    """`--flag=PATH` with PATH relative to the repository root where it lies inside it (as
    a reader types it from the checkout; make report passes absolute paths)."""
    flag, eq, value = arg.partition("=")
    return f"{flag}={rel(value)}" if eq and os.path.isabs(value) else arg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bsp", nargs="*", default=[], help="workdir(s) of ...:mode=bsp")
    p.add_argument("--asp", nargs="*", default=[], help="workdir(s) of ...:mode=asp")
    p.add_argument("--out", default="docs/results/lm.md")
    p.add_argument("--target", type=float, default=15.0, help="target perplexity")
    p.add_argument("--note", default="", help="a paragraph to add (e.g. the code's commits)")
    p.add_argument("--data", default="", help="also write every run's eval curve here (JSON)")
    p.add_argument("--render", default="", help="a saved --data JSON: --out from it alone")
    args = p.parse_args(argv)
    if not args.target > 0:  # a table of "time to perplexity -3" had been written
        p.error(f"--target must be a perplexity > 0, got {args.target}")
    if missing := [d for d in [*args.bsp, *args.asp, args.render] if d and not os.path.exists(d)]:
        p.error(f"no such file or directory: {missing[0]!r}")  # a traceback before
    if plain := [d for d in [*args.bsp, *args.asp] if not os.path.isfile(f"{d}/ablation.json")]:
        p.error(f"{plain[0]}: no ablation.json: --bsp and --asp take ablation workdirs")
    if args.render:
        ignored = [f for f in ("bsp", "asp", "data", "note") if getattr(args, f)]
        ignored += ["target"] if args.target != p.get_default("target") else []
        if ignored:  # each was dropped without a word: a rendering reads the saved JSON alone
            p.error(f"--render writes --out from its JSON alone; drop --{ignored[0]}")
        with open(args.render) as f:
            data = json.load(f)
        meta = data["meta"]
        runs = from_data(data)
    else:
        if not args.bsp:
            p.error("--bsp (or --render) is required")
        runs: dict[str, list[dict]] = {}
        for mode in ("bsp", "asp"):
            for d in getattr(args, mode):
                found = read_runs(d)
                if not found:
                    p.error(f"--{mode} {d}: no complete text cell (eval_perplexity) in it")
                if other := sorted({r["mode"] for r in found} - {mode}):
                    p.error(f"--{mode} {d}: its cells ran with mode={other[0]}")
                runs.setdefault(mode, []).extend(found)
        argv = sys.argv[1:] if argv is None else argv
        meta = {
            "command": "python -m experiments.lm_results "
            + " ".join(shlex.quote(_as_typed(a)) for a in argv if not a.startswith("--note")),
            "date": datetime.date.today().isoformat(),
            "target": args.target,
            "note": args.note,
            "setup": setup_text(runs["bsp"][0]["dir"]),
            "stamps": stamps([*args.bsp, *args.asp]),
        }
    parts = {mode: summarise(rs, meta["target"], mode == "asp") for mode, rs in runs.items()}
    if args.data and not args.render:  # the numbers behind the document
        curves = {
            mode: [
                {k: r[k] for k in ("controller", "level", "seed", "total_time")}
                | {"evals": [[e["time"], e["eval_perplexity"]] for e in r["evals"]]}
                for r in rs
            ]
            for mode, rs in runs.items()
        }
        os.makedirs(os.path.dirname(args.data) or ".", exist_ok=True)  # as --out's folder
        with open(args.data, "w") as f:
            json.dump({**curves, "meta": meta}, f, separators=(",", ":"))
            f.write("\n")
    text = document(
        parts,
        meta["target"],
        meta["setup"],
        meta["note"],
        meta["command"],
        meta["date"],
        meta["stamps"],
    )
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
