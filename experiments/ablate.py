"""Runs an ablation grid and prints its results table.

    python -m experiments.ablate --config=configs/ablation_default.py --workdir=runs/abl \
        [--parallel 2] [--export_sweep sweep.yaml] [--dry_run] [--set KEY=VALUE ...]

Every cell runs `python -m omnilearn_jax.main` (through `omnilearn_jax.launch` when the
ablation sets num_processes > 1) in its own process and DIR/<cell>/; a rerun
skips complete cells. The table goes to DIR/results.csv and DIR/results.md. With
--export_sweep the grid is written as a W&B sweep file instead and nothing runs (each agent's
run writes to <workdir>/$WANDB_RUN_ID, runs/<group>/$WANDB_RUN_ID without --workdir).
See docs/ablations.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys

from experiments.ablation import spec, table
from experiments.ablation.runner import (
    Runner,
    cell_command,
    check_parallel,
    foreign_cells,
    is_complete,
    stale_cells,
)
from omnilearn_jax.config.args import literal
from omnilearn_jax.run import interrupt


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="ablation config: path.py[:arg]")
    parser.add_argument(
        "--workdir",
        help="directory for the cells and the results table (with --export_sweep: for the runs)",
    )
    parser.add_argument("--parallel", type=int, default=1, help="cells to run at once")
    parser.add_argument("--export_sweep", metavar="FILE", help="write a W&B sweep YAML and exit")
    parser.add_argument("--project", default="", help="W&B project for --export_sweep")
    parser.add_argument(
        "--sweep_wandb_mode",
        default="online",
        choices=("online", "offline", "disabled"),
        help="wandb.mode of the exported sweep's runs (default online, so agents report)",
    )
    parser.add_argument("--dry_run", action="store_true", help="list the cells' commands")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key every cell sets (repeatable), e.g. --set train.num_steps=20 for a "
        "short trial of a shipped ablation; a grid key cannot be set",
    )
    args = parser.parse_args(argv)
    for item in args.set:
        if "=" not in item or not item.partition("=")[0]:
            parser.error(f"--set takes KEY=VALUE, got {item!r}")
    if not (args.export_sweep or args.workdir):
        parser.error("--workdir is required unless --export_sweep is given")
    if args.parallel < 1:
        parser.error(f"--parallel must be >= 1, got {args.parallel}")
    folder = os.path.dirname(os.path.abspath(args.export_sweep)) if args.export_sweep else ""
    if folder and not os.path.isdir(folder):  # a FileNotFoundError traceback before
        parser.error(f"--export_sweep {args.export_sweep}: no folder {folder}")
    return args


def _typed(base, key: str, text: str):
    """`--set KEY=TEXT`'s value: TEXT read as a Python literal, unless KEY is a string in the
    base config (`wandb.group=2024` is the group "2024"; read as the int 2024 it was refused
    with ml_collections' "cannot be casted to type <class 'str'>")."""
    value = literal(text)
    try:
        current = base
        for part in key.split("."):
            current = current[part]
    except (KeyError, TypeError, AttributeError):
        return value  # an unknown key: the cells' checks name it
    return text if isinstance(current, str) and not isinstance(value, str) else value


def _first(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _refused(ablation, workdir: str) -> str:
    """Why `workdir` cannot take this ablation ('' if it can): complete cells run with
    another command than this ablation gives them, or complete cells it does not have."""
    if stale := stale_cells(ablation, workdir):
        return (
            f"{workdir} holds {len(stale)} complete cell(s) run with another command than this "
            f"ablation gives them ({_first(stale)}; the first line of each cell's log.txt names "
            f"its command); use a new --workdir, or delete those cells to rerun them"
        )
    if foreign := foreign_cells(ablation, workdir):
        return (
            f"{workdir} holds {len(foreign)} complete cell(s) this ablation does not have "
            f"({_first(foreign)}: another ablation's, or a grid since changed); use a new "
            f"--workdir, or move those cells away"
        )
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        ablation = spec.load(args.config)
        base = spec.load_config_file(ablation.base, "_base")
        given = dict(item.partition("=")[::2] for item in args.set)
        sets = {k: _typed(base, k, v) for k, v in given.items()}
        if clash := sorted(set(sets) & set(ablation.grid)):
            raise ValueError(f"--set {clash[0]}: a grid key of this ablation cannot be set")
        if sets:  # passed as the command line gives them; main.py checks each
            ablation = dataclasses.replace(ablation, overrides={**ablation.overrides, **sets})
        if "group" in base.wandb and "wandb.group" not in {**ablation.grid, **ablation.overrides}:
            # W&B groups the cells' runs under the ablation's name (when tracking is on).
            extra = {**ablation.overrides, "wandb.group": ablation.group}
            ablation = dataclasses.replace(ablation, overrides=extra)
        for sentence in spec.check_cells(ablation):  # every cell's config, before any process
            print(f"ablate: warning: {sentence}", file=sys.stderr)
        if not args.export_sweep:  # a sweep's agents run its cells, one each
            check_parallel(ablation, args.parallel)
    except ValueError as e:
        print(f"ablate: {e}", file=sys.stderr)
        return 2
    cells = ablation.cells()
    if args.export_sweep:
        from experiments.ablation.sweep import write_sweep

        if args.dry_run or args.parallel != 1:  # each would have been silently dropped
            other = "--dry_run lists cells" if args.dry_run else "--parallel runs cells here"
            print(
                f"ablate: --export_sweep writes a sweep (its agents run the cells); {other}: "
                "give one",
                file=sys.stderr,
            )
            return 2

        # The agent logs to the sweep's project whatever the run's config says: the ablation's
        # own wandb.project (an override or --set) is the sweep's, unless --project names one.
        own = ablation.overrides.get("wandb.project")
        if "wandb.project" in ablation.grid:
            print("ablate: a sweep logs to one W&B project: wandb.project cannot be a grid key",
                  file=sys.stderr)  # fmt: skip
            return 2
        if args.project and own and args.project != own:
            print(f"ablate: --project {args.project} but the ablation sets wandb.project={own}; "
                  "give one", file=sys.stderr)  # fmt: skip
            return 2
        project = args.project or own or base.wandb.project
        try:
            write_sweep(
                ablation,
                args.export_sweep,
                project=project,
                wandb_mode=args.sweep_wandb_mode,
                workdir=args.workdir or "",
            )
        except ValueError as e:
            print(f"ablate: {e}", file=sys.stderr)
            return 2
        print(
            f"wrote W&B sweep ({len(cells)} runs, wandb.mode {args.sweep_wandb_mode}) "
            f"to {args.export_sweep}"
        )
        print(
            f"  .venv/bin/wandb sweep {args.export_sweep}   # then: .venv/bin/wandb agent "
            "ENTITY/PROJECT/SWEEP_ID"
        )
        return 0
    if refused := _refused(ablation, args.workdir):  # the dry run says it too
        print(f"ablate: {refused}", file=sys.stderr)
        return 2
    if args.dry_run:  # what a run would do: complete cells are skipped
        for cell in cells:
            done = is_complete(os.path.join(args.workdir, cell.name))
            command = shlex.join(cell_command(ablation, cell, args.workdir))
            print(f"# complete, skipped: {command}" if done else command)
        return 0
    table.write_manifest(args.workdir, ablation.grid, cells)
    print(
        f"[ablate] {ablation.group}: {len(cells)} cells of {ablation.base} in {args.workdir}, "
        f"{args.parallel} at a time",
        flush=True,
    )
    interrupt.raise_on_signals()  # SIGTERM too: the runner then stops its cells
    try:
        failed = Runner(ablation, args.workdir, args.parallel, log=_log).run()
    except KeyboardInterrupt as e:
        done = sum(is_complete(os.path.join(args.workdir, c.name)) for c in cells)
        print(
            f"[ablate] interrupted: {done} of {len(cells)} cells complete; run the same command "
            f"again to run the other {len(cells) - done} (an unfinished cell starts afresh)",
            file=sys.stderr,
            flush=True,
        )
        return getattr(e, "exit_code", 130)
    rows = table.write_results(args.workdir)
    print(f"\nresults ({ablation.group}; mean and sample std over seeds):")
    print(table.to_markdown(rows, clock=table.run_clock(args.workdir)), end="")
    print(f"written to {os.path.join(args.workdir, 'results.md')} and results.csv")
    if failed:
        print(f"[ablate] {len(failed)} cell(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _log(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
