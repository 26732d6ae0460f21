"""The default job: a CNN on scikit-learn's digits, 8 workers on 8 CPU devices (the README's
Quickstart runs configs/quickstart.py, an MLP on 4).

Usage: python -m omnilearn_jax.main --config=configs/default.py --workdir=runs/default
"""

from omnilearn_jax.config.args import parse_arg
from omnilearn_jax.config.schema import base_config


def get_config(arg: str = ""):
    parse_arg(arg)  # no variants: reject any
    c = base_config()
    c.num_workers = 8
    c.global_batch_size = 128
    c.dataset.name = "digits"
    c.model.name = "cnn"
    c.train.num_steps = 200
    c.train.eval_every = 50
    c.train.target_accuracy = 0.9
    return c
