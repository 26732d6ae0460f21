"""The paper's synchronous (BSP) set-up: 4 workers, B = 128, bounds 16..96, HL core tables.

    python -m omnilearn_jax.main --workdir=runs/paper_hl8_pi \
        --config=configs/paper_bsp.py:hetero=hl8,controller=pi,model=resnet18

Variants (after ':', comma separated; see omnilearn_jax/config/args.py):
  hetero=uniform|hl1|hl2|hl4|hl8   heterogeneity level (OmniLearn's BSP core tables)
  controller=NAME                   any registered controller (static, proportional, pi, ...)
  model=resnet18|cnn|mlp            the network
  data=synthetic|digits             synthetic: CIFAR-shaped 32x32x3, 10 classes, offline
                                    (default: synthetic, or digits under runlocal)
  epochs=N                          run length in epochs (num_steps follows the batch size)
  target=F                          accuracy for time_to_target (0 = not reported)
  runlocal                          shrink everything to run on a laptop CPU: seconds with
                                    model=mlp or cnn; the default ResNet-18, narrowed, still
                                    compiles for a minute or two

Derived values are lazy references, never frozen numbers: `train.num_steps` is epochs times
steps per epoch (dataset.num_train // global_batch_size, the trainer's own rule), evaluation is
once an epoch, and the bounds are the paper's rule B/(2W) and 3B/W (16 and 96 here). So
`--config.global_batch_size=256` gives half the steps and bounds 32..192, not stale numbers.
For `data=digits` (1,438 training rows) the same rule uses that count. For your own CIFAR-10
`npz` file, set `--config.dataset.name=npz --config.dataset.path=... --config.train.num_steps=N`.
"""

import ml_collections

import controllers
from omnilearn_jax.config.args import check_choice, parse_arg
from omnilearn_jax.config.schema import base_config
from omnilearn_jax.data import datasets

HETERO = ("uniform", "hl1", "hl2", "hl4", "hl8")
MODELS = ("resnet18", "cnn", "mlp")
DATA = ("synthetic", "digits")
DIGITS = datasets.DIGITS  # data._digits trains on those after the test fraction


# The variants and their defaults (configs/paper_asp.py and the cores config add their own).
VARIANTS = dict(
    hetero="hl8", controller="proportional", model="resnet18", data="", epochs=10, target=0.0,
    runlocal=False,
)  # fmt: skip


def get_config(arg: str = "") -> ml_collections.ConfigDict:
    return build(parse_arg(arg, **VARIANTS))


def steps_per_epoch(c: ml_collections.ConfigDict):
    """A new lazy reference to the steps of an epoch: the training rows over the global batch
    (synthetic: dataset.num_train; digits: what dataset.test_fraction leaves, as data._digits
    splits, int() of the share)."""
    if c.dataset.name == "synthetic":
        train_rows = c.dataset.get_ref("num_train")
    else:
        train_rows = DIGITS - (c.dataset.get_ref("test_fraction") * DIGITS).to_int()
    return train_rows // c.get_ref("global_batch_size")


def build(a: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The config of parsed variants `a` (VARIANTS' keys)."""
    c = base_config()
    c.num_workers = 4
    c.cpu_devices = 4  # on CPU one device a worker; on GPU/TPU all (1, 2 or 4; 8: num_devices=4)
    c.global_batch_size = 128
    b, w = c.get_ref("global_batch_size"), c.get_ref("num_workers")
    c.controller.name = check_choice("controller", a.controller, controllers.available())
    c.controller.b_min = b // (2 * w)  # 16 at B = 128, W = 4
    c.controller.b_max = 3 * b // w  # 96

    hetero = check_choice("hetero", a.hetero, HETERO)
    if hetero == "uniform":
        c.hetero.name = "uniform"
    else:
        c.hetero.name, c.hetero.level = "hl", int(hetero[2:])

    data = a.data or ("digits" if a.runlocal else "synthetic")
    c.dataset.name = check_choice("data", data, DATA)
    if data == "synthetic":  # keys only the synthetic set reads (config/unread.py)
        c.dataset.input_shape = (16, 16, 3) if a.runlocal else (32, 32, 3)
        c.dataset.num_classes = 10
        c.dataset.num_train = 1024 if a.runlocal else 10240
        c.dataset.num_test = 256 if a.runlocal else 2048
    c.model.name = check_choice("model", a.model, MODELS)
    if a.runlocal:
        c.model.width, c.model.features, c.model.hidden = 8, (8, 16), 32
    # Each derived key gets its own reference expression: one shared reference would tie them,
    # so overriding eval_every on the command line would silently change num_steps too.
    if a.epochs < 1:  # -3 was "train.num_steps must be >= 1, got -33"
        raise ValueError(f"paper_bsp: epochs must be >= 1, got {a.epochs}")
    c.train.num_steps = a.epochs * steps_per_epoch(c)
    c.train.eval_every = steps_per_epoch(c)
    c.train.log_every = steps_per_epoch(c)
    c.train.eval_batch_size = 256
    c.train.target_accuracy = a.target

    c.optimizer.name = "sgd"
    c.optimizer.learning_rate = 0.05
    c.optimizer.momentum = 0.9
    c.optimizer.weight_decay = 5e-4
    c.optimizer.schedule = "constant" if a.runlocal else "cosine"
    return c
