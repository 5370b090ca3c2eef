"""Where the app's files are: the checkout (app.py beside explorer/) or, for an installed wheel, the data files it
installed under <prefix>/share/neural-nlp-explorer (app.py, app_pages/, assets/, .streamlit/config.toml)."""
from __future__ import annotations

import site
import sys
from pathlib import Path

SHARE = Path("share") / "neural-nlp-explorer"


def app_root() -> Path:
    """The folder holding app.py, app_pages/ and assets/: the checkout this module is in, else the first install
    prefix (the environment's, then the user's) with the wheel's data files; the checkout's path when neither has
    them (a message then names the missing file where it is read)."""
    here = Path(__file__).resolve().parents[2]
    if (here / "app.py").is_file():
        return here
    for prefix in dict.fromkeys((sys.prefix, sys.exec_prefix, site.getuserbase())):
        candidate = Path(prefix) / SHARE
        if (candidate / "app.py").is_file():
            return candidate
    return here


ROOT = app_root()
ASSETS = ROOT / "assets"
