"""A tiny, fast config for tests: an MLP on digits, a few steps, W&B off."""

from omnilearn_jax.config.args import parse_arg
from omnilearn_jax.config.schema import base_config


def get_config(arg: str = ""):
    parse_arg(arg)  # no variants: reject any
    c = base_config()
    c.num_workers = 8
    c.global_batch_size = 64
    c.bucket_ratio = 2.0  # buckets 8, 16, 32, 64: fewer programs to compile in tests
    c.dataset.name = "digits"
    c.model.name = "mlp"
    c.model.hidden = 32
    c.optimizer.learning_rate = 0.1
    c.train.num_steps = 20
    c.train.eval_every = 10
    c.train.log_every = 10
    c.train.eval_batch_size = 256
    return c
