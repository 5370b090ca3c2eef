"""Memory bounds: the model cache's count/byte limits free memory; uploads are released when their session ends;
every Streamlit cache is bounded."""
from __future__ import annotations

import ast
import os
import gc
import time
import weakref
from pathlib import Path

import pytest
import torch

from explorer.loading import catalogue, pretrained, uploads
from explorer.runtime import heap
from explorer.loading.model_cache import DEFAULT_MAX_MODEL_MB, DEFAULT_MAX_MODELS, ModelCache
from explorer.loading.catalogue import BUILTIN_DIR
from explorer.loading.loaders import LoadedModel, load_model
from explorer.files.safe_load import ModelLoadError
from explorer.loading.uploads import UploadOwner, register_upload

ROOT = Path(__file__).resolve().parent.parent


def _rss_bytes() -> int:
    """This process's resident memory (VmRSS), bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _collected(ref: weakref.ref) -> bool:
    """Whether ref's object is gone after the app's full collection (which reaches frozen objects:
    explorer.runtime.heap)."""
    heap.collect()
    return ref() is None


# --------------------------------------------------------------------------------- model cache limits
def test_count_limit_unloads_least_recently_used_builtin_and_frees_it(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_MODELS", "2")
    cache = ModelCache()
    assert cache.max_models == 2
    rnn = cache.get("builtin:rnn-lm")
    gru = cache.get("builtin:gru-lm")
    gru_model, gru_weight = weakref.ref(gru.model), weakref.ref(gru.model.embedding.weight)
    rnn_model = weakref.ref(rnn.model)
    del gru, rnn
    assert cache.get("builtin:rnn-lm").model is rnn_model()  # rnn-lm becomes the most recently used
    cache.get("builtin:lstm-lm")  # a third model: gru-lm, the least recently used, is unloaded
    assert [m.id for m in cache.loaded()] == ["builtin:rnn-lm", "builtin:lstm-lm"]
    assert cache.loads == 3
    assert _collected(gru_model) and _collected(gru_weight), "the evicted model is still referenced somewhere"
    assert rnn_model() is not None


def test_byte_limit_unloads_until_the_total_fits_and_frees_it(monkeypatch) -> None:
    names = ["builtin:lstm-lm", "builtin:gru-lm", "builtin:rnn-lm"]
    sizes = {n: load_model(n).memory_bytes for n in names}  # 2.6, 2.3, 1.5 MB (float32 parameters)
    limit = sizes[names[0]] + sizes[names[1]] + 1  # the first two fit, the third pushes the first out
    monkeypatch.setenv("EXPLORER_MAX_MODEL_MB", str(limit / 2**20))
    cache = ModelCache(max_models=10)
    assert abs(cache.max_bytes - limit) <= 1
    first = weakref.ref(cache.get(names[0]).model)
    cache.get(names[1])
    assert cache.total_bytes == sizes[names[0]] + sizes[names[1]] <= cache.max_bytes
    cache.get(names[2])
    assert [m.id for m in cache.loaded()] == names[1:]
    assert cache.total_bytes == sizes[names[1]] + sizes[names[2]] <= cache.max_bytes
    assert _collected(first)


def test_evicted_models_give_their_memory_back_to_the_process() -> None:
    """Four 128 MiB models through a cache of one: resident memory grows by about one model, not four."""
    size = 128 * 2**20

    def loader(mid: str, device: str, dtype: str) -> LoadedModel:
        weights = torch.ones(size // 4, dtype=torch.float32)  # every page touched
        return LoadedModel(mid, "state-dict", None, device, dtype, state_dict={"w": weights})

    cache = ModelCache(max_models=1, loader=loader)
    heap.collect()
    base = _rss_bytes()
    peaks, weights = [], []
    for i in range(4):
        weights.append(weakref.ref(cache.get(f"upload:{i:016x}").state_dict["w"]))
        heap.collect()
        peaks.append(_rss_bytes() - base)
    assert cache.total_bytes == size
    # held: one model (128 MiB); without eviction the last figure would be 512 MiB
    assert max(peaks) < 2 * size + 32 * 2**20, [p / 2**20 for p in peaks]
    cache.clear()
    heap.collect()
    held = [i for i, w in enumerate(weights) if w() is not None]
    assert not held, [gc.get_referrers(weights[i]()) for i in held]  # every model's tensors were freed
    rss = _rss_bytes() - base
    assert rss < size // 2 or rss < peaks[-1] - size // 2, (rss / 2**20, [p / 2**20 for p in peaks])


def _sized_loader(sizes: dict[str, int], calls: list[str]):
    """A loader whose model `mid` holds sizes[mid] bytes of float32 weights; each call is appended to `calls`."""
    def loader(mid: str, device: str, dtype: str, task: str | None = None) -> LoadedModel:
        calls.append(mid)
        weights = torch.zeros(sizes[mid] // 4, dtype=torch.float32)
        return LoadedModel(mid, "state-dict", None, device, dtype, state_dict={"w": weights})
    return loader


def test_the_default_budget_holds_smollm2_minilm_and_every_builtin_together(monkeypatch) -> None:
    """Issue 35: with the default settings the built-ins (1-3 MB each; 8-20 MB for the real-English ones: a 12,000-word
    vocabulary) never push SmolLM2 or MiniLM out (GloVe, when installed, fits as well: every offline model at once,
    about 800 MiB in float32)."""
    monkeypatch.delenv("EXPLORER_MAX_MODELS", raising=False)
    monkeypatch.delenv("EXPLORER_MAX_MODEL_MB", raising=False)
    if not pretrained.is_installed("minilm"):
        pytest.skip("MiniLM's package is not installed")
    builtins = [f"builtin:{name}" for name in catalogue.builtin_names()]
    assert len(builtins) >= 10, builtins
    packaged = [f"pretrained:{name}" for name in ("smollm2", "minilm", "glove") if pretrained.is_installed(name)]
    ids = packaged + builtins  # SmolLM2 first: loading every other model after it must not push it out
    cache = ModelCache()
    assert cache.max_bytes == DEFAULT_MAX_MODEL_MB * 2**20 == 2048 * 2**20
    assert cache.max_models == DEFAULT_MAX_MODELS == 64 > len(ids)
    first = {mid: cache.get(mid) for mid in ids}
    for mid in reversed(ids):  # every one again: all of them still cached, the same objects
        assert cache.get(mid) is first[mid]
    assert cache.loads == len(ids)
    assert sorted(m.id for m in cache.loaded()) == sorted(ids)
    assert cache.total_bytes == sum(m.memory_bytes for m in first.values()) < cache.max_bytes
    if "pretrained:smollm2" in ids:
        assert first["pretrained:smollm2"].memory_bytes > 400 * 2**20  # 135M float32 parameters
    assert first["pretrained:minilm"].memory_bytes > 50 * 2**20
    assert all(first[b].memory_bytes < (24 if b.endswith("-wordnet") else 4) * 2**20 for b in builtins)
    cache.clear()


def test_a_budget_below_the_sum_evicts_the_least_recently_used_by_bytes() -> None:
    sizes = {"big": 6000, "a": 1000, "b": 1000, "c": 2000, "d": 3000}
    calls: list[str] = []
    cache = ModelCache(max_bytes=10_000, loader=_sized_loader(sizes, calls))
    assert cache.max_models == DEFAULT_MAX_MODELS
    for mid in ("big", "a", "b", "c"):  # 10,000 bytes: exactly the budget, nothing evicted
        cache.get(mid)
    assert [m.id for m in cache.loaded()] == ["big", "a", "b", "c"] and cache.total_bytes == 10_000
    cache.get("big")  # used again: a is now the least recently used
    cache.get("d")  # 13,000 bytes: a (1,000) and b (1,000) are not enough alone, c (2,000) goes too
    assert [m.id for m in cache.loaded()] == ["big", "d"] and cache.total_bytes == 9000
    cache.get("a")  # 10,000: fits
    cache.get("b")  # 11,000: big, the least recently used, goes, though the newcomer is small
    assert [m.id for m in cache.loaded()] == ["d", "a", "b"] and cache.total_bytes == 5000
    assert calls == ["big", "a", "b", "c", "d", "a", "b"] and cache.loads == 7


def test_a_model_larger_than_the_budget_still_loads_and_is_then_the_only_one_held() -> None:
    sizes = {"a": 4000, "b": 4000, "huge": 40_000}
    calls: list[str] = []
    cache = ModelCache(max_bytes=10_000, loader=_sized_loader(sizes, calls))
    cache.get("a")
    cache.get("b")
    huge = cache.get("huge")
    assert [m.id for m in cache.loaded()] == ["huge"] and cache.total_bytes == 40_000
    assert cache.get("huge") is huge and cache.loads == 3  # kept, and not loaded again
    cache.get("a")  # the next model pushes it out: the budget holds again
    assert [m.id for m in cache.loaded()] == ["a"] and cache.total_bytes == 4000
    assert calls == ["a", "b", "huge", "a"]


def test_the_count_cap_is_still_honoured_when_set(monkeypatch) -> None:
    sizes = dict.fromkeys("abcde", 1000)
    calls: list[str] = []
    monkeypatch.setenv("EXPLORER_MAX_MODELS", "3")
    monkeypatch.delenv("EXPLORER_MAX_MODEL_MB", raising=False)
    cache = ModelCache(loader=_sized_loader(sizes, calls))
    assert cache.max_models == 3 and cache.max_bytes == DEFAULT_MAX_MODEL_MB * 2**20
    for mid in "abca":
        cache.get(mid)
    cache.get("d")  # 4,000 bytes, far under the budget: the count evicts b, the least recently used
    assert [m.id for m in cache.loaded()] == ["c", "a", "d"]
    cache.get("e")
    assert [m.id for m in cache.loaded()] == ["a", "d", "e"] and cache.loads == 5
    assert ModelCache(max_models=2, loader=_sized_loader(sizes, calls)).max_models == 2  # the argument wins


def test_unset_empty_or_non_positive_settings_mean_the_defaults(monkeypatch) -> None:
    for value in ("", "0", "-5"):
        monkeypatch.setenv("EXPLORER_MAX_MODELS", value)
        monkeypatch.setenv("EXPLORER_MAX_MODEL_MB", value)
        cache = ModelCache()
        assert (cache.max_models, cache.max_bytes) == (64, 2048 * 2**20), value
    monkeypatch.setenv("EXPLORER_MAX_MODEL_MB", "512.5")
    assert ModelCache().max_bytes == int(512.5 * 2**20)


# --------------------------------------------------------------------------------- uploads and sessions
def _builtin_upload(name: str = "lstm-lm") -> str:
    files = [(f"{name}.safetensors", (BUILTIN_DIR / f"{name}.safetensors").read_bytes()),
             (f"{name}.json", (BUILTIN_DIR / f"{name}.json").read_bytes())]
    return register_upload(files)


def test_upload_is_released_when_the_last_session_owning_it_ends() -> None:
    uid = _builtin_upload()
    cache = ModelCache(max_models=4)
    model = weakref.ref(cache.get(uid).model)
    alice, bob = UploadOwner(), UploadOwner()
    alice.claim(uid)
    bob.claim(uid)  # the same files uploaded in another session: the same id
    assert alice.release() == [] and alice.released
    assert uid in uploads.upload_ids() and model() is not None  # bob's session still holds it
    assert bob.release() == [uid]
    assert bob.release() == []  # idempotent
    assert uid not in uploads.upload_ids()
    assert uid not in {e.id for e in catalogue.catalogue()}
    assert [m.id for m in cache.loaded()] == []  # the model cache dropped the model loaded from it
    assert _collected(model)
    with pytest.raises(ModelLoadError, match="no longer on the server"):
        load_model(uid)
    with pytest.raises(RuntimeError):
        alice.claim(uid)


def test_an_owner_garbage_collected_without_release_still_releases() -> None:
    uid = _builtin_upload("gru-lm")
    cache = ModelCache(max_models=4)
    model = weakref.ref(cache.get(uid).model)
    owner = UploadOwner()
    owner.claim(uid)
    del owner
    heap.collect()
    assert uploads.wait_for_releases(timeout=10)
    assert uid not in uploads.upload_ids() and cache.loaded() == []
    assert _collected(model)


def test_streamlit_session_end_releases_the_sessions_uploads() -> None:
    """The Models page claims an upload in the session's owner (a session-scoped st.cache_resource); ending the
    session clears that cache exactly as Streamlit's disconnect does (AppSession.clear_session_caches)."""
    from streamlit.runtime import caching
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        import streamlit as st
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        from explorer.ui.cache import upload_owner

        upload_owner().claim(st.session_state["uid"])
        st.session_state["sid"] = get_script_run_ctx().session_id
        st.write(sorted(upload_owner().ids))

    uid = _builtin_upload("rnn-lm")
    at = AppTest.from_function(script)
    at.session_state["uid"] = uid
    at.run()
    assert not at.exception
    at.run()  # a rerun keeps the same owner
    assert not at.exception and uid in uploads.upload_ids()
    caching.clear_session_resource_cache(at.session_state["sid"])
    assert uid not in uploads.upload_ids()
    with pytest.raises(ModelLoadError, match="no longer on the server"):
        load_model(uid)


# --------------------------------------------------------------------------------- bounded st caches
def _cache_uses() -> list[tuple[str, str, str, set[str]]]:
    """(file:line, "st.cache_data"|"st.cache_resource", decorated function or "", keyword names) for every
    decorator or call of a Streamlit cache in the app's code (app.py, app_pages/, explorer/)."""
    found = []
    files = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")), *sorted((ROOT / "explorer").rglob("*.py"))]
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in ("cache_data", "cache_resource")
                    and isinstance(node.value, ast.Name) and node.value.id == "st"):
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute):  # st.cache_data.clear() and the like
                continue
            call = parent if isinstance(parent, ast.Call) and parent.func is node else None
            keywords = {k.arg for k in call.keywords} if call is not None else set()
            holder = parents.get(call if call is not None else node)
            name = holder.name if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", f"st.{node.attr}", name, keywords))
    return found


def test_every_streamlit_cache_has_max_entries() -> None:
    uses = _cache_uses()
    assert len(uses) >= 8, uses  # models, probe results, figures, projections, embedding tables, positions...
    unbounded = [f"{where}: {kind} {name}" for where, kind, name, kw in uses if "max_entries" not in kw]
    assert not unbounded, f"caches without max_entries: {unbounded}"


def test_per_text_result_caches_are_bounded_in_bytes_and_expire(monkeypatch) -> None:
    """Results keyed by what users type (probe results) are kept by their bytes, for the process and per session,
    for an hour at most (explorer.runtime.result_cache); no st.cache_data holds them by count."""
    from explorer.ui import cache

    assert not [u for u in _cache_uses() if u[2] == "_cached_call"]
    monkeypatch.setenv("EXPLORER_RESULTS_MB", "300")
    monkeypatch.setenv("EXPLORER_SESSION_RESULTS_MB", "40")
    cache.results.clear()
    try:
        made = cache.results()
        assert (made.max_bytes, made.session_bytes, made.ttl_s) == (300 * 2**20, 40 * 2**20, 3600)
    finally:
        cache.results.clear()


@pytest.mark.slow
def test_real_server_forgets_an_upload_when_the_uploading_browser_closes() -> None:
    """Chromium uploads a checkpoint on the Models page; another browser can open it while the uploader's tab is
    open; once that tab closes (Streamlit ends its session), the server no longer has it."""
    from playwright.sync_api import sync_playwright

    from testkit.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server, wait_for_app

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    files = [str(BUILTIN_DIR / "rnn-lm.safetensors"), str(BUILTIN_DIR / "rnn-lm.json")]
    with streamlit_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)

        def open_models_page(context, model: str | None = None):
            page = context.new_page()
            page.goto(f"{base}/catalogue" + (f"?model={model}" if model else ""))
            wait_for_app(page, settle_ms=1000)
            return page

        try:
            uploader = browser.new_context(viewport={"width": 1400, "height": 1000})
            first = uploader.new_page()
            first.goto(base + "/")  # the first session of a server opens the root URL (see docs/serving.md)
            wait_for_app(first, settle_ms=500)
            page = open_models_page(uploader)
            page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(files)
            page.get_by_role("button", name="Add to the catalogue").click()
            page.wait_for_function("() => (new URLSearchParams(location.search).get('model') || '')"
                                   ".startsWith('upload:')", timeout=90_000)
            uid = page.evaluate("() => new URLSearchParams(location.search).get('model')")
            assert uid and uid.startswith("upload:")
            wait_for_app(page, settle_ms=1000)
            assert page.locator('[data-testid="stException"]').count() == 0

            other = browser.new_context()
            seen = open_models_page(other, uid)  # another student opens the shared link while it exists
            body = seen.locator('[data-testid="stMain"]').inner_text()
            assert "no longer on the server" not in body and "Parameters" in body, body[:1500]
            other.close()

            uploader.close()  # the uploading tab goes away: Streamlit ends its session
            later = browser.new_context()
            deadline = 60.0
            while True:
                page = open_models_page(later, uid)
                body = page.locator('[data-testid="stMain"]').inner_text()
                if "no longer on the server" in body:
                    break
                page.close()
                deadline -= 2
                assert deadline > 0, f"{uid} is still served after its session ended: {body[:800]}"
                time.sleep(2)
            later.close()
        finally:
            browser.close()


def test_the_models_page_says_what_the_cache_holds_against_its_limits(monkeypatch):
    monkeypatch.delenv("EXPLORER_MAX_MODEL_MB", raising=False)
    monkeypatch.delenv("EXPLORER_MAX_MODELS", raising=False)
    cache = ModelCache()
    cache.get("builtin:tiny-gpt")
    mb = cache.total_bytes / 2**20
    assert cache.held() == (f"{mb:,.0f} MB of weights held of a budget of {DEFAULT_MAX_MODEL_MB:,} MB "
                            f"(EXPLORER_MAX_MODEL_MB) and at most {DEFAULT_MAX_MODELS} models")


def test_the_servers_cache_never_evicts_the_classs_default_models_to_make_room() -> None:
    """Issues 41 and 57: only the class's default models, with the head their view loads, are pinned; another
    head on the same checkpoint, other built-in or packaged models, uploads, folders' models and training snapshots
    go, least recently used first. The server's cache pins the views' declared defaults (explorer.ui.cache)."""
    from explorer.loading.model_cache import pinned
    from explorer.views import default_models

    sizes = {"builtin:lstm-lm": 4000, "pretrained:smollm2": 4000, "upload:00000000000000aa": 1000,
             "builtin:lstm-lm@127": 1000, "local:mine": 1000, "upload:00000000000000bb": 3000}
    calls: list[str] = []
    cache = ModelCache(max_bytes=10_000, loader=_sized_loader(sizes, calls),
                       pin=[("builtin:lstm-lm", None), ("pretrained:smollm2", None)])
    for mid in sizes:  # 14,000 bytes: the oldest that are not the class's go, the newest stays
        cache.get(mid)
    assert [m.id for m in cache.loaded()] == ["builtin:lstm-lm", "pretrained:smollm2", "upload:00000000000000bb"]
    assert cache.total_bytes == 11_000  # over the budget only by what is pinned and the model just loaded
    cache.get("upload:00000000000000aa")  # the class's still stay; the oldest of the rest goes
    assert [m.id for m in cache.loaded()] == ["builtin:lstm-lm", "pretrained:smollm2", "upload:00000000000000aa"]
    assert cache.total_bytes == 9000
    cache.get("pretrained:smollm2", task="masked-lm")  # another head of the same checkpoint: a separate entry...
    cache.get("local:mine")  # ... that the budget unloads like any other
    assert not cache.has("pretrained:smollm2", task="masked-lm") and cache.has("pretrained:smollm2")
    assert sorted(m.id for m in cache.loaded()) == ["builtin:lstm-lm", "local:mine", "pretrained:smollm2"]
    ids = frozenset({("builtin:lstm-lm", None), ("pretrained:minilm-mlm", "masked-lm")})
    assert pinned(("builtin:lstm-lm", "cpu", "float32"), ids) and not pinned(("builtin:lstm-lm@127", "cpu",
                                                                             "float32"), ids)
    assert pinned(("pretrained:minilm-mlm", "cpu", "float32", "masked-lm"), ids)
    assert not pinned(("pretrained:minilm-mlm", "cpu", "float32"), ids)
    assert not pinned(("pretrained:smollm2", "cpu", "float32", "masked-lm"), ids)
    defaults = default_models()
    assert ("pretrained:minilm-mlm", "masked-lm") in defaults and ("builtin:lstm-lm-wordnet", None) in defaults
    assert not any(m.startswith(("upload:", "local:", "hf:")) or "@" in m for m, _ in defaults)
    unpinned = ModelCache(max_bytes=10_000, loader=_sized_loader(sizes, []))  # the default: plain least recently used
    for mid in sizes:
        unpinned.get(mid)
    assert "builtin:lstm-lm" not in [m.id for m in unpinned.loaded()]
    assert cache.unload("builtin:lstm-lm") == 1  # dropping by id still works


TRIM_PROBE = """
from explorer.runtime import heap
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) >> 10
start = rss()
blocks = [bytearray(b"x" * 65536) for _ in range(3200)]  # 200 MiB in 64 KiB blocks: inside malloc's heap
last = blocks.pop()  # the heap's top stays in use: free() alone cannot shrink it
del blocks
freed = rss()
trimmed = heap.trim()
print(start, freed, rss(), trimmed)
"""


def test_freed_memory_goes_back_to_the_operating_system_after_a_trim() -> None:
    """Issue 41, item 3: glibc keeps the free pages inside its heaps (a replica's RSS only grew); heap.trim()
    (malloc_trim, run after an eviction, an upload's release and a closed tab's files) returns them."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MALLOC_ARENA_MAX": "2"}, cwd=Path(__file__).parent.parent)
    start, freed, after, trimmed = out.stdout.split()
    if trimmed != "True":
        pytest.skip("this C library has no malloc_trim")
    assert int(freed) - int(start) > 150, out.stdout  # freed by Python, still resident
    assert int(after) - int(start) < 30, out.stdout  # returned
