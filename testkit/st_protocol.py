"""A Streamlit session without a browser: the websocket protocol the browser speaks, for load generation.

The browser opens `ws://host/_stcore/stream` (subprotocol "streamlit") and sends protobuf `BackMsg`s; the server
answers with `ForwardMsg`s (`streamlit.proto`). A rerun is `BackMsg.rerun_script` carrying a `ClientState`: the
page (`page_name`, the view's url path), the URL query string and the widget states; the server streams the
page's deltas and ends with `script_finished`. A widget inside an `st.fragment` is rerun with the fragment's id,
as the browser does.

    async with Session("http://127.0.0.1:8501", "lstm-gates", "text=the+dog") as s:
        run = await s.rerun()                       # the first run (what opening the page does)
        run = await s.set_text("text", "the cat")   # a new sentence: a rerun with the new widget state
        run.seconds, run.strings, run.status

Only the standard library, `websockets` (a dependency of Streamlit) and Streamlit's own protobuf classes.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urlsplit

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}


@dataclass
class Run:
    """One script run as the client saw it: seconds from request to `script_finished`, and what was drawn."""

    seconds: float
    status: str  # "ok", "compile-error", or "exception: <message>" (an st.exception element was drawn)
    strings: list[str]  # every text the run drew: markdown, captions, alerts, HTML, and Plotly specs' strings
    elements: int  # number of elements drawn
    query_string: str  # the URL query string after the run (the page writes its state there)
    keys: set[str] = field(default_factory=set)  # user keys of the widgets this run drew (Session.widget_ids: all seen)

    def text(self) -> str:
        return "\n".join(self.strings)


@dataclass
class Session:
    """One simulated browser session on one page of a running app (use as an async context manager)."""

    base: str  # http://host:port
    page: str  # url path of the view, e.g. "lstm-gates"
    query: str = ""  # initial query string, without "?"
    cookies: dict[str, str] = field(default_factory=dict)  # e.g. a load balancer's affinity cookie
    session_id: str = ""  # set by the server's new_session
    upstream: str = ""  # X-Upstream header of the websocket handshake, when a proxy sets it
    widget_ids: dict[str, str] = field(default_factory=dict)  # user key -> widget id (from the deltas)
    widget_labels: dict[str, str] = field(default_factory=dict)  # label -> widget id (widgets without a key)
    fragments: dict[str, str] = field(default_factory=dict)  # widget id -> id of the fragment it lives in
    states: dict[str, WidgetState] = field(default_factory=dict)
    _ws: Any = None

    async def __aenter__(self) -> Session:
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self, resume: str = "") -> None:
        """Load the page and open the websocket, as a browser does (resume: an existing session id, sent when the
        browser reconnects). Cookies set by the page (Streamlit's XSRF token, a balancer's route) are kept."""
        if not self.cookies:
            await asyncio.to_thread(self._load_page)
        url = urlsplit(self.base)
        headers = {}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        # the browser's subprotocol list: "streamlit", its XSRF token, and the session id it resumes
        protocols = ["streamlit"] if not resume else ["streamlit", self.cookies.get("_streamlit_xsrf", "-"), resume]
        self._ws = await websockets.connect(f"ws://{url.netloc}/_stcore/stream", subprotocols=protocols,
                                            additional_headers=headers, max_size=None, open_timeout=60,
                                            ping_interval=None)
        response = self._ws.response
        self.upstream = response.headers.get("X-Upstream", "") if response is not None else ""
        self._keep_cookies(response.headers.get_all("Set-Cookie") if response is not None else [])

    def _load_page(self) -> None:
        # the page, then the health check the browser polls: Streamlit sets its XSRF cookie (needed to upload) there
        for url in (f"{self.base}/{self.page}", f"{self.base}/_stcore/health"):
            with urllib.request.urlopen(url, timeout=60) as response:
                self._keep_cookies(response.headers.get_all("Set-Cookie") or [])

    def _keep_cookies(self, headers: list[str]) -> None:
        for value in headers:
            for name, morsel in SimpleCookie(value).items():
                self.cookies[name] = morsel.value

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def rerun(self, fragment_id: str = "", timeout: float = 120) -> Run:
        """Ask for a run with the current query string and widget states; wait for it to finish."""
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query
        cs.page_name = self.page
        cs.fragment_id = fragment_id
        cs.widget_states.widgets.extend(self.states.values())
        start = time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        return await asyncio.wait_for(self._collect(start), timeout)

    async def set_text(self, key: str, value: str, timeout: float = 120) -> Run:
        """Type `value` into the text input with user key `key` and rerun: an st.text_input sends a string, the
        live sentence box (explorer.ui.sentence_box, a v2 component with key `_box_<key>`) its state as JSON."""
        if key in self.widget_ids:
            wid = self.widget_ids[key]
            self.states[wid] = WidgetState(id=wid, string_value=value)
        else:
            wid = self.widget_ids[f"_box_{key}"]
            self.states[wid] = WidgetState(id=wid, json_value=json.dumps({"value": value}))
        return await self.rerun(self.fragments.get(wid, ""), timeout)

    async def drain(self, quiet: float = 0.5) -> int:
        """Read and drop what the server sent unasked (a fragment that reruns itself every second) until it has
        been quiet for `quiet` seconds; returns how many messages were dropped."""
        dropped = 0
        while True:
            try:
                await asyncio.wait_for(self._ws.recv(), quiet)
            except asyncio.TimeoutError:
                return dropped
            dropped += 1

    async def click(self, button: str, timeout: float = 120) -> Run:
        """Press the button with user key or label `button` and rerun (its trigger is sent once, as a browser does)."""
        wid = self.widget_ids.get(button) or self.widget_labels[button]
        self.states[wid] = WidgetState(id=wid, trigger_value=True)
        try:
            return await self.rerun(self.fragments.get(wid, ""), timeout)
        finally:
            self.states.pop(wid, None)

    def set_state(self, button: str, **value: Any) -> None:
        """Set the state of the widget with user key or label `button` for the next rerun, e.g.
        set_state("train_corpus", string_value="My text")."""
        wid = self.widget_ids.get(button) or self.widget_labels[button]
        self.states[wid] = WidgetState(id=wid, **value)

    async def upload_urls(self, names: list[str], timeout: float = 30) -> list[tuple[str, str]]:
        """Ask the server for upload URLs, as the browser's file uploader does: [(file id, upload url)]."""
        msg = BackMsg()
        msg.file_urls_request.request_id = f"r{time.monotonic_ns()}"
        msg.file_urls_request.file_names.extend(names)
        msg.file_urls_request.session_id = self.session_id
        await self._ws.send(msg.SerializeToString())

        async def answer() -> list[tuple[str, str]]:
            while True:
                fm = ForwardMsg()
                fm.ParseFromString(await self._ws.recv())
                if fm.WhichOneof("type") == "file_urls_response":
                    return [(f.file_id, f.upload_url) for f in fm.file_urls_response.file_urls]

        return await asyncio.wait_for(answer(), timeout)

    def put_file(self, url: str, name: str, data: bytes, timeout: float = 120) -> int:
        """PUT one file to an upload URL (multipart, the XSRF token from the cookie as the browser sends it);
        returns the HTTP status (an error status is returned, not raised)."""
        boundary = f"----explorer{time.monotonic_ns()}"
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n").encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        view = memoryview(data)
        # sent in 1 MiB pieces: joining a 400 MB body in one piece held this process's interpreter lock ~0.5 s,
        # which the other sessions timed here would have counted as the server's stall
        body = itertools.chain([head], (view[i:i + 2**20] for i in range(0, len(view), 2**20)), [tail])
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}",
                   "Content-Length": str(len(head) + len(data) + len(tail))}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if "_streamlit_xsrf" in self.cookies:
            headers["X-Xsrftoken"] = self.cookies["_streamlit_xsrf"]
        target = url if url.startswith("http") else self.base + url
        request = urllib.request.Request(target, data=body, method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    async def upload(self, key: str, files: list[tuple[str, bytes]], timeout: float = 120) -> tuple[list[int], Run]:
        """Upload `files` ((name, bytes)) into the file uploader with user key `key` and rerun, as the browser
        does: upload URLs, one PUT per file, then the widget state naming the files. Returns (PUT statuses, run)."""
        urls = await self.upload_urls([n for n, _ in files])
        statuses = [await asyncio.to_thread(self.put_file, url, name, data) for (fid, url), (name, data) in
                    zip(urls, files)]
        wid = self.widget_ids[key]
        state = WidgetState(id=wid)
        for (fid, url), (name, data), status in zip(urls, files, statuses):
            if 200 <= status < 300:
                info = state.file_uploader_state_value.uploaded_file_info.add()
                info.file_id, info.name, info.size = fid, name, len(data)
                info.file_urls.file_id, info.file_urls.upload_url, info.file_urls.delete_url = fid, url, url
        self.states[wid] = state
        return statuses, await self.rerun(self.fragments.get(wid, ""), timeout)

    async def _collect(self, start: float) -> Run:
        strings: list[str] = []
        keys: set[str] = set()
        elements = 0
        status = "ok"
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await self._ws.recv())
            kind = fm.WhichOneof("type")
            if kind == "new_session":
                self.session_id = fm.new_session.initialize.session_id or self.session_id
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                elements += 1
                problem = self._read_element(fm.delta.new_element, fm.delta.fragment_id, strings, keys)
                if problem and status == "ok":
                    status = problem
            elif kind == "script_finished":
                if fm.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    status = "compile-error"
                if fm.script_finished in FINISHED or fm.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    return Run(time.perf_counter() - start, status, strings, elements, self.query, keys)

    def _read_element(self, el: Any, fragment_id: str, strings: list[str], keys: set[str]) -> str:
        """Collect the element's text and its widget's user key; remember widget ids by user key. Returns a problem
        ("exception: …") or ""."""
        kind = el.WhichOneof("type")
        body = getattr(el, kind)
        if kind == "exception":
            where = " | ".join(line.strip() for line in list(body.stack_trace)[-6:])  # the innermost frames
            return f"exception: {body.type}: {body.message[:200]}" + (f" at {where[-900:]}" if where else "")
        if kind == "plotly_chart":
            try:
                strings.extend(_strings(json.loads(body.spec)))
            except ValueError:
                pass
        elif kind in ("markdown", "text"):
            strings.append(body.body)
        elif kind == "code":
            strings.append(body.code_text)
        elif kind == "alert":
            strings.append(body.body)
        elif kind == "html":
            strings.append(body.body)
        elif kind == "progress":
            strings.append(body.text)
        elif kind in ("selectbox", "multiselect", "radio"):  # a picker's options are on screen too
            strings.extend(body.options)
        wid = getattr(body, "id", "")
        if isinstance(wid, str) and wid.startswith("$$ID") and isinstance(getattr(body, "label", None), str):
            self.widget_labels[body.label] = wid
            if fragment_id:
                self.fragments[wid] = fragment_id
        if isinstance(wid, str) and wid.startswith("$$ID") and "-" in wid:
            key = wid.rsplit("-", 1)[-1]
            if key and key != "None":
                self.widget_ids[key] = wid
                keys.add(key)
                if fragment_id:
                    self.fragments[wid] = fragment_id
        return ""


def _strings(spec: Any) -> list[str]:
    """Every string in a Plotly spec; arrays of strings joined with spaces (token axes read as text)."""
    out: list[str] = []
    if isinstance(spec, dict):
        for v in spec.values():
            out += _strings(v)
    elif isinstance(spec, list):
        if spec and all(isinstance(v, str) for v in spec):
            out.append(" ".join(spec))
        else:
            for v in spec:
                out += _strings(v)
    elif isinstance(spec, str):
        out.append(spec)
    return out


def query(**params: str) -> str:
    return urlencode(params)
