"""docs/results/async_fair.md and its figure from experiments.async_fair's records.

    python -m experiments.async_fair_doc --runs /tmp/async_fair.jsonl \
        --data docs/results/async_fair.json --out docs/results/async_fair.md \
        --figure docs/figures/async_fair_curves.png --command "..."

`--runs` (JSON lines) is copied to `--data` (one JSON document, committed); the tables, the
intervals and every sentence are computed from `--data` alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys

import numpy as np

from benchmarks.args import existing, writable
from experiments import stats
from experiments.async_fair import ARMS, SETTINGS, TUNE_SEEDS
from experiments.paper import stamp
from experiments.paper.fmt import fixed, signed

EARLY = 2.0  # virtual seconds: accuracy there shows the speed of training, not its end
TARGET = 0.95  # accuracy for time to target
B = 128
W = 4  # workers: an update holds a worker's rows, B / W at uniform batches


def interval(values) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided 95% Student t interval of the mean (NaN bounds below
    2 values)."""
    mean, half = stats.mean_half(values)
    return mean, mean - half, mean + half


def at_time(curve: list, t: float) -> float:
    """Accuracy at time t, linear in time between the evals either side (the first eval's
    before it, the last's after it). The latest eval at or before t read uniform batches at
    1.894 s and proportional at 1.967 s for "at 2 s", every seed: their evals fall 40
    updates apart."""
    times = np.array([time for time, _ in curve], float)
    return float(np.interp(t, times, [a for _, a in curve]))


def time_to(curve: list, target: float) -> float:
    return next((time for time, a in curve if a >= target), math.nan)


def chosen(records: list[dict], setting: str, arm: str) -> tuple[float, dict]:
    """(the arm's rate: best mean accuracy at the budget over the tuning seeds, the scores)."""
    scores = {}
    for lr in SETTINGS[setting][3]:
        accs = [
            r["final_accuracy"]
            for r in records
            if (r["setting"], r["arm"], r["lr"], r["fresh"]) == (setting, arm, lr, False)
            and r["seed"] in TUNE_SEEDS
        ]
        if len(accs) == len(TUNE_SEEDS):
            scores[lr] = float(np.mean(accs))
    return max(scores, key=scores.get), scores


def evaluation(records, setting, arm, lr, fresh, seeds) -> dict[int, dict]:
    return {
        r["seed"]: r
        for r in records
        if (r["setting"], r["arm"], r["lr"], r["fresh"]) == (setting, arm, lr, fresh)
        and r["seed"] in seeds
    }


def metrics(r: dict) -> dict[str, float]:
    return {
        "final": r["final_accuracy"],
        "early": at_time(r["curve"], EARLY),
        "ttt": time_to(r["curve"], TARGET),
    }


def fmt_iv(mean: float, lo: float, hi: float, scale: float = 1.0, digits: int = 3) -> str:
    if math.isnan(lo):
        return fixed(mean * scale, digits)
    return (
        f"{fixed(mean * scale, digits)} [{fixed(lo * scale, digits)}, {fixed(hi * scale, digits)}]"
    )


def paired(a: dict, b: dict, key: str) -> tuple[float, float, float, int]:
    """Interval of b - a over the seeds both have a finite value for; (mean, lo, hi, n)."""
    d = [metrics(b[s])[key] - metrics(a[s])[key] for s in sorted(set(a) & set(b))]
    d = [x for x in d if not math.isnan(x)]
    if not d:
        return math.nan, math.nan, math.nan, 0
    return (*interval(d), len(d))


def verdict(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "no interval"
    return "significant (excludes 0)" if lo > 0 or hi < 0 else "not significant (includes 0)"


def _staleness_share(a: tuple, c: tuple) -> str:
    """What the control (no staleness) says of the async gap `a`, both (mean, low, high):
    a gap that stays must be one the async run shows (its interval excludes 0) and of the
    same sign in the control (an interval off 0 of the other sign had read as "stays")."""
    significant = lambda g: g[1] > 0 or g[2] < 0  # noqa: E731
    if not significant(a):
        return "there is no async gap to explain"
    if significant(c) and (c[0] > 0) == (a[0] > 0):
        share = "most" if abs(c[0]) >= 0.5 * abs(a[0]) else "part"
        return (
            "the gap stays without staleness: the update sizes and order, not staleness, "
            f"account for {share} of it"
        )
    if significant(c):
        return "the gap reverses without staleness"
    return "the gap goes with staleness"


def uniform_updates(records: list[dict], seeds: list[int]) -> str:
    """The mean update count of the uniform (static) evaluation runs, rounded to tens."""
    n = [
        r["updates"]
        for r in records
        if r["arm"] == "static" and not r["fresh"] and r["seed"] in seeds
    ]
    return f"{round(float(np.mean(n)), -1):.0f}" if n else "-"


def provenance(records: list[dict]) -> tuple[str, str]:
    """(the commits the runs ran at, '(dirty)' after one whose tree had changes; their dates),
    from each record's stamp; ('', '') when no record has one (runs before stamps)."""
    stamps = [r["stamp"] for r in records if r.get("stamp")]
    if not stamps:
        return "", ""
    commits = dict.fromkeys(s["commit"] + (" (dirty)" if s["dirty"] else "") for s in stamps)
    days = sorted(s["generated"] for s in stamps)
    return ", ".join(commits), days[0] + (f" to {days[-1]}" if days[-1] != days[0] else "")


def build(data: dict) -> tuple[str, dict]:
    records, meta = data["records"], data["meta"]
    seeds = list(range(meta["seeds"]))
    out = [
        "## Async accuracy at equal time, fairly: tuned arms, convergence, paired seeds",
        "",
        f"`{meta['command']}`, then `python -m experiments.async_fair_doc` (runs at commit "
        f"`{meta['commit']}`, {meta['date']}"
        + (f"; document generated at {stamp.line(meta['stamp'])}" if "stamp" in meta else "")
        + "; every run is in docs/results/async_fair.json). "
        "*Modelled*: virtual clock, cost (0.05 + 0.01 b)/cores, so the numbers do not depend on "
        "the machine. configs/paper_asp.py at async HL8 (cores 4/4/4/28), MLP on digits "
        "(`runlocal`; in a one-seed probe the CNN took about twice the CPU time a run and was "
        f"at 0.63 accuracy after 8 s at lr 0.05, momentum 0.9), W = 4, B = {B}, no bounds; every "
        f"run stops at {meta['budget']:g} virtual seconds (uniform batches apply about "
        f"{uniform_updates(records, seeds)} updates of {B // W} rows, B/W, a mean over the "
        "evaluation seeds). Each arm (uniform `static`, `proportional`) and setting "
        f"takes the learning rate of its grid with the best mean accuracy at the budget over "
        f"tuning seeds {', '.join(map(str, TUNE_SEEDS))}; it is then run on seeds "
        f"0..{len(seeds) - 1}, the same for both arms (paired). Intervals: 95% Student t over "
        "seeds; a difference is called significant only if its interval excludes 0. "
        f"*Early* is the accuracy at {EARLY:g} s (linear between the evals either side; until "
        "2026-12-06 the latest eval before it, which read the arms at 1.894 s and 1.967 s), "
        f"*time to {TARGET}* the first eval at or above "
        f"it (over the seeds that reach it). Staleness: *versions* = updates applied between a "
        "worker's pull and its push (per update); *rows* = samples those updates held, per "
        "sample (each update counts by its rows). The *control* runs the same schedule (update "
        "order, workers, rows, weights) with each gradient taken at the server's current "
        "parameters (experiments/async_fresh.py): no staleness, same update sizes. Figure: "
        "docs/figures/async_fair_curves.png (accuracy against time, each arm and control).",
        "",
    ]
    head = ["setting", "arm", "grid: mean accuracy over tuning seeds (chosen in bold)"]
    out += ["| " + " | ".join(head) + " |", "|---|---|---|"]
    lrs = {}
    for setting in SETTINGS:
        for arm in ARMS:
            try:
                lr, scores = chosen(records, setting, arm)
            except ValueError:
                continue
            lrs[(setting, arm)] = lr
            cells = [
                f"**{k:g}: {v:.3f}**" if k == lr else f"{k:g}: {v:.3f}" for k, v in scores.items()
            ]
            edge = (
                " (edge of the grid)"
                if lr in (SETTINGS[setting][3][0], SETTINGS[setting][3][-1])
                else ""
            )
            out.append(f"| {setting} | {arm} | {', '.join(cells)}{edge} |")
    out += [
        "",
        "| setting | arm | lr | final accuracy | early (at 2 s) | time to 0.95 (s) | reached | "
        "staleness, versions | staleness, rows per sample (x B) | rows per update | control: "
        "final | control: early |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    facts = {}
    for setting in SETTINGS:
        runs = {}
        for arm in ARMS:
            if (setting, arm) not in lrs:
                continue
            lr = lrs[(setting, arm)]
            ev = evaluation(records, setting, arm, lr, False, seeds)
            fr = evaluation(records, setting, arm, lr, True, seeds)
            if not ev:
                continue
            runs[arm] = (ev, fr)
            m = [metrics(r) for r in ev.values()]
            ttt = [x["ttt"] for x in m if not math.isnan(x["ttt"])]
            rows_b = np.mean([r["staleness_rows_by_sample"] for r in ev.values()])
            cf = [metrics(r) for r in fr.values()]
            out.append(
                f"| {setting} | {arm} | {lr:g} | {fmt_iv(*interval([x['final'] for x in m]))} | "
                f"{fmt_iv(*interval([x['early'] for x in m]))} | "
                f"{fmt_iv(*interval(ttt), digits=2) if ttt else '-'} | {len(ttt)}/{len(m)} | "
                f"{np.mean([r['staleness_versions'] for r in ev.values()]):.2f} | "
                f"{rows_b:.1f} ({rows_b / B:.2f}) | "
                f"{np.mean([r['rows_per_update'] for r in ev.values()]):.1f} | "
                + (
                    f"{fmt_iv(*interval([x['final'] for x in cf]))} | "
                    f"{fmt_iv(*interval([x['early'] for x in cf]))} |"
                    if cf
                    else "- | - |"
                )
            )
        facts[setting] = runs
    out += [
        "",
        "Paired differences over the evaluation seeds, in accuracy points (time in seconds); "
        "*staleness cost* is the control minus the async run of the same arm and seed.",
        "",
        "| setting | comparison | final accuracy | early (at 2 s) | time to 0.95 |",
        "|---|---|---|---|---|",
    ]
    summary = {}
    for setting, runs in facts.items():
        if set(runs) != set(ARMS):
            continue
        (sa, sf), (pa, pf) = runs["static"], runs["proportional"]
        rows = [("proportional - static, async", sa, pa)]
        if sf and pf:
            rows += [
                ("proportional - static, control", sf, pf),
                ("staleness cost, static", sa, sf),
                ("staleness cost, proportional", pa, pf),
            ]
        for label, a, b in rows:
            cells = []
            for key, scale in (("final", 100), ("early", 100), ("ttt", 1)):
                mean, lo, hi, n = paired(a, b, key)
                cells.append(
                    f"{fmt_iv(mean, lo, hi, scale, 2)}, {verdict(lo, hi)}"
                    + ("" if n == len(seeds) else f" (n = {n})")
                )
                summary[(setting, label, key)] = (mean, lo, hi)
            out.append(f"| {setting} | {label} | " + " | ".join(cells) + " |")
    out += ["", *conclusions(summary, facts), ""]
    return "\n".join(out), summary


def _which(names: list[str]) -> str:
    if not names:
        return "None is"
    return ", ".join(names) + (" is" if len(names) == 1 else " are")


def conclusions(summary: dict, facts: dict) -> list[str]:
    """Sentences computed from the paired intervals."""
    lines = []
    finals = {s: summary.get((s, "proportional - static, async", "final")) for s in SETTINGS}
    finals = {s: v for s, v in finals.items() if v}
    if finals:
        sig = [s for s, (m, lo, hi) in finals.items() if lo > 0 or hi < 0]
        best = max(finals, key=lambda s: finals[s][0])
        lines.append(
            "- **Against OmniLearn's +6.9%.** At the budget, proportional minus uniform is "
            + "; ".join(
                f"{s} {signed(100 * m)} points [{signed(100 * lo)}, {signed(100 * hi)}]"
                for s, (m, lo, hi) in finals.items()
            )
            + f". {_which(sig)} "
            f"significant; the largest mean gain is {signed(100 * finals[best][0])} points "
            f"({best}). With each arm tuned and run to convergence, nothing near +6.9 points "
            "holds here."
        )
    early = {s: summary.get((s, "proportional - static, async", "early")) for s in SETTINGS}
    early = {s: v for s, v in early.items() if v}
    if early:
        lines.append(
            f"- **Before convergence (at {EARLY:g} s).** Proportional minus uniform: "
            + "; ".join(
                f"{s} {signed(100 * m)} points [{signed(100 * lo)}, {signed(100 * hi)}], "
                f"{verdict(lo, hi)}"
                for s, (m, lo, hi) in early.items()
            )
            + "."
        )
    ttt = {s: summary.get((s, "proportional - static, async", "ttt")) for s in SETTINGS}
    ttt = {s: v for s, v in ttt.items() if v and not math.isnan(v[0])}
    if ttt:
        sig = [s for s, (m, lo, hi) in ttt.items() if lo > 0 or hi < 0]
        lines.append(
            f"- **Time to {TARGET} accuracy.** Proportional minus uniform: "
            + "; ".join(
                f"{s} {signed(m)} s [{signed(lo)}, {signed(hi)}]" for s, (m, lo, hi) in ttt.items()
            )
            + f" ({len(sig)} of {len(ttt)} significant; positive: proportional is slower)."
        )
    why = []
    for s in SETTINGS:
        a = summary.get((s, "proportional - static, async", "ttt"))
        c = summary.get((s, "proportional - static, control", "ttt"))
        if not a or not c or math.isnan(a[1]) or math.isnan(c[1]):
            continue
        why.append(
            f"{s}: {signed(a[0])} s async, {signed(c[0])} s [{signed(c[1])}, {signed(c[2])}] "
            f"in the control, so {_staleness_share(a, c)}"
        )
    if why:
        lines.append(
            f"- **Staleness or update size?** Time to {TARGET}, proportional minus uniform: "
            + "; ".join(why)
            + "."
        )
    cost = []
    for s in SETTINGS:
        for arm in ARMS:
            v = summary.get((s, f"staleness cost, {arm}", "final"))
            if v:
                cost.append(
                    f"{s} {arm} {signed(100 * v[0])} [{signed(100 * v[1])}, {signed(100 * v[2])}]"
                )
    if cost:
        lines.append(
            "- **What staleness costs** (control minus async, final accuracy, points): "
            + "; ".join(cost)
            + ". The control separates the update sizes and order (same in both) from staleness "
            "(absent in the control)."
        )
    stale = []
    for s, runs in facts.items():
        for arm, (ev, _) in runs.items():
            v = np.mean([r["staleness_versions"] for r in ev.values()])
            rows = np.mean([r["staleness_rows_by_sample"] for r in ev.values()])
            stale.append(f"{s} {arm} {v:.2f} versions, {rows / B:.2f} B")
    if stale:
        lines.append(
            "- **Staleness in versions and in rows.** " + "; ".join(stale) + ". A version is "
            "one update of any size, so versions do not compare between the arms; rows do."
        )
    return lines


def figure(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records, seeds = data["records"], list(range(data["meta"]["seeds"]))
    settings = [s for s in SETTINGS if any(r["setting"] == s for r in records)]
    fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.4), sharey=True)
    axes = np.atleast_1d(axes)
    colors = {"static": "tab:blue", "proportional": "tab:orange"}
    for ax, setting in zip(axes, settings, strict=True):
        for arm in ARMS:
            try:
                lr, _ = chosen(records, setting, arm)
            except ValueError:
                continue
            for fresh, style in ((False, "-"), (True, "--")):
                ev = evaluation(records, setting, arm, lr, fresh, seeds)
                if not ev:
                    continue
                first = max(r["curve"][0][0] for r in ev.values())  # every seed evaluated
                grid = np.linspace(first, data["meta"]["budget"], 81)
                acc = np.array([[at_time(r["curve"], t) for t in grid] for r in ev.values()])
                label = f"{arm} (lr {lr:g}){', control' if fresh else ''}"
                ax.plot(grid, acc.mean(0), style, color=colors[arm], label=label)
                if not fresh:
                    lo, hi = np.percentile(acc, [0, 100], axis=0)
                    ax.fill_between(grid, lo, hi, color=colors[arm], alpha=0.15, lw=0)
        ax.set_title(setting)
        ax.set_xlabel("virtual time (s, modelled)")
        ax.set_ylim(0.5, 1.0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel(f"eval accuracy, mean of {len(seeds)} seeds")
    fig.suptitle(
        "Async HL8 (4/4/4/28), MLP on digits: accuracy against time, each arm tuned "
        "(band: min-max over seeds; dashed: staleness-free control)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="", help="experiments.async_fair's JSON lines")
    p.add_argument("--data", default="docs/results/async_fair.json")
    p.add_argument("--out", default="docs/results/async_fair.md")
    p.add_argument("--figure", default="docs/figures/async_fair_curves.png")
    p.add_argument("--command", default="python -m experiments.async_fair")
    p.add_argument("--seeds", type=int, default=0, help="evaluation seeds (default: the runs' own)")
    p.add_argument("--budget", type=float, default=0.0, help="(default: the runs' own)")
    args = p.parse_args(argv)
    writable(p, data=args.data if args.runs else "", out=args.out, figure=args.figure)
    if args.seeds and not args.runs:
        p.error("--seeds goes with --runs (without it, --data names its own seeds)")
    if args.runs:
        # Checked before anything is written: --data and --out default to the committed
        # files, and an empty runs file (a study stopped before its first run) replaced them
        # with an empty study, then failed drawing the figure.
        existing(p, runs=args.runs)
        with open(args.runs) as f:
            records = [json.loads(line) for line in f if line.strip()]
        if not records:
            p.error(f"--runs {args.runs} holds no runs (experiments.async_fair writes them)")
        # The budget the runs ran at, not the command line's (a doc of 0.1 s runs said 8 s).
        budgets = sorted({r.get("budget") for r in records} - {None})
        if len(budgets) > 1 or (args.budget and budgets and budgets != [args.budget]):
            p.error(f"--runs holds runs of budget {budgets}; one budget a document")
        args.budget = budgets[0] if budgets else args.budget or 8.0
        # The seeds the runs hold, not the command line's (runs of 3 seeds said "seeds 0..4").
        evaluated = sorted({r["seed"] for r in records} - set(TUNE_SEEDS))
        if evaluated != list(range(len(evaluated))) or not evaluated:
            p.error(f"--runs holds evaluation seeds {evaluated}; a document needs 0..N-1")
        if args.seeds and args.seeds != len(evaluated):
            p.error(f"--seeds {args.seeds}: the runs hold evaluation seeds 0..{evaluated[-1]}")
        args.seeds = len(evaluated)
        head, dirty = stamp.commit()
        commits, dates = provenance(records)
        meta = {
            "command": args.command,
            "commit": commits or head + (" (dirty)" if dirty else ""),
            "date": dates or datetime.date.today().isoformat(),
            "stamp": stamp.stamp(),  # this document's: its commit, clean or dirty
            "seeds": args.seeds,
            "budget": args.budget,
        }
        with open(args.data, "w") as f:
            json.dump({"meta": meta, "records": records}, f)
    with open(args.data) as f:
        data = json.load(f)
    text, _ = build(data)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    figure(data, args.figure)
    rel = os.path.relpath(args.figure, os.path.dirname(args.out))
    print(text, f"\n[async_fair_doc] wrote {args.out}, {args.figure} ({rel})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
