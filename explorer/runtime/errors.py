"""The one base of every error whose message is meant for the person using the explorer.

A `ViewError`'s str() is a plain-text message (it may quote a model id, a word, a file name: the page escapes it with
explorer.text.escape.md_message), never a traceback. `explorer.ui.cache.probe` shows one raised by a probe once, as
the alert its class names, and stops the page; a page catches one itself only to do something else (a fallback, a
section that ends while the rest of the page goes on).

The subclasses keep their own bases where callers catch them by those (most are also ValueErrors):
Unsupported, DecodingError (adapters); ModelLoadError and its CorruptFileError, UnsafeFileError (files),
OutOfMemoryLoadError, UploadBudgetError (loading); TokenizerError, CorpusError (data); ProjectionError; the probes'
LensError, AttributionError, GradientError, RNNGatesError, EmbeddingError; LessonError; UploadRefused (ui);
RequestOverBudget (explorer.runtime.budget: a request priced above the per-request budget).
"""
from __future__ import annotations

from typing import ClassVar, Literal

Alert = Literal["info", "warning", "error"]


class ViewError(Exception):
    """An error whose str() is a message for the user.

    alert: how a page shows it (st.info, st.warning or st.error): "info" when the model or the text cannot give the
    view (pick another), "warning" when part of the view is left out, "error" when something is wrong (a file, a
    setting, a failed load)."""

    alert: ClassVar[Alert] = "error"


class Caution(str):
    """A note that says part of the input was left out or changed (a cut text, unknown words): shown as a warning,
    where other notes (plain str) are shown as information. A str, so that it is compared, cached and escaped as
    one; pages read `severity`, never the note's words."""

    severity: ClassVar[Alert] = "warning"


def severity(note: str) -> Alert:
    """How a page shows a note: "warning" for a Caution, else "info"."""
    return getattr(note, "severity", "info")
