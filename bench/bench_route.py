"""The route of a typed sentence through the house: which of the product's files run, and how often control moves
between them, from the new sentence to the page's last chart.

    python bench/bench_route.py                      # self-attention, its default model
    python bench/bench_route.py token-attribution --text "the cat sat"

The page is run once under Streamlit's AppTest (models loaded, caches warm), then its sentence is changed and the
rerun is watched with a profile hook (Python calls and returns only; C calls are not counted). Only the page's own
run is counted (from its script's first line to its last), and only files of explorer/ and app_pages/. Printed:
- files: the product files whose code ran;
- moves: how often the innermost product frame changed file (a call into another file, or a return from one);
- calls between files, between folders: the distinct (caller, callee) pairs of files, of folders (app_pages,
  explorer/ui, explorer/probes, explorer/viz, ...);
- calls back: the distinct pairs where the callee's file is already on the stack below (a call back up the route);
- page -> ui: the ui modules the page calls; ui -> page: the files that call the page's own code back.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PRODUCT = (str(ROOT / "explorer") + "/", str(ROOT / "app_pages") + "/")


def _product_file(frame: FrameType | None) -> str | None:
    """The product file of the innermost product frame at or above `frame` (None outside the product)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(PRODUCT):
            return str(Path(name).relative_to(ROOT))
        frame = frame.f_back
    return None


class Route:
    """The product files control stood in while the page's script ran, and the calls between them."""

    def __init__(self, page: str) -> None:
        self.page, self.depth = str(ROOT / page), 0  # depth: >0 while the page's script runs
        self.files: list[str] = []  # the file of the innermost product frame, each time it changes
        self.edges: set[tuple[str, str]] = set()  # (caller file, callee file)
        self.back: set[tuple[str, str]] = set()  # calls into a file already on the stack below: a call back

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event not in ("call", "return"):
            return
        is_page_script = frame.f_code.co_filename == self.page and frame.f_code.co_name == "<module>"
        if is_page_script:
            self.depth += 1 if event == "call" else -1
        if self.depth <= 0 and not is_page_script:
            return
        here = _product_file(frame if event == "call" else frame.f_back)
        if event == "call" and here is not None and frame.f_code.co_filename.startswith(PRODUCT):
            caller = _product_file(frame.f_back)
            if caller is not None and caller != here:
                self.edges.add((caller, here))
                below, f = set(), frame.f_back
                while f is not None:
                    below.add(_product_file(f))
                    f = f.f_back
                if here in below:
                    self.back.add((caller, here))
        if here is not None and (not self.files or self.files[-1] != here):
            self.files.append(here)

    def summary(self) -> dict[str, int]:
        page = str(Path(self.page).relative_to(ROOT))
        folder = {f: f.split("/")[1] if f.startswith("explorer/") and f.count("/") > 1 else f for f in self.files}
        return {"files": len(set(self.files)), "moves": max(len(self.files) - 1, 0),
                "calls between files": len(self.edges),
                "calls between folders": len({(folder[a], folder[b]) for a, b in self.edges if folder[a] != folder[b]}),
                "calls back": len(self.back),
                "page -> ui": len({b for a, b in self.edges if a == page and b.startswith("explorer/ui/")}),
                "ui -> page": sum(1 for a, b in self.edges if b == page)}


def main() -> None:
    os.environ.setdefault("EXPLORER_LIVE_INPUT", "0")  # st.text_input, which AppTest can type into
    from streamlit.testing.v1 import AppTest

    from explorer.views import BY_PATH

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("view", nargs="?", default="self-attention")
    ap.add_argument("--text", default="the keys to the old cabinet are on the table")
    ap.add_argument("--list", action="store_true", help="print the files in the order they were entered")
    args = ap.parse_args()
    page = BY_PATH[args.view].script
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(page)
    at.run()
    at.text_input(key="text").set_value(args.text)
    route = Route(page)
    threading.setprofile(route)
    sys.setprofile(route)
    try:
        at.run()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)
    assert not at.exception, [e.value for e in at.exception]
    print(f"{args.view} ({page}), a new sentence: " + ", ".join(f"{k} {v}" for k, v in route.summary().items()))
    if args.list:
        print("files, in the order entered:", *dict.fromkeys(route.files), sep="\n  ")
        print("calls between files:", *(f"{a} -> {b}" + (" (back)" if (a, b) in route.back else "")
                                         for a, b in sorted(route.edges)), sep="\n  ")


if __name__ == "__main__":
    main()
