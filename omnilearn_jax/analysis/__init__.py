"""Analysis of logged runs: tidy pandas frames, plots, the speed-up table and its story.

Reads run stores, W&B offline logs or a W&B project; imports neither JAX nor the trainer,
and matplotlib only when a plot is drawn. See docs/analysis.md.
"""

from omnilearn_jax.analysis.load import Runs, detect_source, load_runs, load_wandb_project
from omnilearn_jax.analysis.plots import (
    pick_run,
    plot_accuracy_vs_time,
    plot_balance,
    plot_batch_sizes,
    plot_loss_vs_time,
    plot_metric_vs_time,
    plot_perplexity_vs_time,
    plot_staleness,
    plot_worker_times,
    speed_changes,
)
from omnilearn_jax.analysis.report import (
    conclusions,
    describe_setup,
    save_figure,
    show,
    write_table,
)
from omnilearn_jax.analysis.table import group_columns, speedup_table, to_markdown

__all__ = [
    "Runs",
    "conclusions",
    "describe_setup",
    "detect_source",
    "group_columns",
    "load_runs",
    "load_wandb_project",
    "pick_run",
    "plot_accuracy_vs_time",
    "plot_balance",
    "plot_batch_sizes",
    "plot_loss_vs_time",
    "plot_metric_vs_time",
    "plot_perplexity_vs_time",
    "plot_staleness",
    "plot_worker_times",
    "save_figure",
    "show",
    "speed_changes",
    "speedup_table",
    "to_markdown",
    "write_table",
]
