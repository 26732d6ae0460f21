"""A parquet cache of parsed runs, so a notebook reopened on a large ablation starts at once.

Layout: `<cache_dir>/index.json` ({'version', 'runs': {run name: fingerprint}}) and one
parquet file per frame holding the rows of every indexed run. A run is reused only while
its fingerprint (file sizes and mtimes, see `sources`) is unchanged; the loader re-parses
the others and rewrites the cache. A cache that cannot be read (older version, a torn
write) is ignored; one that cannot be written (read-only directory) costs a warning only.
"""

from __future__ import annotations

import json
import os
import warnings

import pandas as pd

VERSION = 4  # bump when the frames change (4: cleared W&B keys left out): old caches ignored
FRAMES = ("steps", "workers", "summaries")


def read(cache_dir: str) -> tuple[dict[str, str], dict[str, pd.DataFrame]]:
    """(run name -> fingerprint, frames); empty when there is no usable cache."""
    try:
        with open(os.path.join(cache_dir, "index.json")) as f:
            index = json.load(f)
        if index.get("version") != VERSION:
            return {}, {}
        frames = {n: pd.read_parquet(os.path.join(cache_dir, f"{n}.parquet")) for n in FRAMES}
    except (OSError, ValueError):
        return {}, {}
    return dict(index["runs"]), frames


def write(cache_dir: str, fingerprints: dict[str, str], frames: dict[str, pd.DataFrame]) -> None:
    try:
        os.makedirs(cache_dir, exist_ok=True)
        for name in FRAMES:
            tmp = os.path.join(cache_dir, f"{name}.parquet.tmp")
            frames[name].to_parquet(tmp, index=False)
            os.replace(tmp, os.path.join(cache_dir, f"{name}.parquet"))
        # The index goes last: a crash before it leaves the old index, whose fingerprints
        # no longer all match, so nothing stale is ever served.
        tmp = os.path.join(cache_dir, "index.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"version": VERSION, "runs": fingerprints}, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(cache_dir, "index.json"))
    except OSError as e:
        warnings.warn(f"analysis cache not written to {cache_dir}: {e}", stacklevel=3)
