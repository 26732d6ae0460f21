"""Example user policies; load one with --config.controller.plugin=experiments.examples.NAME."""
