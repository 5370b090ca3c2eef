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
import json
import time
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
        with urllib.request.urlopen(f"{self.base}/{self.page}", timeout=60) as response:
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
        live input (streamlit-keyup, a v2 component with key `_st_keyup_<key>`) its state as JSON."""
        if key in self.widget_ids:
            wid = self.widget_ids[key]
            self.states[wid] = WidgetState(id=wid, string_value=value)
        else:
            wid = self.widget_ids[f"_st_keyup_{key}"]
            self.states[wid] = WidgetState(id=wid, json_value=json.dumps({"value": value}))
        return await self.rerun(self.fragments.get(wid, ""), timeout)

    async def _collect(self, start: float) -> Run:
        strings: list[str] = []
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
                problem = self._read_element(fm.delta.new_element, fm.delta.fragment_id, strings)
                if problem and status == "ok":
                    status = problem
            elif kind == "script_finished":
                if fm.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    status = "compile-error"
                if fm.script_finished in FINISHED or fm.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    return Run(time.perf_counter() - start, status, strings, elements, self.query)

    def _read_element(self, el: Any, fragment_id: str, strings: list[str]) -> str:
        """Collect the element's text; remember widget ids by user key. Returns a problem ("exception: …") or ""."""
        kind = el.WhichOneof("type")
        body = getattr(el, kind)
        if kind == "exception":
            return f"exception: {body.type}: {body.message[:200]}"
        if kind == "plotly_chart":
            try:
                strings.extend(_strings(json.loads(body.spec)))
            except ValueError:
                pass
        elif kind in ("markdown", "text", "code"):
            strings.append(body.body)
        elif kind == "alert":
            strings.append(body.body)
        elif kind == "html":
            strings.append(body.body)
        wid = getattr(body, "id", "")
        if isinstance(wid, str) and wid.startswith("$$ID") and "-" in wid:
            key = wid.rsplit("-", 1)[-1]
            if key and key != "None":
                self.widget_ids[key] = wid
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
