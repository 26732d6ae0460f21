"""Notebooks and the command line that runs them headless."""
