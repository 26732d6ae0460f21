"""Assertions shared by several test files."""

import math

import numpy as np


def assert_mean_one_lognormal(ratios: np.ndarray, sigma: float) -> None:
    """`ratios` are draws of exp(sigma z - sigma^2 / 2): mean 1, log-mean -sigma^2 / 2 and
    log-std sigma, each within 4 standard errors of the sample (the draws are seeded)."""
    n, logs = ratios.size, np.log(ratios)
    assert abs(ratios.mean() - 1) < 4 * ratios.std() / math.sqrt(n), ratios.mean()
    assert abs(logs.mean() + sigma**2 / 2) < 4 * sigma / math.sqrt(n), logs.mean()
    assert abs(logs.std() - sigma) < 4 * sigma / math.sqrt(2 * n), logs.std()
