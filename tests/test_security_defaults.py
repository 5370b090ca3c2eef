"""Security defaults, checked on the source (AST, not text search) and at run time: no remote code, torch.load only
with weights_only=True, no pickle, no HTML from users, no file paths from the browser, an upload size limit."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from conftest import ROOT
from explorer.files.safe_load import DEFAULT_MAX_UPLOAD_MB
from families import BERT_ONE_LAYER, tiny_model

APP_FILES = sorted([ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"), *(ROOT / "explorer").rglob("*.py")])
CODE_FILES = sorted([*APP_FILES, *(ROOT / "bench").rglob("*.py")])

# Every place that hands markup to the browser as HTML, audited: (file, function, what it renders).
UNSAFE_HTML_AUDIT: set[tuple[str, str, str]] = set()
ST_HTML_AUDIT = {  # st.html: only the builders that escape every token (tested below and in test_hostile_probes)
    ("app_pages/decoding_strategies.py", "html", "V.tokens_html"),
    ("explorer/ui/present.py", "html", "p.markup[what]"),  # a presenter's HTML, from the viz builders below
    ("explorer/ui/settings.py", "html", "PROJECTOR_CSS if projector() else BASE_CSS"),  # module constants: static CSS
    ("explorer/ui/lessons.py", "html", "SCROLL_SCRIPT.format"),  # a constant script, a counter put in (below)
    ("explorer/ui/lessons.py", "html", "KEYS_SCRIPT"),  # a constant script: ← and → move between lesson steps
}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            yield node


def _name(func: ast.expr) -> str:
    return ast.unparse(func)


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_no_trust_remote_code_true() -> None:
    offenders = []
    for path in APP_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "trust_remote_code" and not (
                    isinstance(node.value, ast.Constant) and node.value.value is False):
                offenders.append(f"{_rel(path)}:{node.value.lineno}")
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "trust_remote_code" and not (
                            isinstance(value, ast.Constant) and value.value is False):
                        offenders.append(f"{_rel(path)}:{key.lineno}")
    assert not offenders, f"trust_remote_code must be the literal False: {offenders}"


def test_every_torch_load_passes_weights_only_true() -> None:
    found, offenders = [], []
    for path in CODE_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.module == "torch"
                    and any(a.name == "load" for a in node.names)):
                offenders.append(f"{_rel(path)}:{node.lineno} imports torch.load under another name")
        for call in _calls(path):
            if _name(call.func) == "torch.load":
                found.append(_rel(path))
                value = _keyword(call, "weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    offenders.append(f"{_rel(path)}:{call.lineno}")
    assert "explorer/files/safe_load.py" in found  # the one reader of .pt files
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


def test_nothing_unpickles() -> None:
    offenders = []
    for path in CODE_FILES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in ("pickle", "dill", "joblib", "cloudpickle", "marshal", "shelve")
                       for n in names):
                    offenders.append(f"{_rel(path)}:{node.lineno} imports {names}")
            if isinstance(node, ast.Call):
                if _name(node.func) in ("eval", "exec") or (
                        _name(node.func).endswith(("np.load", "numpy.load"))
                        and isinstance(_keyword(node, "allow_pickle"), ast.Constant)
                        and _keyword(node, "allow_pickle").value is True):
                    offenders.append(f"{_rel(path)}:{node.lineno} {_name(node.func)}")
    assert not offenders, offenders


def _html_sites(keyword: str | None) -> set[tuple[str, str, str]]:
    sites = set()
    for path in APP_FILES:
        for call in _calls(path):
            fn = _name(call.func).split(".")[-1]
            if keyword is not None:
                value = _keyword(call, keyword)
                if value is None or (isinstance(value, ast.Constant) and value.value is False):
                    continue
            elif _name(call.func) not in ("st.html", "components.html", "st.components.v1.html"):
                continue
            arg = ast.unparse(call.args[0].func if call.args and isinstance(call.args[0], ast.Call) else
                              call.args[0]) if call.args else "?"
            sites.add((_rel(path), fn, arg))
    return sites


def test_unsafe_allow_html_only_with_static_markup() -> None:
    sites = _html_sites("unsafe_allow_html")
    assert sites == UNSAFE_HTML_AUDIT, f"audit each new unsafe_allow_html and add it here: {sites}"
    import explorer.ui.settings as settings

    for css in (settings.PROJECTOR_CSS, settings.BASE_CSS):
        assert isinstance(css, str) and css.lstrip().startswith("<style") and "<script" not in css.lower()


def test_the_only_scripts_are_constants() -> None:
    """st.html's two scripts are module constants: one (a lesson step opens at the top of its view) whose only field
    is the integer that makes each copy new, the other (← and → move between the steps) with nothing put in."""
    import string

    from explorer.ui import lessons

    fields = [f for _, f, _, _ in string.Formatter().parse(lessons.SCROLL_SCRIPT) if f is not None]
    assert fields == [""] and lessons.SCROLL_SCRIPT.format(7).startswith("<script>/* 7 */")
    assert "scrollTop = 0" in lessons.SCROLL_SCRIPT
    calls = [c for c in _calls(ROOT / "explorer/ui/lessons.py") if _keyword(c, "unsafe_allow_javascript") is not None]
    assert sorted(ast.unparse(c.args[0]) for c in calls) == ["KEYS_SCRIPT", "SCROLL_SCRIPT.format(next(_SCROLLS))"]
    assert isinstance(lessons.KEYS_SCRIPT, str) and "ArrowRight" in lessons.KEYS_SCRIPT  # a literal, used as is


HTML_BUILDERS = {"viz.colored_tokens_html", "viz.attribution_html", "V.tokens_html"}  # escape every token (below)


def test_st_html_only_through_escaping_builders() -> None:
    assert _html_sites(None) == ST_HTML_AUDIT
    presenters = sorted((ROOT / "explorer" / "presenters").glob("*.py"))
    calls = [c for path in presenters for c in _calls(path) if _name(c.func) == "p.html"]
    # a presenter's HTML is the output of a builder that escapes: p.html(name, builder(...))
    assert len(calls) >= 2 and all(len(c.args) == 2 and isinstance(c.args[1], ast.Call) for c in calls)
    presented = {(c.lineno, _name(c.args[1].func)) for c in calls}
    assert {builder for _, builder in presented} <= HTML_BUILDERS, presented
    from explorer.viz import token_attribution as attribution, decoding_strategies as decoding, lstm_gates as rnn_gates
    import numpy as np

    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    for markup in (rnn_gates.colored_tokens_html([evil], np.array([0.5])),
                   attribution.attribution_html([evil, evil], np.array([0.5, -0.2]), 1),
                   decoding.tokens_html(evil, [evil], np.array([-1.0]))):
        assert "<script" not in markup and "<img" not in markup and "&lt;script&gt;" in markup


def test_no_interpolated_markdown_with_html() -> None:
    """No f-string or concatenation is ever passed with unsafe_allow_html (user text could hide in it)."""
    for path in APP_FILES:
        for call in _calls(path):
            value = _keyword(call, "unsafe_allow_html")
            if value is not None and call.args:
                assert not isinstance(call.args[0], (ast.JoinedStr, ast.BinOp)), f"{_rel(path)}:{call.lineno}"


def test_pages_open_no_files() -> None:
    """Pages are glue: no open()/Path()/os.path; files are reached only through the registry's listing."""
    offenders = []
    for path in [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]:
        for call in _calls(path):
            name = _name(call.func)
            if name in ("open", "Path", "pathlib.Path", "io.open") or name.startswith("os.") or \
                    name.endswith((".read_text", ".read_bytes", ".write_text", ".write_bytes")):
                offenders.append(f"{_rel(path)}:{call.lineno} {name}")
    assert not offenders, offenders


def test_upload_size_limit_is_the_same_in_streamlit_and_the_registry() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == DEFAULT_MAX_UPLOAD_MB == 250


def test_upload_size_limit_comes_from_the_environment(monkeypatch) -> None:
    from explorer.files.safe_load import max_upload_bytes

    assert max_upload_bytes() == 250 * 2**20
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "2.5")
    assert max_upload_bytes() == int(2.5 * 2**20)
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "lots")  # unparsable: the default, never "no limit"
    assert max_upload_bytes() == 250 * 2**20


def test_hugging_face_loading_never_trusts_remote_code(tmp_path: Path, monkeypatch) -> None:
    """Every from_pretrained call the registry makes passes trust_remote_code=False (and eager attention for models)."""
    import transformers

    from explorer.loading.loaders import load_model

    tiny_model("BertModel", 50, **BERT_ONE_LAYER).save_pretrained(tmp_path / "tiny-bert-sec")
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    seen: list[tuple[str, dict]] = []
    for cls_name in ("AutoConfig", "AutoModel", "AutoTokenizer"):
        cls = getattr(transformers, cls_name)
        original = cls.from_pretrained.__func__

        def spy(klass, source, *args, _name=cls_name, _orig=original, **kwargs):
            seen.append((_name, kwargs))
            return _orig(klass, source, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    load_model("local:tiny-bert-sec")
    assert {name for name, _ in seen} == {"AutoConfig", "AutoModel", "AutoTokenizer"}
    for name, kwargs in seen:
        assert kwargs.get("trust_remote_code") is False, (name, kwargs)
        assert kwargs.get("local_files_only") is True, (name, kwargs)
        if name == "AutoModel":
            assert kwargs.get("attn_implementation") == "eager"
