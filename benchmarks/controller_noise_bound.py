"""What timing noise alone costs a split after n steps: a reference for the held-out goals.

Run: python -m benchmarks.controller_noise_bound [--draws 20000]

An idealised controller is told that every worker's time is proportional to its batch (the
easiest plant of benchmarks/controller_plants.py: no fixed cost, no knee, no cliff, no speed
change) and sees n log-normal measurements (sigma = the plant's noise) of each worker's time
per row. It estimates each speed by their geometric mean (the maximum-likelihood estimate) and
splits B in proportion, without rounding. Its step time over the optimum is
max_k (s_hat_k / s_k) * sum(s) / sum(s_hat). Speeds are drawn as in the family (4 workers,
log-uniform in [2, 32]). No controller that must also learn the curve's shape does better on
average; the printed quantiles are what the goals ask of the median, 90th percentile and worst
plant at each n.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.args import at_least

WORKERS = 4


def ideal_ratios(noise: np.ndarray, samples: int, seed: int = 0) -> np.ndarray:
    """The idealised controller's step time over the optimum, one draw per entry of `noise`."""
    rng = np.random.default_rng(seed)
    noise = np.asarray(noise, float)
    speeds = np.exp(rng.uniform(np.log(2.0), np.log(32.0), (noise.size, WORKERS)))
    # The mean of n log-normal log-errors is normal with sd sigma / sqrt(n).
    error = rng.normal(0.0, 1.0, (noise.size, WORKERS)) * noise[:, None] / np.sqrt(samples)
    estimate = speeds * np.exp(-error)  # a slow measurement reads as a slow worker
    return np.max(estimate / speeds, axis=1) * speeds.sum(1) / estimate.sum(1)


def table(draws: int = 20000) -> list[str]:
    """A markdown table of the idealised controller's ratio quantiles (deterministic)."""
    rng = np.random.default_rng(1)
    lines = ["| noise | steps seen | median | p90 | p99 |", "|---|---|---|---|---|"]
    for label, noise in (
        ("0.1", np.full(draws, 0.1)),
        ("0.2", np.full(draws, 0.2)),
        ("uniform in [0, 0.2]", rng.uniform(0.0, 0.2, draws)),
    ):
        for samples in (3, 15, 66):
            q = np.quantile(ideal_ratios(noise, samples, seed=samples), (0.5, 0.9, 0.99))
            lines.append(f"| {label} | {samples} | " + " | ".join(f"{x:.3f}" for x in q) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20000)
    args = parser.parse_args(argv)
    at_least(parser, draws=(args.draws, 1))
    print("\n".join(table(args.draws)))


if __name__ == "__main__":
    main()
