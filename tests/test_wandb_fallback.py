"""W&B online without a network: one line of ours, W&B's own banner off (stubs only)."""

import os
import sys
import time
import types

import ml_collections

from omnilearn_jax.tracking import trackers


class _FakeRun:
    def __init__(self, directory):
        self.id, self.url = "fake", "https://wandb.example/run/fake"
        self.dir = os.path.join(directory, "wandb", "offline-run-x", "files")
        self.summary = {}

    def log(self, *a, **k):
        pass

    def finish(self, *a, **k):
        pass


def _install_fake_wandb(monkeypatch, calls):
    fake = types.ModuleType("wandb")

    class Settings(dict):
        def __init__(self, **kwargs):
            super().__init__(kwargs)

    def init(mode, settings, dir, **kwargs):
        calls.append((mode, settings))
        return _FakeRun(dir)

    fake.Settings, fake.init = Settings, init
    monkeypatch.setitem(sys.modules, "wandb", fake)


def _config(mode):
    return ml_collections.ConfigDict({"wandb": {"mode": mode, "project": "p"}})


def test_unreachable_online_run_says_one_line_and_silences_wandb(tmp_path, capsys, monkeypatch):
    calls = []
    _install_fake_wandb(monkeypatch, calls)
    monkeypatch.setattr(trackers, "_has_api_key", lambda: True)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: False)
    tracker = trackers.make_tracker(_config("online"), str(tmp_path))
    assert tracker.mode == "offline"
    assert [mode for mode, _ in calls] == ["offline"]  # online was never tried
    settings = calls[0][1]
    assert settings["silent"] is True and settings["console"] == "off"
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        f"W&B: online mode but https://api.wandb.ai is unreachable; logging offline under "
        f"{tmp_path}/wandb; upload later with `wandb sync {tmp_path}/wandb/offline-run-*-fake*`"
    ]
    assert "wandb online" not in lines[0]  # nothing tells the user to do what they did


def test_online_run_names_its_page(tmp_path, capsys, monkeypatch):
    calls = []
    _install_fake_wandb(monkeypatch, calls)
    monkeypatch.setattr(trackers, "_has_api_key", lambda: True)
    monkeypatch.setattr(trackers, "_reachable", lambda timeout: True)
    tracker = trackers.make_tracker(_config("online"), str(tmp_path))
    assert tracker.mode == "online" and calls[0][1]["silent"] is True
    assert capsys.readouterr().out.strip() == (
        "W&B: logging online to https://wandb.example/run/fake"
    )


def test_reachability_check_is_bounded_even_when_name_lookup_hangs(monkeypatch):
    def hang(*args, **kwargs):
        time.sleep(5)  # far past the timeout; then fail as a lookup without a network does
        raise OSError("name lookup timed out")

    monkeypatch.setattr(trackers.socket, "create_connection", hang)
    start = time.perf_counter()
    assert trackers._reachable(timeout=0.5) is False
    assert time.perf_counter() - start < 2.0


def test_the_host_is_wandbs_own_and_a_proxy_skips_the_direct_check(tmp_path, monkeypatch):
    """`wandb login --host` (a self-hosted server) and a proxy (HPC sites) were ignored: the
    run checked api.wandb.ai directly, found no key or no route, and logged offline."""
    for name in ("WANDB_BASE_URL", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path))
    assert trackers._base_url() == "https://api.wandb.ai"
    (tmp_path / "settings").write_text("[default]\nbase_url = http://127.0.0.1:9\n")
    assert trackers._base_url() == "http://127.0.0.1:9"
    monkeypatch.setattr(trackers.socket, "create_connection", lambda *a, **k: 1 / 0)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert trackers._reachable(timeout=0.5)  # no direct connect tried


def test_a_wandb_dir_that_cannot_be_made_tracks_nothing_in_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("a file")
    config = _config("offline")
    config.wandb.dir = str(tmp_path / "f")
    tracker = trackers.make_tracker(config, str(tmp_path / "run"))
    assert isinstance(tracker, trackers.NullTracker)
    assert capsys.readouterr().out.startswith(f"W&B: cannot use {tmp_path / 'f'} for its files")
