"""Trackers: one small interface with W&B, no-op and in-memory implementations.

The trainer writes its run store (config.json, metrics.jsonl, summary.json) itself; a tracker
mirrors the same records to W&B. W&B is a convenience, never a dependency of a run: any
failure to start it degrades online -> offline -> nothing, with one printed line, and a
failure while logging switches the tracker off instead of raising into the training loop.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib.metadata
import netrc
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

# Keys the trainer's records use that are not metrics: `step` becomes W&B's own step.
_STEP_KEY = "step"
# Per-worker list keys whose singular is not derived by the generic rule below.
_WORKER_NAMES = {"worker_times": "time", "batch_sizes": "batch_size", "speeds": "speed"}
_VERSIONED = ("jax", "jaxlib", "flax", "optax", "numpy", "wandb", "ml_collections")
# W&B rejects tags longer than this; a long profile string must not kill the run.
_MAX_TAG_LEN = 64
_DEFAULT_BASE_URL = "https://api.wandb.ai"


@runtime_checkable
class Tracker(Protocol):
    """What the trainer calls; `run_id` is '' when nothing is tracked."""

    run_id: str

    def log_train(self, record: dict) -> None: ...

    def log_eval(self, record: dict) -> None: ...

    def summary(self, summary: dict) -> None: ...

    def close(self, exit_code: int = 0) -> None: ...


class NullTracker:
    """Tracks nothing: W&B disabled, a non-zero process, or W&B failed to start."""

    run_id = ""

    def log_train(self, record: dict) -> None:
        del record

    def log_eval(self, record: dict) -> None:
        del record

    def summary(self, summary: dict) -> None:
        del summary

    def close(self, exit_code: int = 0) -> None:
        pass


class MemoryTracker:
    """Keeps everything in lists, so trainer tests can assert what would reach W&B."""

    def __init__(self, config: Mapping[str, Any] | None = None, run_id: str = "memory") -> None:
        self.run_id = run_id
        self.config = dict(config or {})
        self.train_records: list[dict] = []
        self.eval_records: list[dict] = []
        # The flattened rows exactly as WandbTracker would pass them to `run.log`.
        self.rows: list[tuple[int, dict]] = []
        self.summaries: dict = {}
        self.closed = False

    def log_train(self, record: dict) -> None:
        self.train_records.append(dict(record))
        self.rows.append((int(record[_STEP_KEY]), flatten_record(record)))

    def log_eval(self, record: dict) -> None:
        self.eval_records.append(dict(record))
        self.rows.append((int(record[_STEP_KEY]), flatten_record(record)))

    def summary(self, summary: dict) -> None:
        self.summaries.update(summary)

    def close(self, exit_code: int = 0) -> None:
        self.closed = True
        self.exit_code = exit_code


class WandbTracker:
    """Logs to a live `wandb.Run`; `mode` is the mode the run really started in."""

    def __init__(self, run: Any, mode: str) -> None:
        self._run = run
        self.mode = mode
        self.run_id: str = run.id
        # The run's own directory (`<dir>/wandb/offline-run-*`), for read-back and tests.
        self.run_dir: str = os.path.dirname(run.dir)
        self.url: str = str(getattr(run, "url", "") or "") if mode == "online" else ""
        self._last_step = -1
        self._warned_step = False

    def log_train(self, record: dict) -> None:
        self._log(record)

    def log_eval(self, record: dict) -> None:
        self._log(record)

    def _log(self, record: dict) -> None:
        if self._run is None:
            return
        step = int(record[_STEP_KEY])
        if step < self._last_step:
            # W&B drops rows whose step goes backwards, with a warning per row; say it once.
            if not self._warned_step:
                print(f"W&B: dropping records with step {step} < {self._last_step}.", flush=True)
                self._warned_step = True
            return
        self._last_step = step
        # `step=` without `commit=` keeps the row open until a larger step arrives, so an
        # eval logged at the same step as the last train record merges into that row.
        self._guard(lambda: self._run.log(flatten_record(record), step=step))

    def summary(self, summary: dict) -> None:
        if self._run is not None:
            self._guard(lambda: self._run.summary.update(dict(summary)))

    def close(self, exit_code: int = 0) -> None:
        """Finishes the run; a non-zero `exit_code` marks it failed in W&B (a failed or
        interrupted run had read 'finished' there)."""
        run, self._run = self._run, None
        if run is None:
            return
        try:
            run.finish(exit_code=exit_code)
        except Exception as e:  # a failed upload must not fail the finished training
            print(f"W&B: finish failed ({type(e).__name__}: {e}).", flush=True)
            return
        if self.mode == "offline":
            from omnilearn_jax.tracking.offline import wait_until_written

            # finish() may return before wandb-core has flushed the last rows; waiting here
            # means a closed offline run is complete for whoever reads or syncs it next.
            if not wait_until_written(self.run_dir, timeout=10.0):
                print(f"W&B: {self.run_dir} was not complete 10 s after finish.", flush=True)

    def _guard(self, fn: Any) -> None:
        try:
            fn()
        except Exception as e:
            # wandb handles transient network trouble in its own process, so an exception
            # here means the run is broken: stop logging rather than fail every step.
            print(f"W&B: logging failed, tracking off ({type(e).__name__}: {e}).", flush=True)
            run, self._run = self._run, None
            with contextlib.suppress(Exception):  # already broken; finishing is best effort
                run.finish(exit_code=1)


def _singular(name: str) -> str:
    """`worker_times` -> `time`, `batch_sizes` -> `batch_size`, `losses` -> `loss`."""
    if name in _WORKER_NAMES:
        return _WORKER_NAMES[name]
    name = name.removeprefix("worker_")
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith(("sses", "shes", "ches", "xes")):
        return name[:-2]
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


def _items(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    if hasattr(value, "tolist"):  # numpy / jax arrays and scalars -> plain Python
        value = value.tolist()
    if value is None:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _items(f"{key}/{k}", v)
    elif isinstance(value, list | tuple):
        leaf = _singular(key.rsplit("/", 1)[-1])
        for k, v in enumerate(value):
            if hasattr(v, "tolist"):
                v = v.tolist()
            if isinstance(v, bool | int | float | str):
                yield f"worker/{k}/{leaf}", v
    else:
        yield key, value


def flatten_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A run-store record as W&B keys: scalars as-is, list `X` -> `worker/{k}/{singular X}`.

    `step` is left out (it is W&B's step); nested dicts become `outer/inner`; None is
    skipped, because W&B would chart it as a missing value anyway.
    """
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key != _STEP_KEY:
            out.update(_items(str(key), value))
    return out


def _git_commit(repo_dir: str) -> tuple[str, bool]:
    """(HEAD commit, dirty) of the checkout at `repo_dir`; ('', False) outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo_dir, capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return "", False
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo_dir,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return head.stdout.strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return "", False


def run_metadata(workdir: str = "", repo_dir: str | None = None) -> dict[str, Any]:
    """What makes a run reproducible beyond its config: code commit and package versions."""
    if repo_dir is None:
        repo_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    commit, dirty = _git_commit(repo_dir)
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            versions[name] = ""
    versions["python"] = sys.version.split()[0]
    return {"git_commit": commit, "git_dirty": dirty, "versions": versions, "workdir": workdir}


def _base_url() -> str:
    """The W&B host as wandb finds it: WANDB_BASE_URL, else the `base_url` that `wandb login
    --host` writes to wandb's settings file (a self-hosted server), else the public one."""
    if url := os.environ.get("WANDB_BASE_URL", ""):
        return url
    folder = os.environ.get("WANDB_CONFIG_DIR") or os.path.join(
        os.path.expanduser("~"), ".config", "wandb"
    )
    parser = configparser.ConfigParser()
    with contextlib.suppress(configparser.Error, OSError):
        parser.read(os.path.join(folder, "settings"))
    return parser.get("default", "base_url", fallback="") or _DEFAULT_BASE_URL


_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _has_api_key() -> bool:
    """An API key in the environment or a netrc login for the W&B host (what wandb reads)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlparse(_base_url()).hostname or ""
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def _reachable(timeout: float) -> bool:
    """A TCP connect to the W&B host within `timeout` seconds, name lookup included (a
    socket timeout does not bound the lookup, which can hang far longer without a network);
    without this check wandb.init would wait out its own timeout."""
    if any(os.environ.get(name) for name in _PROXIES):
        return True  # through a proxy a direct connect says nothing: wandb's timeout bounds it
    url = urllib.parse.urlparse(_base_url())
    port = url.port or (443 if url.scheme == "https" else 80)
    result: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((url.hostname or "", port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(result and result[0])


def _wandb_section(config: Any) -> Mapping[str, Any]:
    section = config.get("wandb", None) if hasattr(config, "get") else None
    return section if section is not None else {}


def _init_run(mode: str, kwargs: dict[str, Any], init_timeout: float) -> Any:
    import wandb  # lazy: importing wandb costs about a second and starts nothing we need

    settings = wandb.Settings(
        console="off",  # the trainer owns stdout/stderr; wandb must not wrap them
        quiet=True,
        # No banner: W&B's own lines for an offline run tell the user to "run `wandb
        # online`", which contradicts our fallback line when they asked for online.
        silent=True,
        init_timeout=init_timeout,
    )
    # `create_new`: each tracker owns its run, so several runs in one process (tests, the
    # ablation runner) never finish or log into each other's run.
    return wandb.init(mode=mode, reinit="create_new", settings=settings, **kwargs)


def make_tracker(
    config: Any,
    workdir: str,
    *,
    process_index: int = 0,
    group: str = "",
    tags: tuple[str, ...] = (),
    resume_id: str = "",
) -> Tracker:
    """The tracker `config.wandb` asks for, on process 0 only; never raises because of W&B.

    `group`/`tags` from the caller (e.g. controller name, profile) extend the config's own
    `wandb.group`/`wandb.tags`. `resume_id` continues that W&B run (`resume='allow'`).
    """
    section = _wandb_section(config)
    mode = str(section.get("mode", "disabled"))
    if process_index != 0 or mode == "disabled":
        return NullTracker()
    if mode not in ("online", "offline"):
        raise ValueError(f"wandb.mode must be online, offline or disabled, got {mode!r}")

    root = str(section.get("dir", "") or workdir)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:  # a file, or no permission: the run goes on untracked, as documented
        print(f"W&B: cannot use {root} for its files ({e.strerror or e}); not tracking.")
        return NullTracker()
    all_tags = tuple(dict.fromkeys((*tuple(section.get("tags", ()) or ()), *tags)))
    config_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    config_dict["meta"] = run_metadata(workdir)
    kwargs: dict[str, Any] = {
        "project": str(section.get("project", "") or "omnilearn-jax"),
        "entity": str(section.get("entity", "")) or None,
        "group": group or str(section.get("group", "")) or None,
        "tags": [str(t)[:_MAX_TAG_LEN] for t in all_tags if str(t)],
        "name": os.path.basename(os.path.normpath(workdir)) or None,
        "job_type": "train",
        "config": config_dict,
        "dir": root,
    }
    if resume_id:
        kwargs.update(id=resume_id, resume="allow")
    init_timeout = float(section.get("init_timeout", 30.0))

    fallback = ""  # why an online run logs offline instead
    if mode == "online":
        if not _has_api_key():
            fallback = "no API key (set WANDB_API_KEY or run `wandb login`)"
        elif not _reachable(timeout=min(init_timeout, 5.0)):
            fallback = f"{_base_url()} is unreachable"
        else:
            try:
                tracker = WandbTracker(_init_run("online", kwargs, init_timeout), "online")
                print(f"W&B: logging online to {tracker.url or 'the W&B server'}", flush=True)
                return tracker
            except Exception as e:
                fallback = f"wandb.init failed ({type(e).__name__}: {e})"
    try:
        tracker = WandbTracker(_init_run("offline", kwargs, init_timeout), "offline")
    except Exception as e:
        why = f"online mode but {fallback}; " if fallback else ""
        print(f"W&B: {why}offline init failed ({type(e).__name__}: {e}); not tracking.", flush=True)
        return NullTracker()
    print(fallback_line(fallback, root, tracker.run_id), flush=True)
    return tracker


def fallback_line(reason: str, root: str, run_id: str = "") -> str:
    """The one line a run prints about W&B when it logs offline (`reason`: why an online
    run could not log online; '' when offline was asked for). The sync command names this
    run's id: another run's offline files in the same directory (a fresh rerun there, a
    shared wandb.dir) would be uploaded too; the pattern ends in `*` for the `-1` W&B adds to a
    second directory of the run started within the same second."""
    where = os.path.join(root, "wandb")
    why = f"online mode but {reason}; " if reason else ""
    return (
        f"W&B: {why}logging offline under {where}; upload later with "
        f"`wandb sync {where}/offline-run-*{'-' + run_id + '*' if run_id else ''}`"
    )
