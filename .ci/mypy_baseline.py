"""mypy held to a baseline that only shrinks: `python .ci/mypy_baseline.py` (CI) or `... --update` (after fixing).

Runs mypy with pyproject.toml's settings and compares its errors, without line numbers ("path: message [code]"), to
.ci/mypy-baseline.txt. Fails on an error the baseline does not hold (new code is clean), and on a baseline entry that
no longer occurs (the baseline is rewritten with --update, so it can only shrink). Modules under the strict override
of pyproject.toml may hold no error at all.
"""
from __future__ import annotations

import collections
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
LINE = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<rest>.*)$")


def errors() -> collections.Counter[str]:
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context",
                          "--no-color-output", "--show-error-codes"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"mypy failed to run:\n{out.stdout}{out.stderr}")
    return collections.Counter(f"{m['path']}: {m['rest']}" for line in out.stdout.splitlines()
                               if (m := LINE.match(line)))


def strict_paths() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    modules = [m for o in config.get("overrides", []) if o.get("disallow_untyped_defs") for m in o["module"]]
    return [m.removesuffix(".*").replace(".", "/") for m in modules]  # "a.b.*": every module under a/b/


def main() -> int:
    now = errors()
    strict = [e for e in now if any(e.startswith(p + ".py:") or e.startswith(p + "/") for p in strict_paths())]
    if strict:
        print("mypy errors in strictly checked modules:\n  " + "\n  ".join(sorted(strict)))
        return 1
    if "--update" in sys.argv:
        BASELINE.write_text("".join(f"{e}\n" * n for e, n in sorted(now.items())))
        print(f"{BASELINE.relative_to(ROOT)}: {sum(now.values())} errors")
        return 0
    base = collections.Counter(BASELINE.read_text().splitlines()) if BASELINE.exists() else collections.Counter()
    new, gone = now - base, base - now
    if new:
        print("mypy errors not in the baseline (fix them; the baseline only shrinks):\n  "
              + "\n  ".join(sorted(new.elements())))
    if gone:
        print(f"{sum(gone.values())} baseline errors are fixed: "
              "run `python .ci/mypy_baseline.py --update` to shrink it")
    print(f"mypy: {sum(now.values())} errors, baseline {sum(base.values())}")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
