"""The results table of an ablation, computed from the cells' run stores alone.

`build_table(workdir)` reads DIR/ablation.json (the grid, written by the runner) and each
cell's summary.json. Rows group the cells by every grid key except `seed`; per group:
- mean and sample standard deviation (ddof=1; empty with one seed) over seeds of
  final_eval_accuracy, total_time, time_to_target and (text runs) final_eval_perplexity,
  where lower is better. time_to_target is averaged over the
  seeds that reached the target; `target_reached` says how many did ('k/n'), so a mean over
  fewer seeds is visible as such;
- speedup_vs_static = mean total_time of the `static` group with the same other keys /
  this group's mean total_time (> 1: faster than uniform batching);
- efficiency_vs_oracle = mean total_time of the `oracle` group / this one (1 = as fast
  as the oracle). Both are ratios of means over the seeds both groups completed (a seed
  one of them lacks would tilt the ratio: with static's seeds 10, 10, 20 s and a 2x faster
  group's third seed missing, a ratio over all seeds read 2.67x), empty when that
  reference group is absent, they share no seed, or `controller.name` is not a grid key.
Cells without a complete summary are left out and counted in `missing`.

results.csv has one column per number under the names above (for programs); results.md
(`to_markdown`, also printed by the runner) shows mean ± std in one cell, headers with units
(seconds on the cells' clock), and one summary sentence per group under the table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any

from omnilearn_jax.analysis.table import reached_text, stopped_by_budget, ties, without_rounding

SEED = "seed"
CONTROLLER = "controller.name"
STATS = ("final_eval_accuracy", "total_time", "time_to_target", "final_eval_perplexity")
OPTIONAL = frozenset({"final_eval_perplexity"})  # shown only when some cell reports it


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, without_rounding(math.sqrt(var), mean)


def write_manifest(workdir: str, grid: dict, cells: list) -> None:
    os.makedirs(workdir, exist_ok=True)
    manifest = {
        "grid": {k: list(v) for k, v in grid.items()},
        "cells": [{"name": c.name, "values": c.values} for c in cells],
    }
    with open(os.path.join(workdir, "ablation.json"), "w") as f:
        json.dump(manifest, f, indent=2, default=list)


def _summary(cell_dir: str) -> dict | None:
    try:
        with open(os.path.join(cell_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    return summary if summary.get("status") == "complete" else None


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def build_table(workdir: str) -> list[dict[str, Any]]:
    """One dict a group (grid keys except seed), in grid order; see the module docstring."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        manifest = json.load(f)
    group_keys = [k for k in manifest["grid"] if k != SEED]
    groups: dict[tuple, dict[str, Any]] = {}
    for cell in manifest["cells"]:
        gid = tuple(_key(cell["values"][k]) for k in group_keys)
        group = groups.setdefault(gid, {"cells": 0, "summaries": [], "times": {}})
        group["cells"] += 1
        summary = _summary(os.path.join(workdir, cell["name"]))
        if summary is not None:
            group["summaries"].append(summary)
            group["times"][_key(cell["values"].get(SEED))] = summary.get("total_time")
    rows = []
    for gid, group in groups.items():
        row: dict[str, Any] = dict(zip(group_keys, gid, strict=True))
        summaries = group["summaries"]
        row["seeds"] = len(summaries)
        row["missing"] = group["cells"] - len(summaries)
        for stat in STATS:
            values = [s[stat] for s in summaries if s.get(stat) is not None]
            row[f"{stat}_mean"], row[f"{stat}_std"] = _mean_std(values)
        row["target_reached"] = reached_text(summaries)
        # Async cells stopped by a time budget: their total time is that budget plus the last
        # update's overshoot, so they are compared by accuracy, not by speed (an async run
        # with no budget stops after its updates, and its time compares).
        row["budgeted"] = bool(summaries) and all(stopped_by_budget(s) for s in summaries)
        rows.append(row)
    _add_ratios(rows, group_keys, [g["times"] for g in groups.values()])
    return rows


def paired_ratio(reference: dict, mine: dict) -> float:
    """mean of `reference` / mean of `mine` over the seeds both hold a time for; NaN if none."""
    seeds = [s for s in mine if s in reference and None not in (mine[s], reference[s])]
    mean = lambda times: sum(times[s] for s in seeds) / len(seeds)  # noqa: E731
    return mean(reference) / mean(mine) if seeds and mean(mine) else math.nan


def _add_ratios(rows: list[dict], group_keys: list[str], times: list[dict]) -> None:
    others = [k for k in group_keys if k != CONTROLLER]
    by_key = {
        (row.get(CONTROLLER), tuple(row[k] for k in others)): t
        for row, t in zip(rows, times, strict=True)
    }
    for row, mine in zip(rows, times, strict=True):
        rest = tuple(row[k] for k in others)
        for column, reference in (
            ("speedup_vs_static", "static"),
            ("efficiency_vs_oracle", "oracle"),
        ):
            ref = by_key.get((reference, rest)) if CONTROLLER in group_keys else None
            timed = ref is not None and not row["budgeted"]
            row[column] = paired_ratio(ref, mine) if timed else math.nan


def _cell_text(value: Any, digits: int = 4) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.{digits}g}"
    if isinstance(value, tuple | list):
        return "(" + ",".join(str(v) for v in value) + ")"
    return str(value)


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v != v else v) for k, v in row.items()})  # NaN -> ''
    return out.getvalue()


# The Markdown table a person reads: mean ± std in one cell, headers with units. The CSV keeps
# one column per number, under the names above, for programs.
_SHOWN = (
    ("total_time", "total time (s)"),
    ("speedup_vs_static", "speed-up vs static"),
    ("efficiency_vs_oracle", "share of oracle speed"),
    ("time_to_target", "time to target (s)"),
    ("target_reached", "reached target"),
    ("final_eval_accuracy", "final accuracy"),
    ("final_eval_perplexity", "final perplexity (lower is better)"),
)


def _group_keys(row: dict) -> list[str]:
    keys = list(row)
    return keys[: keys.index("seeds")]


def _mean_std_text(row: dict, stat: str) -> str:
    mean, std = row[f"{stat}_mean"], row[f"{stat}_std"]
    if math.isnan(mean):
        return ""
    return _cell_text(mean) + ("" if math.isnan(std) else f" ± {_cell_text(std, 2)}")


def _shown(row: dict, column: str) -> str:
    if f"{column}_mean" in row:
        return _mean_std_text(row, column)
    value = row[column]
    if column == "speedup_vs_static" and not math.isnan(value):
        return f"{value:.2f}x"
    if column == "efficiency_vs_oracle" and not math.isnan(value):
        return f"{value:.0%}"
    return _cell_text(value)


def to_markdown(rows: list[dict], clock: str = "") -> str:
    """The table (mean ± sample std over seeds), headers with units, then a summary line
    per group of the grid keys other than the controller (`summary_lines`)."""
    if not rows:
        return "(no cells)\n"
    keys = _group_keys(rows[0])
    shown = [(c, h) for c, h in _SHOWN if c not in OPTIONAL or _reported(rows, c)]
    headers = [k.removesuffix(".name") for k in keys]
    headers += [h.replace("(s)", f"(s, {clock} clock)") if clock else h for _, h in shown]
    headers.append("seeds")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        cells = [_cell_text(r[k]) for k in keys] + [_shown(r, c) for c, _ in shown]
        seeds = f"{r['seeds']}" + (f" ({r['missing']} missing)" if r["missing"] else "")
        lines.append("| " + " | ".join([*cells, seeds]) + " |")
    summary = summary_lines(rows)
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(summary) + "\n" if summary else "")


def _reported(rows: list[dict], stat: str) -> bool:
    return any(not math.isnan(r[f"{stat}_mean"]) for r in rows)


def summary_lines(rows: list[dict]) -> list[str]:
    """One sentence per group of the other grid keys: the speed-up of each controller over
    `static`, the share of the oracle's speed, and whether accuracy differs."""
    keys = _group_keys(rows[0]) if rows else []
    if CONTROLLER not in keys:
        return []
    others = [k for k in keys if k != CONTROLLER]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in others), []).append(row)
    return [_group_sentence(group, others) for group in groups.values()]


def _speeds(moving: list[dict]) -> str:
    """'a finishes 1.46x faster, b 1.32x, while c takes 1.22x as long (d: no seed in common
    with static)' (a slower controller was said to finish 0.82x faster, one without a paired
    seed nanx faster; one as fast, 'finishes 1.00x faster')."""
    speed = {r[CONTROLLER]: r["speedup_vs_static"] for r in moving}
    even = [n for n, v in speed.items() if round(v, 2) == 1.0]
    faster = [n for n, v in speed.items() if v >= 1 and n not in even]
    slower = [n for n, v in speed.items() if v < 1 and n not in even]
    unpaired = [n for n, v in speed.items() if math.isnan(v)]

    def listed(names: list[str], verb: str, value) -> str:
        first, *rest = names
        text = f"{first} {verb.format(value(first))}"
        return text + "".join(f", {n} {value(n):.2f}x" for n in rest)

    said = []
    if faster:
        said.append(listed(faster, "finishes {:.2f}x faster", lambda n: speed[n]))
    if slower:
        said.append(listed(slower, "takes {:.2f}x as long", lambda n: 1 / speed[n]))
    if even:
        said.append(f"{_and(even)} {'takes' if len(even) == 1 else 'take'} as long (1.00x)")
    if not unpaired:
        return ", while ".join(said)
    if not said:
        return f"{_and(unpaired)} {'has' if len(unpaired) == 1 else 'have'} no seed in common"
    return ", while ".join(said) + f" ({_and(unpaired)}: no seed in common with static)"


def _group_sentence(group: list[dict], others: list[str]) -> str:
    by_name = {r[CONTROLLER]: r for r in group if not math.isnan(r["total_time_mean"])}
    missing = [str(r[CONTROLLER]) for r in group if r[CONTROLLER] not in by_name]
    label = ", ".join(f"{k.removesuffix('.name')} {_cell_text(group[0][k])}" for k in others)
    parts = []
    static = by_name.get("static")
    moving = sorted(
        (r for n, r in by_name.items() if n != "static"), key=lambda r: r["total_time_mean"]
    )
    budgeted = bool(by_name) and all(r["budgeted"] for r in by_name.values())
    if budgeted:
        text_runs = any(not math.isnan(r["final_eval_perplexity_mean"]) for r in by_name.values())
        parts.append(
            "asynchronous runs stop at a time budget, so they are compared by "
            f"{'perplexity' if text_runs else 'accuracy'} at equal time, not by speed"
        )
        static = None  # no speed-up, no share of the oracle's speed
        moving = []
    if static and moving:
        uniform = _cell_text(static["total_time_mean"])  # as the table shows it
        parts.append(f"against uniform batching (static, {uniform} s), {_speeds(moving)}")
    measured = [r for r in moving if r[CONTROLLER] != "oracle"]
    if "oracle" in by_name and measured:
        names = _and([r[CONTROLLER] for r in measured])
        shares = _and([f"{r['efficiency_vs_oracle']:.0%}" for r in measured])
        which = (
            "which only measure times, reach"
            if len(measured) > 1
            else "which only measures times, reaches"
        )
        parts.append(
            f"{names}, {which} {shares} of the speed of the oracle, which is told the "
            f"speeds in advance"
        )
    accuracy = [r["final_eval_accuracy_mean"] for r in by_name.values()]
    accuracy = [a for a in accuracy if not math.isnan(a)]
    if len(accuracy) == 1:  # one controller: nothing to compare ("the same for every" one)
        parts.append(f"final accuracy {accuracy[0]:.3f}")
    elif accuracy:
        low, high = min(accuracy), max(accuracy)
        if high - low < 5e-4:
            every = "every controller with results" if missing else "every controller"
            reason = (
                ""
                if budgeted
                else (", since a split changes how long a step takes, not the update")
            )
            parts.append(f"final accuracy is the same for {every} ({high:.3f}){reason}")
        else:
            parts.append(f"final accuracy ranges from {low:.3f} to {high:.3f}")
    perplexity = {n: r["final_eval_perplexity_mean"] for n, r in by_name.items()}
    perplexity = {n: p for n, p in perplexity.items() if not math.isnan(p)}
    if len(perplexity) == 1:
        parts.append(f"final perplexity {next(iter(perplexity.values())):.3f}")
    elif perplexity:  # lower is better
        best, worst = min(perplexity, key=perplexity.get), max(perplexity, key=perplexity.get)
        if ties(perplexity[worst], perplexity[best]):  # the rounding of a split
            every = "every controller with results" if missing else "every controller"
            reason = (
                "" if budgeted else ", since a split changes how long a step takes, not the update"
            )
            parts.append(
                f"final perplexity is the same for {every} ({perplexity[best]:.3f}){reason}"
            )
        else:
            parts.append(
                f"final perplexity (lower is better) ranges from {perplexity[best]:.3f} "
                f"({best}) to {perplexity[worst]:.3f} ({worst})"
            )
    if missing:  # a controller whose every cell failed is named, not counted as agreeing
        parts.append(f"no complete cell for {_and(missing)}")
    text = "; ".join(parts) + "." if parts else ""
    text = text[:1].upper() + text[1:]
    return f"{label}: {text}" if label and text else text


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def write_results(workdir: str) -> list[dict]:
    """Builds the table and writes DIR/results.csv and DIR/results.md; returns the rows."""
    rows = build_table(workdir)
    with open(os.path.join(workdir, "results.csv"), "w") as f:
        f.write(to_csv(rows))
    with open(os.path.join(workdir, "results.md"), "w") as f:
        f.write(to_markdown(rows, clock=run_clock(workdir)))
    return rows


def run_clock(workdir: str) -> str:
    """The clock the cells' times are on ('virtual' or 'wall'), from a cell's config.json;
    '' when no cell has one or the cells disagree."""
    with open(os.path.join(workdir, "ablation.json")) as f:
        cells = json.load(f)["cells"]
    clocks = set()
    for cell in cells:
        try:
            with open(os.path.join(workdir, cell["name"], "config.json")) as f:
                clocks.add(json.load(f).get("clock", ""))
        except (OSError, ValueError):
            continue
    return clocks.pop() if len(clocks) == 1 else ""
