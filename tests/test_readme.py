"""README against the app: every shipped view, lesson and setting is in it, each view with a screenshot that exists.

The screenshots themselves are regenerated from the app by the browser test (EXPLORER_UPDATE_SCREENSHOTS=1 writes
them to docs/screenshots/ along with the visual references): this test fails when a view, a lesson or a limit is
added without its place in README.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer import lessons as L
from explorer.loading import model_cache
from explorer.views import VIEWS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
GALLERY = README.split("## Set-up", 1)[0]  # the table of screenshots at the top
NUMBERS = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten",
           11: "Eleven", 12: "Twelve"}


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


@pytest.mark.parametrize("view", [v for v in VIEWS if v.url_path != "overview" or v.title], ids=lambda v: v.url_path)
def test_every_view_is_in_the_gallery_with_its_screenshot(view) -> None:
    shot = f"docs/screenshots/{view.url_path}-normal.png"
    assert f"**{view.title}**" in GALLERY, f"README's gallery does not name the view {view.title!r}"
    assert shot in GALLERY, f"README's gallery has no screenshot of {view.url_path} ({shot})"
    assert (ROOT / shot).is_file(), shot


def test_every_screenshot_in_readme_exists() -> None:
    for path in re.findall(r"\]\((docs/screenshots/[^)]+)\)", README):
        assert (ROOT / path).is_file(), path


def test_every_shipped_lesson_is_listed_and_counted() -> None:
    lessons, errors = L.load_dir()
    assert not errors
    section = _section("Lessons")
    for lesson in lessons:
        assert f"| {lesson.title} |" in section, f"README's lesson table lacks {lesson.title!r}"
    assert f"{NUMBERS[len(lessons)]} lessons ship" in section, f"README does not say {len(lessons)} lessons ship"


def _settings_read_by_the_app() -> set[str]:
    names: set[str] = set()
    for path in [ROOT / "app.py", *(ROOT / "explorer").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]:
        names.update(re.findall(r"EXPLORER_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8")))
    return names


def test_every_setting_the_app_reads_is_in_readme() -> None:
    missing = sorted(name for name in _settings_read_by_the_app() if not re.search(rf"{name}(?![A-Z_])", README))
    assert not missing, f"settings read by the app but not in README: {missing}"


@pytest.mark.parametrize("setting, default", [
    ("EXPLORER_MAX_LESSON_KB", f"{L.DEFAULT_MAX_LESSON_KB} KB"),
    ("EXPLORER_MAX_MODEL_MB", f"{model_cache.DEFAULT_MAX_MODEL_MB:,} MB"),
    ("EXPLORER_MAX_MODELS", f"{model_cache.DEFAULT_MAX_MODELS} models"),
])
def test_limits_table_gives_each_default(setting: str, default: str) -> None:
    """The limits table's row for a setting states the default the code uses."""
    rows = [line for line in README.splitlines() if line.startswith("|") and f"`{setting}`" in line]
    assert rows, f"no row of README's limits table names {setting}"
    assert any(default in row for row in rows), f"README's row for {setting} does not say {default}"
