"""Running a job: entry points, the training loop, the launcher, the run store, checkpoints."""
