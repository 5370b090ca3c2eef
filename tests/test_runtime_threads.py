"""The sessions' script threads share the interpreter every millisecond (explorer.runtime.threads), set by the
module app.py imports first."""
from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_the_app_hands_the_interpreter_over_every_millisecond() -> None:
    code = "import sys; import explorer.runtime.preload; print(sys.getswitchinterval())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) == 0.001
    assert sys.getswitchinterval() != 0 and "import explorer.runtime.preload" in (ROOT / "app.py").read_text()
