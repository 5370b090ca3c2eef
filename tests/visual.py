"""Visual regression: compare a browser screenshot with its committed reference, within a pixel tolerance.

References live in tests/screenshots/ (PNG). A pixel differs when one of its channels differs by more than `level`
(0..255, so anti-aliasing and font hinting pass); the screenshots match when at most `tolerance` of the pixels
differ. The parts of a page that vary from run to run or machine to machine (the sidebar's settings, which list
the devices; Streamlit's toolbar and running indicator) are masked by the test before it takes the screenshot.
On a mismatch a diff image (differing pixels red over a faded copy of the new screenshot) is written next to the
new screenshot. An intended change of layout updates the references in the same commit:
`EXPLORER_UPDATE_SCREENSHOTS=1 python -m pytest tests/test_browser.py -k first_screen`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

REFERENCES = Path(__file__).resolve().parent / "screenshots"
UPDATE = os.environ.get("EXPLORER_UPDATE_SCREENSHOTS", "").strip() not in ("", "0")


def differing(actual: np.ndarray, reference: np.ndarray, level: int = 40) -> np.ndarray:
    """(H, W) bool: pixels where some channel of two (H, W, 3) uint8 images differs by more than `level`."""
    return (np.abs(actual.astype(np.int16) - reference.astype(np.int16)) > level).any(axis=2)


def load(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def check(actual: Path, name: str, tolerance: float = 0.01, level: int = 40) -> str | None:
    """Compare the screenshot `actual` with the reference `name`; None when they match (or the reference was just
    written: update mode or a new view), else what differs. Writes `<actual>-diff.png` on a mismatch."""
    reference = REFERENCES / name
    if UPDATE or not reference.exists():
        if not UPDATE:
            return f"no reference {reference.name}: run with EXPLORER_UPDATE_SCREENSHOTS=1 and commit it"
        reference.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(actual, reference)
        return None
    a, r = load(actual), load(reference)
    if a.shape != r.shape:
        return f"{name}: size {a.shape[1]}×{a.shape[0]}, the reference is {r.shape[1]}×{r.shape[0]}"
    mask = differing(a, r, level)
    fraction = float(mask.mean())
    if fraction <= tolerance:
        return None
    diff = (a * 0.35 + 255 * 0.65).astype(np.uint8)
    diff[mask] = (255, 0, 0)
    out = actual.with_name(actual.stem + "-diff.png")
    Image.fromarray(diff).save(out)
    rows = np.flatnonzero(mask.any(axis=1))
    return (f"{name}: {fraction:.2%} of the pixels differ (tolerance {tolerance:.0%}), rows {rows[0]}–{rows[-1]}; "
            f"see {out}")
