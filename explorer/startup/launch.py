"""`python -m explorer` (or the `neural-nlp-explorer` command): `streamlit run app.py` from wherever the app's files
are (explorer.runtime.paths: the checkout, or an installed wheel's data files), with the app's own
.streamlit/config.toml passed as options (Streamlit reads that file from the current folder only), and any option
given after it (`python -m explorer --server.port 8600`) passed on, overriding the file's."""
from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Sequence

from explorer.runtime.paths import app_root


def config_options(config: Path) -> list[str]:
    """The settings of a Streamlit config.toml as command-line options: `--section.key=value`."""
    if not config.is_file():
        return []
    with config.open("rb") as f:
        data = tomllib.load(f)
    out = []
    for section, values in data.items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out.append(f"--{section}.{key}={text}")
    return out


def command(args: Sequence[str], root: Path | None = None) -> list[str]:
    """The streamlit command line: the app, the config file's options, then `args` (a later option wins)."""
    root = root or app_root()
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    options = [o for o in config_options(root / ".streamlit" / "config.toml") if o.split("=", 1)[0] not in given]
    return [sys.executable, "-m", "streamlit", "run", str(root / "app.py"), *options, *args]


def main(argv: Sequence[str] | None = None) -> None:
    """Replace this process with the Streamlit server (its signals and exit code are the server's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        print("\nOptions: those of `streamlit run` (python -m streamlit run --help).")
        return
    cmd = command(args)
    if not Path(cmd[4]).is_file():
        sys.exit(f"The app's files were not found ({cmd[4]}): reinstall the package (pip install .).")
    os.execv(cmd[0], cmd)
