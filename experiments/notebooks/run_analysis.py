"""Runs the analysis notebook headless and writes its figures and table.

    python -m experiments.notebooks.run_analysis --runs DIR --out OUT
    python -m experiments.notebooks.run_analysis --wandb_project ENTITY/PROJECT --out OUT

The notebook's cell tagged `parameters` is replaced by the given values (papermill's
convention, without papermill), the notebook is executed with nbclient in a fresh kernel
started in the repository root, and the executed copy is saved as OUT/analysis.ipynb beside
the PNG figures, results.csv, results.md and conclusions.md the notebook itself writes.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchmarks.args import existing

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
NOTEBOOK = os.path.join(HERE, "analysis.ipynb")


def parameters_source(params: dict[str, str]) -> str:
    return "".join(f"{name} = {value!r}\n" for name, value in params.items())


def inject_parameters(nb, params: dict[str, str]) -> None:
    """Rewrites the cell tagged `parameters`; a notebook without one is an error."""
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            cell.source = parameters_source(params)
            return
    raise ValueError("the notebook has no code cell tagged 'parameters'")


def execute(notebook: str, params: dict[str, str], out_dir: str, timeout: int = 600) -> str:
    """Executes `notebook` with `params`; returns the path of the executed copy in out_dir."""
    import nbformat  # lazy: only this command needs the notebook machinery
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    inject_parameters(nb, params)
    os.makedirs(out_dir, exist_ok=True)
    # The kernel inherits our environment: make the checkout importable there too.
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = REPO_ROOT + (os.pathsep + path if path else "")
    from traitlets.config import Config

    # IPC sockets: the kernel is local, and TCP would make it warn about plain-text traffic.
    config = Config({"KernelManager": {"transport": "ipc"}})
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": REPO_ROOT}},
        config=config,
    )
    try:
        client.execute()
    finally:  # the partly executed notebook shows where a failure happened
        executed = os.path.join(out_dir, os.path.basename(notebook))
        nbformat.write(nb, executed)
    return executed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--runs", help="run store, tree of runs, ablation workdir or W&B offline")
    source.add_argument("--wandb_project", help="ENTITY/PROJECT, read through the W&B API")
    parser.add_argument("--out", required=True, help="directory for figures and tables")
    parser.add_argument("--notebook", default=NOTEBOOK, help="notebook to run")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)
    if args.runs and not os.path.exists(args.runs):  # before the notebook starts
        parser.error(f"--runs {args.runs}: no such file or directory")
    if args.timeout < 1:
        parser.error(f"--timeout must be >= 1 second a cell, got {args.timeout}")
    if args.runs:  # a folder with no run: one line, not the notebook's coloured traceback
        from omnilearn_jax.analysis.load import detect_source

        try:
            detect_source(args.runs)
        except FileNotFoundError as e:
            parser.error(str(e))
    existing(parser, notebook=args.notebook)
    if os.path.exists(args.out) and not os.path.isdir(args.out):  # a FileExistsError traceback
        parser.error(f"--out {args.out}: a file, not a folder")
    out = os.path.abspath(args.out)
    params = {
        "RUNS_PATH": os.path.abspath(args.runs) if args.runs else "",
        "WANDB_PROJECT": args.wandb_project or "",
        "OUT_DIR": out,
    }
    from nbclient.exceptions import CellExecutionError

    try:
        executed = execute(args.notebook, params, out, args.timeout)
    except CellExecutionError as e:  # one line: the cell's traceback is in the executed copy
        copy = os.path.join(out, os.path.basename(args.notebook))
        print(
            f"run_analysis: a notebook cell failed: {e.ename}: {e.evalue} (its traceback: {copy})",
            file=sys.stderr,
        )
        return 1
    written = sorted(f for f in os.listdir(out) if not f.startswith("."))
    print(f"executed notebook: {executed}")
    print(f"written to {out}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
