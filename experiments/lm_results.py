"""The language-model study of docs/results/lm.md, from the two LM ablations' run stores.

    python -m experiments.lm_results --bsp runs/abl_lm_bsp --asp runs/abl_lm_asp \
        --out docs/results/lm.md [--target 15] [--data docs/results/lm.json] [--note TEXT]
    python -m experiments.lm_results --render docs/results/lm.json --out MD  # document alone

Reads each cell's eval records (metrics.jsonl) and summary.json and writes, per mode and
heterogeneity level and controller:
- perplexity at equal time: every run's eval perplexity at the latest eval at or before T,
  where T is the earliest end time of all runs of that mode and level (BSP: the fastest
  controller's 300 steps; async: the shared time budget), so every run is compared at a time
  every run reached;
- time to the target perplexity (the first eval at or below it, lower is better), over the
  seeds that reached it, and how many did;
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
        v = cell["values"]
        runs.append(
            {
                "controller": v["controller.name"],
                "level": int(v["hetero.level"]),
                "seed": int(v["seed"]),
                "evals": sorted(evals, key=lambda r: r["time"]),
                "total_time": float(summary["total_time"]),
            }
        )
    return runs


def at_time(evals: list[dict], t: float) -> float:
    """Perplexity of the latest eval at or before time t (NaN if none)."""
    before = [r["eval_perplexity"] for r in evals if r["time"] <= t + 1e-9]
    return float(before[-1]) if before else math.nan


def interval(values: list[float]) -> tuple[float, float, int]:
    """(mean, 95% half-width, n) over the finite values; half-width NaN with n < 2."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], float)
    if len(x) == 0:
        return math.nan, math.nan, 0
    if len(x) < 2:
        return float(x.mean()), math.nan, 1
    return (*mean_half(x), len(x))


def summarise(runs: list[dict], target: float) -> dict:
    """{level: {"T": equal time, "rows": {controller: numbers}}}."""
    by_level: dict[int, list[dict]] = defaultdict(list)
    for r in runs:
        by_level[r["level"]].append(r)
    out = {}
    for level, group in sorted(by_level.items()):
        t_eq = min(r["evals"][-1]["time"] for r in group if r["evals"])
        rows: dict[str, dict] = {}
        for controller in dict.fromkeys(r["controller"] for r in group):
            mine = [r for r in group if r["controller"] == controller]
            reach = [metrics.time_to_target(r["evals"], target, "eval_perplexity") for r in mine]
            rows[controller] = {
                "at_time": interval([at_time(r["evals"], t_eq) for r in mine]),
                "to_target": interval([t for t in reach if t is not None]),
                "reached": f"{sum(t is not None for t in reach)}/{len(mine)}",
                "final": interval([r["evals"][-1]["eval_perplexity"] for r in mine]),
                "total_time": interval([r["total_time"] for r in mine]),
                "final_by_seed": {r["seed"]: r["evals"][-1]["eval_perplexity"] for r in mine},
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
        overlap = at[best][0] + _half(at[best]) >= at[worst][0] - _half(at[worst])
        # Ties: within 1e-4 (relative), the float rounding of different splits of one update.
        low = [c for c in at if at[c][0] <= at[best][0] * (1 + 1e-4)]
        high = [c for c in at if at[c][0] >= at[worst][0] * (1 - 1e-4)]
        text = (
            f"- {mode.upper()} HL{level}: at {s['T']:.2f} s, {_names(low)} "
            f"{'has' if len(low) == 1 else 'tie for'} the lowest perplexity "
            f"({at[best][0]:.3f}) and {_names(high)} the highest ({at[worst][0]:.3f})"
            + ("; their 95% intervals overlap." if overlap else "; their intervals do not overlap.")
        )
        static = rows.get("static", {}).get("to_target", (math.nan, math.nan, 0))
        faster = [
            f"`{c}` {static[0] / r['to_target'][0]:.2f}x"
            for c, r in rows.items()
            if c != "static" and r["to_target"][2] and static[2]
        ]
        if faster:
            text += (
                " Static's time to target over each one's (> 1: sooner than static; over the "
                "seeds that reached it): " + ", ".join(faster) + "."
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


def _half(stat: tuple[float, float, int]) -> float:
    return stat[1] if math.isfinite(stat[1]) else 0.0


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
        "Perplexity at T is each run's latest eval at or before T, the earliest end time of "
        "the runs of that mode and level (so every run is compared at a time all of them "
        "reached); time to target is the first eval at or below the target perplexity, over "
        "the seeds that reached it. Means over seeds ± 95% Student-t half-widths. A time "
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


def setup_text(workdir: str) -> dict:
    """A sentence about the model, data and cluster, from a cell's resolved config."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        cell = json.load(f)["cells"][0]["name"]
    with open(os.path.join(workdir, cell, "config.json")) as f:
        c = json.load(f)
    m, d = c["model"], c["dataset"]
    text = (
        f"a {m['depth']}-block transformer of width {m['width']} ({m['num_heads']} heads, "
        f"{c['resolved']['param_count']:,} parameters, tied embeddings) on byte-level "
        f"sequences of {d['seq_len']} tokens of the Python standard library's source "
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
    if missing := [d for d in [*args.bsp, *args.asp, args.render] if d and not os.path.exists(d)]:
        p.error(f"no such file or directory: {missing[0]!r}")  # a traceback before
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
        meta = data["meta"]
        runs = from_data(data)
    else:
        if not args.bsp:
            p.error("--bsp (or --render) is required")
        runs = {"bsp": [r for d in args.bsp for r in read_runs(d)]}
        if args.asp:
            runs["asp"] = [r for d in args.asp for r in read_runs(d)]
        argv = sys.argv[1:] if argv is None else argv
        meta = {
            "command": "python -m experiments.lm_results "
            + " ".join(shlex.quote(_as_typed(a)) for a in argv if not a.startswith("--note")),
            "date": datetime.date.today().isoformat(),
            "target": args.target,
            "note": args.note,
            "setup": setup_text(args.bsp[0]),
            "stamps": stamps([*args.bsp, *args.asp]),
        }
    parts = {mode: summarise(rs, meta["target"]) for mode, rs in runs.items()}
    if args.data and not args.render:  # the numbers behind the document
        curves = {
            mode: [
                {k: r[k] for k in ("controller", "level", "seed", "total_time")}
                | {"evals": [[e["time"], e["eval_perplexity"]] for e in r["evals"]]}
                for r in rs
            ]
            for mode, rs in runs.items()
        }
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
