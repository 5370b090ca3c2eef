"""`python -m explorer`: the streamlit command it runs (the app, its own config as options, the user's options
winning) and where it finds the app's files."""
from __future__ import annotations

import sys

from explorer.runtime.paths import app_root
from explorer.startup.launch import command, config_options
from testkit.browser import ROOT


def test_the_command_runs_the_checkouts_app_with_its_config_and_the_users_options() -> None:
    assert app_root() == ROOT
    cmd = command(["--server.port", "8600", "--server.maxUploadSize=50"])
    assert cmd[:5] == [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
    assert "--runner.postScriptGC=false" in cmd and "--server.headless=true" in cmd
    assert "--server.maxUploadSize=250" not in cmd and cmd[-3:] == ["--server.port", "8600",
                                                                    "--server.maxUploadSize=50"]


def test_every_setting_of_the_config_file_becomes_an_option(tmp_path) -> None:
    import tomllib

    config = ROOT / ".streamlit" / "config.toml"
    data = tomllib.loads(config.read_text())
    options = config_options(config)
    assert len(options) == sum(len(v) for v in data.values())
    assert config_options(tmp_path / "none.toml") == []
