"""Uploads belong to their session (issue 27): listed only in its pickers, evicted only by its own budget, refused
past the server's budget, freed when it ends; Streamlit's own store of uploaded files has the same budgets, per
session and in all, on a real server."""
from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
import torch
from safetensors.torch import save

from explorer.loading import catalogue, uploads
from explorer.loading.catalogue import BUILTIN_DIR
from explorer.models.build import from_checkpoint
from explorer.files.safe_load import read_json_file
from explorer.loading.uploads import UploadBudgetError, UploadOwner, register_upload

WIDTH = 4  # float32 columns of the test tensors: a row is 16 bytes


def weights(tag: int, rows: int = 8) -> list[tuple[str, bytes]]:
    """One distinct upload (its id depends on `tag`) whose tensors take rows × 16 bytes."""
    return [(f"model-{tag}.safetensors", save({"w": torch.full((rows, WIDTH), float(tag))}))]


def listed(owner: UploadOwner | None) -> set[str]:
    return {e.id for e in catalogue.catalogue(owner.ids if owner else ())}


@pytest.fixture
def owners():
    made: list[UploadOwner] = []

    def make() -> UploadOwner:
        made.append(UploadOwner())
        return made[-1]

    yield make
    for owner in made:
        owner.release()


def test_a_sessions_upload_is_listed_in_its_own_catalogue_only(owners) -> None:
    alice, bob = owners(), owners()
    uid = register_upload(weights(1), owner=alice)
    assert alice.ids == (uid,) and bob.ids == ()
    assert uid in listed(alice)
    assert uid not in listed(bob) and uid not in listed(None)
    assert [e.label for e in catalogue.catalogue(alice.ids) if e.id == uid] == ["model-1.safetensors (uploaded)"]


def test_an_upload_once_loaded_is_offered_by_what_it_was_found_to_have(owners) -> None:
    """Before it is loaded, a state dict is offered by its family (it may generate); once loaded, by what was found
    in it: an LSTM with neither an output layer nor a vocabulary is a table of vectors, offered to the word
    embeddings only."""
    from explorer.adapters.capabilities import MAY_HAVE
    from explorer.loading.loaders import load_model

    lstm = torch.nn.LSTM(8, 16, batch_first=True)
    state = {"embedding.weight": torch.randn(20, 8), **{f"rnn.{k}": v for k, v in lstm.state_dict().items()}}
    alice = owners()
    uid = register_upload([("encoder-only.safetensors", save(state))], owner=alice)

    def entry() -> catalogue.CatalogueEntry:
        return next(e for e in catalogue.catalogue(alice.ids) if e.id == uid)

    assert entry().caps is None and entry().may_have(("stepper",)) and entry().family == "state-dict"
    loaded = load_model(uid)
    assert entry().caps == loaded.caps.names < MAY_HAVE["state-dict"]
    assert entry().caps == {"tables"} and entry().may_have(("tables",)) and entry().may_have(None)
    assert not any(entry().may_have((name,)) for name in ("stepper", "lens", "recurrence", "gradient"))


def test_another_sessions_uploads_never_evict_mine(owners, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MAX_UPLOADS", "2")
    alice, bob = owners(), owners()
    mine = register_upload(weights(10), owner=alice)
    theirs = [register_upload(weights(11 + i), owner=bob) for i in range(5)]
    assert alice.ids == (mine,) and mine in uploads.upload_ids()
    assert bob.ids == tuple(theirs[-2:])  # bob's own oldest were given up for his newest
    assert not set(theirs[:3]) & set(uploads.upload_ids())  # and left memory: nobody else held them


def test_a_sessions_byte_budget_gives_up_its_own_oldest_and_refuses_one_too_large(owners, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_SESSION_UPLOAD_MB", "0.5")  # two uploads of 320,000 bytes do not fit
    alice, bob = owners(), owners()
    first = register_upload(weights(20, rows=20_000), owner=alice)
    kept = register_upload(weights(21, rows=20_000), owner=bob)
    second = register_upload(weights(22, rows=20_000), owner=alice)
    assert alice.ids == (second,) and alice.nbytes == 320_000 and first not in uploads.upload_ids()
    assert bob.ids == (kept,)
    with pytest.raises(UploadBudgetError) as exc:
        register_upload(weights(23, rows=40_000), owner=alice)  # 640,000 bytes alone
    assert str(exc.value) == ("'model-23.safetensors' takes 0.6 MB in memory, over the 0.5 MB one session may hold "
                              "(set EXPLORER_SESSION_UPLOAD_MB to change it).")
    assert alice.ids == (second,) and bob.ids == (kept,)  # nothing changed


def test_the_servers_byte_budget_refuses_a_new_upload_and_evicts_nobody(owners, monkeypatch) -> None:
    for uid in uploads.upload_ids():  # other tests' unowned uploads
        uploads.forget_upload(uid)
    monkeypatch.setenv("EXPLORER_UPLOADS_MB", "0.5")
    alice, bob = owners(), owners()
    mine = register_upload(weights(30, rows=20_000), owner=alice)  # 320,000 bytes
    with pytest.raises(UploadBudgetError, match=r"^The server holds 0\.3 MB of uploads \(models and their files\) "
                                                r"for all sessions; "
                                                r"'model-31\.safetensors' \(0\.3 MB\) would pass the 0\.5 MB limit "
                                                r"\(set EXPLORER_UPLOADS_MB to change it\)\."):
        register_upload(weights(31, rows=20_000), owner=bob)
    assert uploads.upload_ids() == [mine] and alice.ids == (mine,) and bob.ids == ()
    assert uploads.held_bytes() == 320_000
    own = register_upload(weights(32, rows=20_000), owner=alice)  # alice may replace her own upload
    assert alice.ids == (own,) and uploads.upload_ids() == [own]


def test_the_same_files_from_two_sessions_are_held_once_until_both_end(owners) -> None:
    alice, bob = owners(), owners()
    uid = register_upload(weights(40), owner=alice)
    assert register_upload(weights(40), owner=bob) == uid
    assert alice.release() == [] and uid in listed(bob)
    assert bob.release() == [uid] and uid not in uploads.upload_ids()


def test_an_ended_session_keeps_nothing_new(owners) -> None:
    alice = owners()
    alice.release()
    with pytest.raises(RuntimeError, match="already released"):
        register_upload(weights(50), owner=alice)
    assert not any(uid for uid in uploads.upload_ids() if uploads.bundle(uid).label == "model-50.safetensors")


def test_a_trained_model_is_an_upload_of_the_session_that_trained_it(owners) -> None:
    from explorer.training.spec import TrainResult
    from explorer.training.jobs import register_trained

    meta = read_json_file(BUILTIN_DIR / "rnn-lm.json")
    from safetensors.torch import load_file

    model = from_checkpoint(meta, load_file(str(BUILTIN_DIR / "rnn-lm.safetensors")), "rnn-lm")
    alice, bob = owners(), owners()
    uid = register_trained(TrainResult(model, dict(meta, name="my-rnn-lm")), owner=alice)
    assert alice.ids == (uid,) and uid in listed(alice) and uid not in listed(bob)
    assert alice.release() == [uid] and uid not in uploads.upload_ids()


# ---------------------------------------------------------------------- pickers and shared links (AppTest)
def _picker_script() -> None:
    import streamlit as st

    from explorer.loading.uploads import register_upload
    from explorer.ui.cache import get_model, upload_owner
    from explorer.ui.widgets import model_picker

    if "files" in st.session_state:
        st.session_state["uid"] = register_upload(st.session_state.pop("files"), owner=upload_owner())
    if "open" in st.session_state:  # a shared link's id, opened in this session
        get_model(st.session_state["open"])
    model_picker(None, default="builtin:lstm-lm")
    st.write("held: " + ",".join(upload_owner().ids))


@pytest.fixture
def separate_sessions(monkeypatch):
    """Each AppTest its own browser session (AppTest names every session "test session id", so that session-scoped
    caches, such as this session's UploadOwner, would otherwise be shared)."""
    from streamlit.runtime import caching
    from streamlit.testing.v1.local_script_runner import LocalScriptRunner

    init, sessions = LocalScriptRunner.__init__, set()

    def own_session(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self._session_id = f"test session {id(self.session_state._state)}"  # one per AppTest, kept across its runs
        sessions.add(self._session_id)

    monkeypatch.setattr(LocalScriptRunner, "__init__", own_session)
    yield
    for session_id in sessions:  # the sessions end: as Streamlit's disconnect does, their uploads are released
        caching.clear_session_resource_cache(session_id)


def _session(**state):
    return app_session(_picker_script, **state)


def app_session(script, timeout: float = 60, **state):
    """An AppTest of `script` run once with `state` put in its session state first (no exception raised)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(script, default_timeout=timeout)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _holders(uid: str) -> int:
    with uploads._UPLOADS_LOCK:
        return len(uploads._CLAIMS.get(uid, set()))


def test_pickers_list_this_sessions_uploads_and_a_shared_link_adds_one(separate_sessions) -> None:
    files = [("lstm-lm.safetensors", (BUILTIN_DIR / "lstm-lm.safetensors").read_bytes()),
             ("lstm-lm.json", (BUILTIN_DIR / "lstm-lm.json").read_bytes())]
    label = "lstm-lm.safetensors (uploaded)"
    alice = _session(files=files)
    uid = alice.session_state["uid"]
    assert label in alice.selectbox(key="model").options and alice.markdown[-1].value == f"held: {uid}"
    bob = _session()
    assert label not in bob.selectbox(key="model").options and bob.markdown[-1].value.strip() == "held:"
    carol = _session(open=uid)  # the id came in a link alice shared: carol's picker lists it, her session holds it
    assert label in carol.selectbox(key="model").options and carol.markdown[-1].value == f"held: {uid}"
    assert _holders(uid) == 2


def test_every_session_that_held_an_upload_has_ended() -> None:
    """(After the test above: its sessions' end released what they held; nothing is left claimed.)"""
    with uploads._UPLOADS_LOCK:
        assert not any(uploads._CLAIMS.values())


# ---------------------------------------------------------------------- Streamlit's store of uploaded files
@pytest.fixture
def store():
    """A store of uploaded files with the budgets on it, counted by the uploads' budgets (as install() does)."""
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

    from explorer.ui.upload_store import put_budgets_on

    yield put_budgets_on(MemoryUploadedFileManager("/_stcore/upload_file"))
    uploads._STORED.clear()


def test_one_budget_counts_the_files_as_sent_the_bodies_in_flight_and_the_tensors_read_from_them(store,
                                                                                                 monkeypatch) -> None:
    """Issue 41, item 3: an upload holds its file (in the store) and the tensors read from it (here) at once; a body
    in flight holds its declared length. One budget counts all three, from either side."""
    from starlette.exceptions import HTTPException
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    for uid in uploads.upload_ids():
        uploads.forget_upload(uid)
    monkeypatch.setenv("EXPLORER_SESSION_UPLOAD_MB", "1")  # 1,048,576 bytes
    alice = UploadOwner(session="alice")
    try:
        files = weights(40, rows=20_000)  # tensors of 320,000 bytes; the file ~320,100
        (name, data), = files
        store.add_file("alice", UploadedFileRec("f1", name, "application/octet-stream", data))
        uid = register_upload(files, owner=alice)
        assert uploads.parsed_bytes("alice") == (320_000, 320_000) and uploads.parsed_bytes("bob") == (0, 320_000)
        mine, every = store.held("alice")
        assert mine == every == len(data) + len(name) + 1024
        # 420,000 more bytes of file: 0.31 + 0.31 + 0.40 MB > 1 MB, refused, and the page is told why
        with pytest.raises(HTTPException) as refused:
            store.add_file("alice", UploadedFileRec("f2", "more.bin", "application/octet-stream", bytes(420_000)))
        assert refused.value.status_code == 413
        assert refused.value.detail.startswith("'more.bin' (0.4 MB) was not kept: this session's uploads would take "
                                               "1.0 MB (models read from uploads: 0.3 MB), over the 1.0 MB")
        assert store.pop_refusal("alice") == refused.value.detail
        # a body in flight holds its declared length until its request ends
        token = store.reserve("alice", "f3", 300_000)
        assert store.held("alice")[0] == mine + 300_000
        with pytest.raises(Exception, match="would take 1.1 MB"):
            store.reserve("alice", "f4", 200_000)
        store.unreserve("alice", "f3", token)
        assert store.held("alice")[0] == mine
        assert alice.ids == (uid,)
        # and from the other side: a model read while the session's files fill its budget is refused
        carol = UploadOwner(session="carol")
        store.add_file("carol", UploadedFileRec("f5", "big.bin", "application/octet-stream", bytes(700_000)))
        with pytest.raises(UploadBudgetError, match=r"'model-41\.safetensors' takes 0\.4 MB in memory besides its "
                                                    r"0\.7 MB of uploaded files, over the 1\.0 MB one session"):
            register_upload(weights(41, rows=25_000), owner=carol)
        assert carol.ids == ()
        carol.release()
    finally:
        alice.release()


def _put(base: str, session_id: str, cookies: dict[str, str], name: str, data: bytes) -> tuple[int, str]:
    """PUT one file to the upload endpoint (multipart, XSRF header from the cookie) with `Expect: 100-continue`, as
    a careful client does: the body is sent only once the server asks for it, so a refusal from the declared length
    is read, not met as a reset mid-body. Returns (status, detail)."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    with _connection(base, session_id, cookies, f"multipart/form-data; boundary={boundary}",
                     [f"Content-Length: {len(body)}", "Expect: 100-continue"]) as (sock, reader):
        status, detail = _answer(reader)
        if status == 100:
            sock.sendall(body)
            status, detail = _answer(reader)
        return status, detail


def _declare_only(base: str, session: Any, length: int | None) -> int:
    """The status the server answers to a PUT to the upload route that declares `length` bytes (None: no
    Content-Length, a chunked body) and sends none of them, within 10 s."""
    with _connection(base, session.session_id, session.cookies, "multipart/form-data; boundary=x",
                     [f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"]) as (_, r):
        return _answer(r)[0]


@contextlib.contextmanager
def _connection(base: str, session_id: str, cookies: dict[str, str], kind: str,
                headers: list[str]) -> Iterator[tuple[socket.socket, Any]]:
    """A connection that has sent the head of a PUT to a new upload URL of `session_id`: (socket, its reader)."""
    url = urlsplit(base)
    head = [f"PUT /_stcore/upload_file/{session_id}/{uuid.uuid4()} HTTP/1.1", f"Host: {url.netloc}",
            f"Content-Type: {kind}", f"Cookie: {'; '.join(f'{k}={v}' for k, v in cookies.items())}",
            f"X-Xsrftoken: {cookies.get('_streamlit_xsrf', '')}", *headers]
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock, sock.makefile("rb") as reader:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        yield sock, reader


def _answer(reader: Any) -> tuple[int, str]:
    """(status, body) of the next response on `reader` (a 100 Continue has no body)."""
    status = int(reader.readline().split()[1])
    length = 0
    while (line := reader.readline().strip()):
        name, _, value = line.decode().partition(":")
        length = int(value) if name.lower() == "content-length" else length
    return status, reader.read(length).decode(errors="replace") if length else ""


def _xsrf_cookie(base: str) -> dict[str, str]:
    """Streamlit's XSRF cookie, which its health endpoint sets (the browser sends it back in X-Xsrftoken)."""
    from http.cookies import SimpleCookie

    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=30) as response:
        cookies = [SimpleCookie(v) for v in response.headers.get_all("Set-Cookie") or []]
    return {name: morsel.value for c in cookies for name, morsel in c.items()}


def _store_bytes(base: str) -> int:
    """Bytes in Streamlit's store of uploaded files, from its own metrics (0 when it holds none)."""
    with urllib.request.urlopen(f"{base}/_stcore/metrics", timeout=30) as response:
        text = response.read().decode()
    found = re.search(r'cache_memory_bytes\{cache_type="UploadedFileManager",cache=""\} (\d+)', text)
    return int(found.group(1)) if found else 0


def _wait_for_bytes(base: str, expected: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while (held := _store_bytes(base)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return held


def test_streamlit_upload_store_budgets_and_closed_tabs_on_a_real_server() -> None:
    from testkit.browser import streamlit_process
    from testkit.st_protocol import Session

    mb = 2**20
    env = {"EXPLORER_SESSION_UPLOAD_MB": "3", "EXPLORER_UPLOADS_MB": "5"}

    async def scenario(base: str) -> None:
        alice, bob, carol = (Session(base, "overview") for _ in range(3))
        for s in (alice, bob, carol):
            s.cookies.update(_xsrf_cookie(base))  # as the browser's health check gets it
            await s.connect()
            await s.rerun()  # the app's first run puts the budgets on the store
        two = bytes(2 * mb)
        assert _put(base, alice.session_id, alice.cookies, "a.bin", two)[0] == 204
        status, detail = _put(base, alice.session_id, alice.cookies, "b.bin", two)
        assert status == 413, (status, detail)
        # refused from its declared length, before its body was read (the file's name is inside the body)
        assert detail == ("A file of 2.0 MB was not kept: this session's uploads would take 4.0 MB, over the "
                          "3.0 MB one session may hold (set EXPLORER_SESSION_UPLOAD_MB to change it). Remove a file "
                          "from an upload box first.")
        assert _declare_only(base, alice, 400 * mb) == 413  # answered with no body sent
        assert _declare_only(base, alice, None) == 411  # a body of undeclared length is not read
        # nothing of the refused file was kept: 2 MB + 0.9 MB still fit in alice's 3 MB
        assert _put(base, alice.session_id, alice.cookies, "c.bin", bytes(9 * mb // 10))[0] == 204
        assert "EXPLORER_SESSION_UPLOAD_MB" in (await alice.rerun()).text().replace("\\", "")  # the page says why
        assert _put(base, bob.session_id, bob.cookies, "d.bin", two)[0] == 204  # 4.9 MB held in all
        status, detail = _put(base, carol.session_id, carol.cookies, "e.bin", two)
        assert status == 413 and "over the server's 5.0 MB (set EXPLORER_UPLOADS_MB to change it)" in detail, detail
        assert detail.startswith("A file of 2.0 MB was not kept: the uploads of all sessions would take 6.9 MB"), detail
        await alice.close()  # the tab closes: its files go (bob's stay), so carol's file fits now
        deadline = time.monotonic() + 10
        while (status := _put(base, carol.session_id, carol.cookies, "e.bin", two)[0]) != 204 and \
                time.monotonic() < deadline:
            time.sleep(0.3)
        assert status == 204
        dave = Session(base, "overview", cookies=_xsrf_cookie(base))
        await dave.connect()
        await dave.rerun()
        status, detail = _put(base, dave.session_id, dave.cookies, "f.bin", two)  # bob's and carol's 4 MB stay
        assert status == 413 and "the uploads of all sessions would take 6.0 MB" in detail, detail
        await dave.close()
        await bob.close()
        await carol.close()
        assert _wait_for_bytes(base, 0, timeout=20) == 0  # Streamlit's own metric (refreshed every 5 s)

    with streamlit_process(env) as (base, _proc):
        asyncio.run(scenario(base))


def test_a_process_that_exits_holding_uploads_exits_cleanly() -> None:
    """A server (or a test run) that exits while sessions still hold uploads exits with 0: nothing is released at
    exit (an owner's release ran on its worker thread while the interpreter shut down: C++ `terminate`, exit 134)."""
    import subprocess
    import sys

    from conftest import ROOT

    script = ("from safetensors.torch import save; import torch\n"
              "from explorer.loading.loaders import load_model\n"
              "from explorer.loading.uploads import UploadOwner, register_upload\n"
              "owners = []\n"
              "for tag in range(3):\n"
              "    uid = register_upload([(f'm{tag}.safetensors', save({'w': torch.full((64, 4), float(tag))}))])\n"
              "    owners.append(UploadOwner()); owners[-1].claim(uid)\n"
              "load_model('builtin:lstm-lm')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "terminate called" not in done.stderr
