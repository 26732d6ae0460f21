"""An ablation as a W&B grid sweep: `wandb sweep FILE`, then `wandb agent ENTITY/PROJECT/ID`.

Parameters are named `config.<key>`, so the agent's `${args}` expands to exactly the
command line's `--config.<key>=<value>` overrides. The command runs the same entry point as
the ablation runner (with the checkout's .venv/bin/python where there is one), through
`bash -c` so each run gets its own workdir from the agent's $WANDB_RUN_ID (`${args}` expands
to separate words, which "$@" passes on unchanged).
Grid keys are `values` lists; overrides, the target accuracy and `wandb.mode` are single
`value` entries. `wandb.mode` is the exporter's `wandb_mode` (online unless asked otherwise),
whatever the ablation's overrides say: those are for local runs (the shipped ablations log
offline), and an agent's runs that did not report online would never reach the sweep.
Tuples are written as the command line's '(a,b)' strings.
With num_processes=N > 1 the command runs `omnilearn_jax.launch --num_processes=N
--devices_per_process=K [--cpu_quota=... --cpus=...] -- ...` instead, K = cpu_devices // N
as in the runner.
"""

from __future__ import annotations

import shlex
from typing import Any

from experiments.ablation.spec import (
    Ablation,
    devices_per_process,
    format_value,
    launcher_options,
    run_config,
)

WANDB_MODES = ("online", "offline", "disabled")


def _yaml_value(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return format_value(value)
    return value


def _entry_point(ablation: Ablation) -> str:
    """`omnilearn_jax.main`, or the launcher in front of it for a multi-process ablation."""
    n = ablation.num_processes
    if n == 1:
        return "omnilearn_jax.main"
    if "cpu_devices" in ablation.grid:
        # The command line is fixed for the whole sweep, so it can carry only one K.
        raise ValueError("a multi-process sweep cannot sweep cpu_devices; put it in overrides")
    k = devices_per_process(ablation)
    options = "".join(f" {o}" for o in launcher_options(ablation))
    return f"omnilearn_jax.launch --num_processes={n} --devices_per_process={k}{options} --"


def sweep_dict(
    ablation: Ablation,
    project: str = "omnilearn-jax",
    wandb_mode: str = "online",
    workdir: str = "",
) -> dict:
    """The sweep as a dict; each run writes to `workdir/$WANDB_RUN_ID` (default workdir:
    runs/<group>)."""
    if wandb_mode not in WANDB_MODES:
        raise ValueError(
            f"sweep wandb mode must be one of {', '.join(WANDB_MODES)}, got {wandb_mode!r}"
        )
    from omnilearn_jax.config.checks import check_wandb

    check_wandb({"project": project})  # a name W&B refuses, as a run's config is refused
    fixed = {**ablation.fixed_overrides(), "wandb.mode": wandb_mode}
    parameters: dict[str, dict] = {
        f"config.{k}": {"values": [_yaml_value(v) for v in values]}
        for k, values in ablation.grid.items()
    }
    parameters.update({f"config.{k}": {"value": _yaml_value(v)} for k, v in fixed.items()})
    # The project's interpreter where the agent runs in a checkout with its .venv (W&B's own
    # `${interpreter}` is a bare `python`: outside an activated venv each run failed on its
    # first import), else the `python` on PATH.
    script = (
        "py=python; [ -x .venv/bin/python ] && py=.venv/bin/python; "
        f'exec "$py" -m {_entry_point(ablation)} '
        f"--config={shlex.quote(ablation.base)} "
        f'--workdir={shlex.quote(workdir or f"runs/{ablation.group}")}/"$WANDB_RUN_ID" "$@"'
    )
    return {
        "name": ablation.group,
        "project": project,
        "method": "grid",
        "metric": _metric(ablation),
        "parameters": parameters,
        "command": ["${env}", "bash", "-c", script, "omnilearn-sweep", "${args}"],
    }


def _metric(ablation: Ablation) -> dict[str, str]:
    """What the sweep optimises: a text model's final perplexity, lower is better (it was
    told to maximise accuracy, which text runs do not report), else final accuracy."""
    cell = ablation.cells()[0]
    if run_config(ablation, cell).dataset.name == "text":
        return {"name": "final_eval_perplexity", "goal": "minimize"}
    return {"name": "final_eval_accuracy", "goal": "maximize"}


def write_sweep(
    ablation: Ablation,
    path: str,
    project: str = "omnilearn-jax",
    wandb_mode: str = "online",
    workdir: str = "",
) -> dict:
    import yaml  # PyYAML, a dependency of wandb

    sweep = sweep_dict(ablation, project=project, wandb_mode=wandb_mode, workdir=workdir)
    with open(path, "w") as f:
        f.write(f"# W&B grid sweep for ablation {ablation.group!r}; see docs/ablations.md\n")
        yaml.safe_dump(sweep, f, sort_keys=False, default_flow_style=False)
    return sweep
