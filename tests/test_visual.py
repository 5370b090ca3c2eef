"""tests/visual.py, the screenshot comparison of the browser test: a layout shift fails, rendering noise passes."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

import visual

REFERENCE = Path(__file__).resolve().parent / "screenshots" / "lstm-gates.png"


def _save(array: np.ndarray, path: Path) -> Path:
    Image.fromarray(array).save(path)
    return path


def test_the_same_screenshot_matches_and_noise_within_the_level_passes(tmp_path, monkeypatch):
    monkeypatch.setattr(visual, "UPDATE", False)
    ref = visual.load(REFERENCE)
    assert visual.check(_save(ref, tmp_path / "same.png"), REFERENCE.name) is None
    noise = np.random.default_rng(0).integers(-30, 31, ref.shape)
    noisy = np.clip(ref.astype(int) + noise, 0, 255).astype(np.uint8)  # anti-aliasing-sized differences
    assert visual.check(_save(noisy, tmp_path / "noisy.png"), REFERENCE.name) is None


def test_a_layout_shift_fails_and_writes_a_diff(tmp_path, monkeypatch):
    monkeypatch.setattr(visual, "UPDATE", False)
    ref = visual.load(REFERENCE)
    shifted = np.full_like(ref, 255)
    shifted[24:] = ref[:-24]  # everything 24 px lower: a row of controls more above the chart
    fraction = visual.differing(shifted, ref).mean()
    assert fraction > 0.05
    message = visual.check(_save(shifted, tmp_path / "shifted.png"), REFERENCE.name)
    assert message is not None and f"{fraction:.2%}" in message
    diff = visual.load(tmp_path / "shifted-diff.png")
    assert (diff[visual.differing(shifted, ref)] == (255, 0, 0)).all()


def test_a_new_size_or_a_missing_reference_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(visual, "UPDATE", False)
    ref = visual.load(REFERENCE)
    assert "size" in visual.check(_save(ref[:-10], tmp_path / "short.png"), REFERENCE.name)
    assert "no reference" in visual.check(_save(ref, tmp_path / "x.png"), "no-such-view.png")
