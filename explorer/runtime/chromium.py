"""Debian's chromium, as the product drives it headless (the lesson export's PDF) and as the browser tests and bench/
drive it (testkit.browser takes these from here): never downloaded, /usr/bin/chromium or $CHROMIUM."""
from __future__ import annotations

import os

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # WebGL (Plotly's scattergl) without a GPU: Chromium's software renderer
    "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
]
