"""Experiments and user-side extensions (not imported by the library)."""
