"""The house rules, read from the code itself (docs/ARCHITECTURE.md):

- only explorer/ui, pages and app.py import streamlit;
- probes import neither explorer.ui, explorer.viz nor the catalogue/loaders/uploads, and adapters nor the
  generation loop import probes, viz or ui; viz never imports torch or the models;
- pages are glue: no numpy/torch/math arithmetic, no st.cache_* definitions, no hand-built Markdown tables;
- one record: the model family is decided in one place (explorer/adapters/family.py), and nothing in explorer
  registers a hook on a model;
- one generation loop: one sampling loop and one beam search (explorer/adapters/generation.py);
- transformers is imported in one place (explorer/runtime/hf_runtime.py), so that concurrent sessions never resolve its
  lazy names at the same time, and models are loaded one at a time;
- the explorer's modules import one another without a cycle, so that concurrent sessions never deadlock on
  Python's import locks.

The guide itself is checked here too: its layout map (every room, in order, every folder, nothing that is not
there), every module's own one-line description, the files, tests and names it cites, its two tables, and its worked
example, run as written.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

from conftest import ROOT

EXPLORER = sorted((ROOT / "explorer").rglob("*.py"))
PAGES = sorted((ROOT / "app_pages").glob("*.py"))
MODEL_CLASSES = {"GPT", "RNNLanguageModel", "Seq2Seq", "SkipGram"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _package(path: Path) -> str:
    """The package relative imports in `path` start from."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


def _imported(node: ast.AST, package: str) -> set[str]:
    """The names an import statement imports (absolute; `from a import b` gives a and a.b); empty for any other."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        return {base} | {f"{base}.{a.name}" for a in node.names}
    return set()


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; relative imports resolved inside explorer)."""
    package = _package(path)
    return {name for node in ast.walk(_tree(path)) for name in _imported(node, package)}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _in(path: Path, folder: str) -> bool:
    return _rel(path).startswith(folder)


# The folders of explorer/ are the architecture: each room (a folder, or one of the few top-level modules) imports
# only rooms before it in this list (lower floors), never one after it, at import time or inside a function.
ROOMS = (
    "runtime",      # process plumbing: device and threads, heap freezing, LRU, transformers import, numba cache
    "text",         # how a token is written on screen, escaping for Markdown/HTML/LaTeX
    "files",        # untrusted files read within budgets: safetensors/.pt/JSON/YAML, state-dict descriptions
    "data",         # seeded corpora, vocabularies, tokenizers, example sentences
    "models",       # the built-in architectures, one file each
    "adapters",     # one mechanism for running any model: the activation record, the generation loop
    "loading",      # model ids, checkpoints, uploads, packaged models, the model cache
    "param_kinds",  # one parser per kind of view parameter (URL, lessons, declarations)
    "views",        # the views declared once: paths, parameters, families
    "metrics",      # held-out metrics of a model, metrics of generated text, faithfulness of attributions
    "projections",  # PCA / t-SNE / UMAP, shipped projection assets, background jobs
    "probes",       # one per view: the computation, returning a Trace
    "training",     # training specs, loops, budgets, background jobs
    "lessons",      # lesson files: parsing, validation against the views
    "viz",          # one per view: Trace -> Plotly figure / HTML, no torch
    "presenters",   # one per view: Trace + settings -> named figures, tables, notes, warnings; no streamlit
    "nb",           # the views in a notebook: probes and figures, no streamlit
    "ui",           # streamlit: widgets, caches, state, charts
    "startup",      # run before a server takes sessions: warm-up, baking projection assets, the launcher
    "__main__",     # python -m explorer: the launcher
)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "explorer" and len(parts) > 1 else None


def test_the_folders_are_the_architecture() -> None:
    """Every room is placed in ROOMS, its __init__ holds no code, and imports run from a later room to an earlier
    one."""
    rooms = {p.name if p.is_dir() else p.stem for p in (ROOT / "explorer").iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert rooms == set(ROOMS)
    for init in (ROOT / "explorer").rglob("__init__.py"):
        body = _tree(init).body
        assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), _rel(init)
    back = sorted({(_rel(p), m) for p in EXPLORER for m in _imports(p)
                   if (room := _room(m)) in ROOMS and _room(_module_name(p)) in ROOMS
                   and ROOMS.index(room) > ROOMS.index(_room(_module_name(p)))})
    assert back == []
    assert ROOMS.index(_room("explorer.probes.logit_lens")) > ROOMS.index(_room("explorer.adapters.base"))


def test_only_the_ui_layer_imports_streamlit() -> None:
    offenders = [_rel(p) for p in EXPLORER if not _in(p, "explorer/ui/")
                 and any(m == "streamlit" or m.startswith("streamlit.") for m in _imports(p))]
    assert offenders == []
    assert any("streamlit" in m for m in _imports(ROOT / "explorer" / "ui" / "state.py"))  # the rule can fail


def test_the_product_never_imports_its_test_harness() -> None:
    """Issue 58: explorer/, the pages and app.py import nothing from testkit (imports inside functions included);
    the harness may import the product (testkit.browser takes chromium's path and flags from explorer.runtime)."""
    product = [*EXPLORER, *PAGES, ROOT / "app.py"]
    offenders = [_rel(p) for p in product if any(m == "testkit" or m.startswith("testkit.") for m in _imports(p))]
    assert offenders == []
    assert any(m.startswith("explorer.") for m in _imports(ROOT / "testkit" / "browser.py"))  # the rule can fail


@pytest.mark.parametrize("folder, forbidden", [
    ("explorer/probes/", ("explorer.ui", "explorer.viz", "explorer.loading.catalogue", "explorer.loading.loaders",
                          "explorer.loading.uploads")),
    ("explorer/adapters/", ("explorer.ui", "explorer.viz", "explorer.probes", "explorer.adapters.generation")),
    ("explorer/adapters/generation.py", ("explorer.ui", "explorer.viz", "explorer.probes")),
    ("explorer/viz/", ("torch", "explorer.models", "explorer.adapters", "explorer.ui", "explorer.loading.loaders")),
    ("explorer/models/", ("explorer.adapters", "explorer.probes", "explorer.viz", "explorer.ui")),
])
def test_the_flow_runs_one_way(folder: str, forbidden: tuple[str, ...]) -> None:
    files = [p for p in EXPLORER if _in(p, folder)]
    assert files, folder
    offenders = {_rel(p): sorted(m for m in _imports(p) if any(m == f or m.startswith(f + ".") for f in forbidden))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


ARITHMETIC_MODULES = ("numpy", "torch", "math", "scipy", "sklearn", "hashlib", "statistics")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_are_glue(page: Path) -> None:
    """No arithmetic libraries, no cache definitions, no Markdown tables, no matrix products in a page."""
    tree = _tree(page)
    assert not [m for m in _imports(page) if m.split(".")[0] in ARITHMETIC_MODULES]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("cache_data", "cache_resource"):
            pytest.fail(f"{page.name}:{node.lineno} defines a cache (explorer/ui holds them)")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.MatMult, ast.Pow)):
            pytest.fail(f"{page.name}:{node.lineno} computes ({type(node.op).__name__})")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "|---" in node.value:
            pytest.fail(f"{page.name}:{node.lineno} builds a Markdown table (use st.dataframe of a viz builder)")


def _isinstance_targets(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            target = node.args[1]
            for elt in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(elt, ast.Name):
                    names.add(elt.id)
    return names


def test_the_model_family_is_decided_once() -> None:
    """isinstance(model, GPT | RNNLanguageModel | Seq2Seq | SkipGram) only in explorer/adapters/family.py."""
    where = {_rel(p): sorted(_isinstance_targets(_tree(p)) & MODEL_CLASSES) for p in EXPLORER + PAGES}
    assert {k: v for k, v in where.items() if v} == {
        "explorer/adapters/family.py": sorted(MODEL_CLASSES)}


def test_hooks_are_installed_once_in_one_place() -> None:
    """Forward hooks are registered only by explorer/adapters/interventions.py's TransformerSites.install and
    explorer/adapters/lrp.py's install (each called once, when an adapter is built; the hooks act only inside a scope
    of the calling thread: an intervention, or a relevance pass)."""
    calls = [(_rel(p), fn.name) for p in EXPLORER + PAGES for fn in ast.walk(_tree(p))
             if isinstance(fn, ast.FunctionDef) for node in ast.walk(fn)
             if isinstance(node, ast.Attribute) and node.attr.startswith("register_") and "hook" in node.attr]
    assert sorted(set(calls)) == [("explorer/adapters/interventions.py", "install"),
                                  ("explorer/adapters/lrp.py", "install")]


def test_one_sampling_loop_and_one_beam_search() -> None:
    """The loops that pick tokens live in explorer/adapters/generation.py only: no other function samples with
    torch.multinomial (but word2vec's noise words in training) or defines a beam search or a greedy decoder
    (the viz draws them)."""
    found = []
    for p in EXPLORER:
        if _in(p, "explorer/viz/") or _rel(p) == "explorer/training/tasks.py":
            continue
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.FunctionDef) and any(w in node.name.lower() for w in ("beam", "greedy")):
                found.append((_rel(p), node.name))
            if isinstance(node, ast.Attribute) and node.attr == "multinomial":
                found.append((_rel(p), "multinomial"))
    assert sorted(found) == [("explorer/adapters/generation.py", "beam_search"),
                             ("explorer/adapters/generation.py", "greedy_batch"),
                             ("explorer/adapters/generation.py", "multinomial")]


def test_no_file_points_outside_the_repository() -> None:
    """The repository stands alone: no file refers to a folder above it (the workspace's shared or library)."""
    texts = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".toml", ".txt", ".ini")
             and ".git" not in p.parts and "node_modules" not in p.parts and ".venv" not in p.parts]
    outside = ("../" + "shared", "../" + ".library")
    offenders = [_rel(p) for p in texts if any(o in p.read_text(errors="replace") for o in outside)]
    assert offenders == []


def test_the_worked_example_in_the_architecture_guide_runs() -> None:
    """docs/ARCHITECTURE.md's example probe and tests, executed as written, against builtin:tiny-gpt and an LSTM
    given the example's new capability by the guide's own line of `capabilities.of`."""
    import dataclasses
    import re
    from types import SimpleNamespace

    import numpy as np
    import torch

    from explorer.loading.loaders import load_model

    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    probe_code = next(b for b in blocks if "def residual_norms" in b)
    test_code = next(b for b in blocks if "def test_norms_are_the_models_own" in b)
    decides = re.search(r"^ +residual=(.+?),\s+# of\(a\)$", doc, flags=re.M)
    assert decides, "the guide shows the line of capabilities.of that decides the new capability"

    def load_with_residual(model_id: str) -> SimpleNamespace:
        loaded = load_model(model_id)
        a = loaded.adapter
        caps = {f.name: getattr(loaded.caps, f.name) for f in dataclasses.fields(loaded.caps)}
        caps["residual"] = eval(decides.group(1), {"a": a, "transformer": bool(a.streams)})
        return SimpleNamespace(id=loaded.id, model=loaded.model, adapter=a, caps=SimpleNamespace(**caps))

    space: dict = {}
    exec(compile(probe_code, "ARCHITECTURE.md (probe)", "exec"), space)
    space.update(load_model=load_with_residual, torch=torch, np=np, pytest=pytest)
    exec(compile(test_code, "ARCHITECTURE.md (test)", "exec"), space)
    space["test_norms_are_the_models_own"]()
    space["test_a_model_without_the_capability_gets_the_views_message"]()
    trace = space["residual_norms"](load_with_residual("builtin:tiny-gpt"), "the keys to the cabinet")
    assert trace.norms.shape == (2, len(trace.tokens)) and trace.tokens[0] == "<bos>"


def test_transformers_is_imported_in_one_place() -> None:
    """explorer/runtime/hf_runtime.py resolves every transformers name once, under Python's import lock (see its
    docstring)."""
    offenders = [_rel(p) for p in [*EXPLORER, *PAGES, ROOT / "app.py"]
                 if p.name != "hf_runtime.py" and any(m.split(".")[0] == "transformers" for m in _imports(p))]
    assert not offenders, f"import transformers through explorer.runtime.hf_runtime: {offenders}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_time_imports(path: Path, modules: set[str]) -> set[str]:
    """The explorer modules `path` imports while it is being imported: statements of its body (also inside if/try
    and class bodies), not inside functions or `if TYPE_CHECKING:`. `import a.b.c` imports a, a.b and a.b.c."""
    out: set[str] = set()
    package = _package(path)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            for name in _imported(node, package):
                parts = name.split(".")
                out.update(m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in modules)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(_tree(path).body)
    return out - {_module_name(path)}


def test_the_explorer_imports_itself_without_a_cycle() -> None:
    """A class opening the app at once imports the explorer's modules on many threads. Python holds a module's
    import lock while it runs the module's imports, and a module's lock while it imports its parent package; a
    cycle (a package whose __init__ imports its own module, two modules importing each other) lets two threads
    each hold one lock of the cycle and wait for the other: "_DeadlockError: deadlock detected by
    _ModuleLock('explorer.adapters.base')" (tests/test_serve.py met it). Packages import none of their modules;
    a module that needs one back imports it inside the function that uses it."""
    files = {_module_name(p): p for p in EXPLORER}
    modules = set(files)
    graph = {name: _import_time_imports(path, modules) for name, path in files.items()}
    for name in modules:  # importing a.b takes a.b's lock, then imports a if it is not imported yet
        if "." in name and name.rpartition(".")[0] in modules:
            graph[name].add(name.rpartition(".")[0])
    assert graph["explorer.adapters.gpt"] >= {"explorer.adapters", "explorer.adapters.base"}  # the rule can fail
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_no_two_modules_need_each_other_even_through_an_import_inside_a_function() -> None:
    """An import inside a function keeps the import-time graph above acyclic, but two modules that need each other
    are one piece that reads as two (adapters/recurrent.py and adapters/interventions.py, ui/widgets.py and
    ui/training_steps.py did): with every import counted, wherever it is written, the explorer has no circle."""
    files = {_module_name(p): p for p in EXPLORER}
    graph = {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}
    assert graph["explorer.adapters.recurrent"] >= {"explorer.adapters.interventions"}  # the rule can fail
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"modules that need each other: {' -> '.join(exc.args[1])}")


def test_models_are_loaded_one_at_a_time(monkeypatch) -> None:
    """Two sessions loading at once run the loader one after the other (transformers' lazy imports are not
    thread-safe; found by bench/bench_serve.py as "module 'transformers' has no attribute 'AutoModel'")."""
    import threading
    import time

    from explorer.loading import loaders

    active, peak = [0], [0]

    def slow_load(model_id, device, dtype, task, progress=None):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        active[0] -= 1
        return model_id

    monkeypatch.setattr(loaders, "_load_model", slow_load)
    threads = [threading.Thread(target=loaders.load_model, args=(f"builtin:m{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1


GUIDE = ROOT / "docs" / "ARCHITECTURE.md"
EXAMPLE = "residual_norms"  # the worked example's files, which the guide adds and the repository does not hold


def _mapped_paths() -> list[str]:
    """The files and folders on docs/ARCHITECTURE.md's layout map, in its order: an entry is a name ending in `.py` or
    `/` that starts before the description column (24); its indentation (2 spaces a level) nests it under the folder
    above."""
    block = GUIDE.read_text(encoding="utf-8").split("## Layout", 1)[1].split("```", 2)[1]
    paths: list[str] = []
    stack: list[str] = []
    for line in block.splitlines():
        name = line.strip().split(" ")[0] if line.strip() else ""
        indent = len(line) - len(line.lstrip())
        if indent >= 24 or not (name.endswith(".py") or name.endswith("/")):
            continue
        stack = stack[:indent // 2]
        paths.append("".join(stack) + name)
        if name.endswith("/"):
            stack.append(name)
    return paths


def test_the_architecture_map_lists_every_folder_and_only_real_ones() -> None:
    """Issue 58: the map lists the rooms of explorer/ in the order of ROOMS, every package folder of explorer/ and the
    folders of the pages, the harness, the benches and the tests; whatever else it names exists. A module's own role
    is the first line of its docstring (next test), not a line of the map."""
    mapped = _mapped_paths()
    assert [p for p in mapped if not (ROOT / p).exists()] == []  # nothing listed that is not there
    rooms = [p for p in mapped if p.startswith("explorer/") and p.rstrip("/").count("/") == 1]
    assert rooms == [f"explorer/{r}/" if (ROOT / "explorer" / r).is_dir() else f"explorer/{r}.py" for r in ROOMS]
    folders = {_rel(init.parent) + "/" for init in (ROOT / "explorer").rglob("__init__.py")}
    assert folders | {"app_pages/", "testkit/", "bench/", "tests/"} <= set(mapped)
    assert "explorer/adapters/family.py" in mapped and "explorer/runtime/" in mapped  # the parser reads the map


def test_every_module_says_what_it_is_in_its_docstrings_first_line() -> None:
    """What the map no longer says module by module, the module says: a docstring whose first line describes it."""
    modules = [p for folder in ("explorer", "testkit", "app_pages") for p in sorted((ROOT / folder).rglob("*.py"))
               if p.name != "__init__.py"]
    silent = [_rel(p) for p in modules if not (ast.get_docstring(_tree(p)) or "").partition("\n")[0].strip()]
    assert silent == []
    assert len(modules) > 150  # the rule reads the modules


def _prose(text: str) -> str:
    """The guide without its fenced blocks (the layout map, the flow, the worked example's code)."""
    import re

    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _resolves(dotted: str) -> bool:
    """Whether `explorer.a.b.c` names a module, or an attribute (of an attribute) of the longest module it starts
    with."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_file_test_and_name_the_guide_cites_is_real() -> None:
    """Issue 58: each claim of docs/ARCHITECTURE.md is checked or gone. Every path it names exists (a module path may
    start at a folder of explorer/), every `tests/x.py::name` is defined there, every backquoted test name is a test
    of tests/, and every backquoted `explorer.…` name imports; the worked example's own files are left out."""
    import re

    text = GUIDE.read_text(encoding="utf-8")
    paths = {p for p in re.findall(r"(?<![\w./-])((?:[a-z_]+/)+[\w.-]*\.py|docs/[\w.-]+\.md)(?![\w-])", text)
             if EXAMPLE not in p}
    assert [p for p in sorted(paths) if not ((ROOT / p).exists() or (ROOT / "explorer" / p).exists())] == []
    cited = re.findall(r"(tests/\w+\.py)::(\w+)", text)
    assert [f"{f}::{n}" for f, n in cited
            if not re.search(rf"^(?:def |class )?{n}\b", (ROOT / f).read_text(encoding="utf-8"), re.M)] == []
    prose = _prose(text)
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("test_*.py"))
    named = set(re.findall(r"`(test_\w+)`", prose))
    assert [n for n in sorted(named) if f"def {n}(" not in tests] == []
    dotted = {d for d in re.findall(r"`(explorer(?:\.\w+)+)", prose) if EXAMPLE not in d}
    assert [d for d in sorted(dotted) if not _resolves(d)] == []
    assert len(paths) > 25 and len(cited) > 3 and len(named) > 10 and len(dotted) > 25  # the rules read the guide


def test_the_guides_record_and_capability_tables_are_the_codes_own() -> None:
    """Each row of the record table is a line of explorer/adapters/base.py's list of record names (name and shape);
    the capability table's third column is explorer.adapters.capabilities.CAPABILITIES' own line (tests/
    test_capabilities.py checks the other columns)."""
    import re

    from explorer.adapters.capabilities import CAPABILITIES

    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### The activation record", 1)[1].split("\n#", 1)[0]
    rows = [(name.replace("\\|", "|"), shape)
            for name, shape in re.findall(r"^\| `(.+?)` \| `(.+?)` \|", section, re.M)]
    listed = ast.get_docstring(_tree(ROOT / "explorer" / "adapters" / "base.py")) or ""
    assert len(rows) >= 8
    assert [n for n, shape in rows if not re.search(rf"^ +{re.escape(n)} +{re.escape(shape)} ", listed, re.M)] == []
    lines = text.splitlines()
    for c in CAPABILITIES:
        row = next(line for line in lines if line.startswith(f"| `{c.name}` |"))
        assert row.split("|")[3].strip() == c.what, c.name


def test_the_worked_examples_other_blocks_name_real_things() -> None:
    """The worked example's blocks that are not run (the figure, the page, the declaration) import names that exist,
    and its declaration builds a View of a declared sentence purpose whose main chart the page draws."""
    import importlib
    import importlib.util
    import re

    from explorer import views
    from explorer.data.examples import PURPOSES

    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    imported = [(node.module, a.name) for b in blocks for node in ast.walk(ast.parse(b))
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("explorer")
                and EXAMPLE not in node.module for a in node.names]
    assert len(imported) >= 8
    modules = {m: importlib.import_module(m) for m, _ in imported}
    assert [f"{m}.{n}" for m, n in imported if not hasattr(modules[m], n)
            and not (hasattr(modules[m], "__path__") and importlib.util.find_spec(f"{m}.{n}"))] == []
    space: dict = {"VIEWS": [], "View": views.View, "P": views.P, "TEXT": views.TEXT}
    exec(next(b for b in blocks if "VIEWS.append(View(" in b), space)
    (view,) = space["VIEWS"]
    page = next(b for b in blocks if "Controls(" in b)
    presenter = next(b for b in blocks if "def present(" in b)
    assert view.sentences in PURPOSES and f'Controls("{view.url_path}")' in page
    assert f'p.figure("{view.main}"' in presenter and f'{{"{view.main}": {{"fold": True}}}}' in page  # main chart


def test_the_guide_is_a_map_of_at_most_350_lines() -> None:
    assert len(GUIDE.read_text(encoding="utf-8").splitlines()) <= 350


def _imports_anywhere(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function (`from a import b`: a and a.b)."""
    nodes = list(ast.walk(_tree(path)))
    return {n.module or "" for n in nodes if isinstance(n, ast.ImportFrom)} | \
        {f"{n.module}.{a.name}" for n in nodes if isinstance(n, ast.ImportFrom) for a in n.names} | \
        {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}


def test_each_view_is_found_from_its_declaration() -> None:
    """Issue 58: a view's parts are named after its page (View.parts). Each view that shows a model's run has a
    probe (or, for Watch it learn, explorer/training/curves.py), a presenter and figures; its page and the notebook
    both call the presenter, and no other page does."""
    from explorer.views import VIEWS

    nb_imports = _imports_anywhere(ROOT / "explorer" / "nb.py")
    for view in VIEWS:
        if view.needs is None:
            continue
        parts = view.parts
        assert {"page", "presenter", "figures"} <= parts.keys(), (view.url_path, sorted(parts))
        presenter = parts["presenter"].removesuffix(".py").replace("/", ".")
        assert presenter in _imports_anywhere(ROOT / parts["page"]), view.url_path
        assert presenter in nb_imports, view.url_path
        others = [p.name for p in PAGES if p != ROOT / parts["page"] and presenter in _imports_anywhere(p)]
        assert others == [], (view.url_path, others)


def _string_map(node: ast.Dict) -> dict[str, tuple[str, ...]]:
    """The entries of a dict literal from a string to a string or a list/tuple of strings, as key -> its strings."""
    out: dict[str, tuple[str, ...]] = {}
    for key, value in zip(node.keys, node.values):
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        strings = tuple(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and len(strings) == len(items):
            out[key.value] = strings
    return out


def _family_maps(tree: ast.AST) -> list[int]:
    """The lines of the dict literals in `tree` that map architectures to families, or families to views (two entries
    or more, each one of those)."""
    from explorer.loading.catalogue import FAMILIES
    from explorer.models.build import FAMILY_OF_ARCHITECTURE
    from explorer.views import VIEWS

    architectures, families, views = set(FAMILY_OF_ARCHITECTURE), set(FAMILIES), {v.url_path for v in VIEWS}
    lines = []
    for node in ast.walk(tree):
        pairs = _string_map(node) if isinstance(node, ast.Dict) else {}
        to_family = set(pairs) <= architectures and all(set(v) <= families for v in pairs.values())
        to_views = set(pairs) <= families and all(set(v) <= views for v in pairs.values())
        if len(pairs) >= 2 and (to_family or to_views):
            lines.append(node.lineno)
    return lines


def test_family_facts_are_said_once() -> None:
    """Issue 58: an architecture's family (explorer.models.build.FAMILY_OF_ARCHITECTURE), what a family's models may
    have (explorer.adapters.capabilities.MAY_HAVE) and so the views they open (explorer.views.views_for) are said
    once: no other dict literal in explorer/ or the pages maps architectures to families, or families to views."""
    found = [f"{_rel(path)}:{line}" for path in [*EXPLORER, *PAGES] for line in _family_maps(_tree(path))]
    build = ROOT / "explorer" / "models" / "build.py"
    table = next(i for i, line in enumerate(build.read_text(encoding="utf-8").splitlines(), 1)
                 if line.startswith("FAMILY_OF_ARCHITECTURE = {"))
    assert found == [f"explorer/models/build.py:{table}"]
    hidden = 'family = {"rnn_lm": "rnn-lm", "tiny_gpt": "decoder"}\nopens = {"rnn-lm": ["lstm-gates"], "word2vec": []}'
    assert _family_maps(ast.parse(hidden)) == [1, 2]  # the rule can fail (the Models page kept both until issue 58)
