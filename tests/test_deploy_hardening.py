"""The deployment templates harden the server (issue 27, item 5): deploy/nginx/explorer.conf.template and the
ingress of deploy/k8s/explorer.yaml send a Content-Security-Policy that allows Streamlit's page only its own origin,
refuse framing, sniffing and cross-site referrers, keep /_stcore/metrics private, bound request bodies, connections
and websocket/upload rates per client address; and the page reaches no other host (its icon is a shipped file).

Fast: the two files read and compared (`nginx -t` of the rendered template: tests/test_scale_out.py). Slow: a real
nginx with the template in front of a real server (testkit/replicas.py), and Debian's chromium through it.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import socket
import tomllib
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import streamlit
import yaml

from conftest import ROOT
from explorer.views import PAGE_ICON
from testkit.replicas import TEMPLATE, behind_nginx

SITE = TEMPLATE.read_text()
K8S = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "explorer.yaml").read_text()) if d]
INGRESSES = {d["metadata"]["name"]: d for d in K8S if d["kind"] == "Ingress"}
HEADERS = dict(re.findall(r'^\s*add_header (Content-Security-Policy|X-Frame-Options|X-Content-Type-Options|'
                          r'Referrer-Policy) "?([^"\n]*?)"? always;', SITE, re.MULTILINE))
CSP = {d.split()[0]: d.split()[1:] for d in HEADERS["Content-Security-Policy"].split("; ")}
INDEX = (Path(streamlit.__file__).parent / "static" / "index.html").read_text()
MAX_UPLOAD_MB = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["maxUploadSize"]


def _block(pattern: str) -> str:
    """The body of the nginx location whose line matches `pattern`."""
    start = SITE.index(pattern)
    return SITE[start:SITE.index("\n    }", start)]


def _inline_script_hashes(html: str) -> set[str]:
    """CSP source expressions of every inline <script> of a page."""
    bodies = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.DOTALL)
    return {f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'" for b in bodies}


# ------------------------------------------------------------------------------------------ the two files
def test_the_policy_allows_the_apps_own_origin_and_nothing_else() -> None:
    assert HEADERS["X-Frame-Options"] == "SAMEORIGIN" and HEADERS["X-Content-Type-Options"] == "nosniff"
    assert HEADERS["Referrer-Policy"] == "same-origin"
    assert CSP["default-src"] == ["'self'"] and CSP["object-src"] == ["'none'"]
    assert CSP["frame-ancestors"] == ["'self'"] and CSP["base-uri"] == ["'self'"] and CSP["form-action"] == ["'self'"]
    assert CSP["connect-src"] == ["'self'"]  # the websocket: same host only
    keywords = {"'self'", "'none'", "'unsafe-inline'", "'unsafe-eval'", "'wasm-unsafe-eval'", "data:", "blob:"}
    hosts = [s for sources in CSP.values() for s in sources if s not in keywords and not s.startswith("'sha256-")]
    assert hosts == []  # no other host, no scheme wildcard (https:, *)
    assert "'unsafe-inline'" not in CSP["script-src"] and CSP["style-src"] == ["'self'", "'unsafe-inline'"]


def test_the_policy_names_each_inline_script_of_streamlits_page() -> None:
    """A Streamlit upgrade that changes the inline script of index.html fails here (update the hash in both files)."""
    hashes = _inline_script_hashes(INDEX)
    assert hashes and hashes <= set(CSP["script-src"]), (hashes, CSP["script-src"])


def test_bodies_are_bounded_uploads_to_streamlits_own_limit() -> None:
    assert re.search(r"^    client_max_body_size 1m;", SITE, re.MULTILINE)
    upload = _block("location ^~ /_stcore/upload_file/")
    assert f"client_max_body_size {MAX_UPLOAD_MB + 1}m;" in upload  # one file and its multipart envelope
    assert INGRESSES["explorer-upload"]["metadata"]["annotations"][
        "nginx.ingress.kubernetes.io/proxy-body-size"] == f"{MAX_UPLOAD_MB + 1}m"
    for name in ("explorer", "explorer-stream"):
        assert INGRESSES[name]["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"] == "1m"


def test_metrics_stay_behind_the_proxy() -> None:
    assert "return 404;" in _block("location = /_stcore/metrics")
    metrics = INGRESSES["explorer-metrics"]
    assert metrics["spec"]["rules"][0]["http"]["paths"][0] | {"backend": None} == \
        {"path": "/_stcore/metrics", "pathType": "Exact", "backend": None}
    assert metrics["metadata"]["annotations"] == {"nginx.ingress.kubernetes.io/denylist-source-range": "0.0.0.0/0,::/0"}


def test_kubernetes_sends_the_same_headers_and_limits() -> None:
    config = next(d for d in K8S if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "explorer-headers")
    assert config["data"] == HEADERS
    stream, upload = _block("location = /_stcore/stream"), _block("location ^~ /_stcore/upload_file/")
    rate = dict(re.findall(r"limit_req_zone \S+ zone=(\w+):\S+ rate=(\d+)r/", SITE))
    burst = {z: int(b) for z, b in re.findall(r"limit_req zone=(\w+) burst=(\d+) nodelay;", SITE)}
    conns = {z: int(n) for z, n in re.findall(r"limit_conn (explorer_\w+) (\d+);", SITE)}
    assert "zone=explorer_ws_rate" in stream and "limit_conn explorer_ws " in stream
    assert "zone=explorer_upload_rate" in upload and "limit_conn explorer_uploads " in upload
    for name, ingress in INGRESSES.items():
        notes = ingress["metadata"]["annotations"]
        if name == "explorer-metrics":
            continue
        assert notes["nginx.ingress.kubernetes.io/custom-headers"].split("/")[1] == config["metadata"]["name"]
        assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie", name  # every path pinned the same way
        assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == "explorer_route"
        assert notes["nginx.ingress.kubernetes.io/session-cookie-path"] == "/"
    s = INGRESSES["explorer-stream"]["metadata"]["annotations"]
    assert int(s["nginx.ingress.kubernetes.io/limit-rps"]) == int(rate["explorer_ws_rate"])
    rps = int(s["nginx.ingress.kubernetes.io/limit-rps"])
    assert rps * int(s["nginx.ingress.kubernetes.io/limit-burst-multiplier"]) == burst["explorer_ws_rate"]
    assert int(s["nginx.ingress.kubernetes.io/limit-connections"]) == conns["explorer_ws"]
    u = INGRESSES["explorer-upload"]["metadata"]["annotations"]
    assert int(u["nginx.ingress.kubernetes.io/limit-rpm"]) == int(rate["explorer_upload_rate"])
    assert int(u["nginx.ingress.kubernetes.io/limit-connections"]) == conns["explorer_uploads"]
    m = INGRESSES["explorer"]["metadata"]["annotations"]
    assert int(m["nginx.ingress.kubernetes.io/limit-connections"]) == conns["explorer_addr"]
    paths = {n: i["spec"]["rules"][0]["http"]["paths"][0] for n, i in INGRESSES.items()}
    assert (paths["explorer-stream"]["path"], paths["explorer-stream"]["pathType"]) == ("/_stcore/stream", "Exact")
    assert (paths["explorer-upload"]["path"], paths["explorer-upload"]["pathType"]) == \
        ("/_stcore/upload_file", "Prefix")


def test_the_page_icon_is_a_shipped_file() -> None:
    icon = Path(PAGE_ICON)
    assert icon.parent == ROOT / "assets" and icon.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 0 < icon.stat().st_size < 16_384
    assert ":material/" not in (ROOT / "app.py").read_text().split("set_page_config")[1].split("\n")[0]


# ------------------------------------------------------------------------------- a real nginx, a real server
def _get(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _raw(base: str, head: str, source: str = "127.0.0.1", hold: bool = False,
         wait: float = 30) -> tuple[str, socket.socket | None]:
    """Send raw request headers (no body) from the address `source` and read the status line ("" when none came
    within `wait` seconds); hold: return the socket, still open, without waiting (a request nginx is reading)."""
    url = urlsplit(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=wait, source_address=(source, 0))
    sock.sendall(head.encode())
    if hold:
        return "", sock
    try:
        status = sock.recv(4096).decode(errors="replace").split("\r\n")[0]
    except TimeoutError:
        status = ""
    sock.close()
    return status, None


def _upgrade(path: str = "/_stcore/stream") -> str:
    key = base64.b64encode(b"16 bytes of key!").decode()  # a nonce of 16 bytes
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: streamlit\r\n\r\n")


@pytest.fixture(scope="module")
def proxied():
    """(proxy base URL, the app's own base URL) of one app process behind nginx with the shipped template."""
    with behind_nginx(1, reveal_upstream=False) as (base, procs):  # the template as shipped
        port = procs[0].args[procs[0].args.index("--server.port") + 1]
        yield base, f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_every_answer_carries_the_headers(proxied) -> None:
    base, _ = proxied
    status, headers, page = _get(base + "/")
    asset = re.search(r'src="\./(static/js/[^"]+\.js)"', page.decode()).group(1)
    for url in (base + "/", f"{base}/{asset}", base + "/_stcore/health", base + "/nowhere/at/all"):
        status, headers, _ = _get(url)
        assert status in (200, 404), url
        for name, value in HEADERS.items():
            assert headers.get(name) == value, (url, name)
        assert "X-Upstream" not in headers and not any("127.0.0.1:" in v for v in headers.values()), url
    # the inline script of the page as served is the one the policy names
    assert _inline_script_hashes(page.decode()) <= set(CSP["script-src"])


@pytest.mark.slow
def test_metrics_are_not_served_through_the_proxy(proxied) -> None:
    base, direct = proxied
    assert _get(direct + "/_stcore/metrics")[0] == 200  # Streamlit serves them: the proxy is what hides them
    assert _get(base + "/_stcore/metrics")[0] == 404


@pytest.mark.slow
def test_oversized_bodies_get_413(proxied) -> None:
    base, _ = proxied
    # refused from the Content-Length, before any byte of the body arrives
    status, _ = _raw(base, f"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {2 * 2**20}\r\n\r\n")
    assert " 413 " in status, status  # not an upload: 1 MB
    too_big = (MAX_UPLOAD_MB + 2) * 2**20
    status, _ = _raw(base, f"PUT /_stcore/upload_file/s/f HTTP/1.1\r\nHost: localhost\r\nContent-Length: {too_big}"
                           "\r\nContent-Type: multipart/form-data; boundary=x\r\n\r\n")
    assert " 413 " in status, status
    status, _ = _raw(base, f"PUT /_stcore/upload_file/s/f HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                           f"{MAX_UPLOAD_MB * 2**20}\r\nContent-Type: multipart/form-data; boundary=x\r\n\r\n",
                     wait=1.0)
    assert status == ""  # a file of the app's own limit is not refused: nginx waits for its body


@pytest.mark.slow
def test_uploads_in_flight_are_limited_per_client(proxied) -> None:
    base, _ = proxied
    head = ("PUT /_stcore/upload_file/s/f HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\n\r\n")
    held = [_raw(base, head, source="127.0.0.3", hold=True)[1] for _ in range(8)]  # 8 bodies still arriving
    try:
        status, _ = _raw(base, head, source="127.0.0.3")
        assert " 429 " in status, status
        status, _ = _raw(base, head.replace("1000", "0"), source="127.0.0.4")  # another address is not held back
        assert " 429 " not in status, status
    finally:
        for sock in held:
            sock.close()


@pytest.mark.slow
def test_a_burst_of_websocket_upgrades_is_cut_and_the_app_keeps_working(proxied) -> None:
    from testkit.st_protocol import Session

    base, _ = proxied

    async def scenario() -> None:
        async with Session(base, "lstm-gates", "text=the+dog") as before:  # a student already in class
            assert (await before.rerun()).status == "ok"
            with ThreadPoolExecutor(32) as pool:  # one client opens 200 sessions at once
                statuses = list(pool.map(lambda _: _raw(base, _upgrade(), source="127.0.0.2")[0], range(200)))
            accepted = sum(" 101 " in s for s in statuses)
            refused = sum(" 429 " in s for s in statuses)
            assert accepted + refused == 200, statuses
            assert 121 <= accepted <= 150 and refused >= 50, (accepted, refused)  # a burst of 120 (+1), 4 a second
            assert _get(base + "/_stcore/health")[0] == 200
            run = await before.set_text("text", "the cats")  # the open session reruns as before
            assert run.status == "ok" and "cats" in run.text()
        async with Session(base, "lstm-gates", "text=the+dog") as other:  # another address opens a session at once
            assert (await other.rerun()).status == "ok"

    asyncio.run(scenario())


@pytest.mark.slow
def test_the_page_fetches_nothing_from_another_host(proxied) -> None:
    """What the app serves at start: index.html names no URL of any host (every src/href is relative, and each
    answers 200), and the first run's page config sets the favicon to the shipped icon, served by the app (a
    `:material/…:` icon would make the browser build a fonts.gstatic.com URL). Streamlit's JS bundle holds other
    hosts' URLs (its docs, that CDN) that this page does not load: not checked here; the browser test below
    watches every request the page makes."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    from testkit.st_protocol import Session

    base, _ = proxied
    status, _, page = _get(base + "/")
    html = page.decode()
    assert status == 200 and not re.search(r"https?://", html.split("-->", 1)[1])  # past the licence comment
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(r.startswith("./") for r in refs), refs
    for ref in refs:
        assert _get(f"{base}/{ref[2:]}")[0] == 200, ref

    async def first_run() -> list[ForwardMsg]:
        async with Session(base, "") as s:
            msg = BackMsg()
            msg.rerun_script.page_name = ""
            await s._ws.send(msg.SerializeToString())
            out = []
            while not out or out[-1].WhichOneof("type") != "script_finished":
                fm = ForwardMsg()
                fm.ParseFromString(await asyncio.wait_for(s._ws.recv(), 120))
                out.append(fm)
            return out

    messages = asyncio.run(first_run())
    favicon = [m.page_config_changed.favicon for m in messages if m.WhichOneof("type") == "page_config_changed"]
    assert favicon and favicon[0].startswith("/media/") and favicon[0].endswith(".png"), favicon
    status, headers, icon = _get(base + favicon[0])
    assert status == 200 and icon == Path(PAGE_ICON).read_bytes()
    assert not any("gstatic" in str(m) or "googleapis" in str(m) for m in messages)


@pytest.mark.slow
def test_streamlit_runs_under_the_policy_in_a_browser(proxied) -> None:
    """Debian's chromium through the proxy: the views draw (Plotly's WebGL scatter, the live sentence box, HTML,
    formulas), the policy blocks nothing, and no request leaves the app's origin."""
    from playwright.sync_api import sync_playwright

    from testkit.browser import CHROMIUM, CHROMIUM_ARGS, wait_for_app

    base, _ = proxied
    watch = ("window.__csp = []; document.addEventListener('securitypolicyviolation', e => "
             "window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")
    elsewhere: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.add_init_script(watch)
        page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith((base, "data:", "blob:"))
                else None)
        views = (("/word-embeddings", 1, True), ("/lstm-gates", 2, True),  # (path, charts, sentence box)
                 ("/decoding-strategies?model=builtin:tiny-gpt", 2, True),
                 ("/positional-encodings?panel=sinusoidal", 2, False), ("/", 0, False))
        for path, charts, box in views:
            page.goto(base + path)
            wait_for_app(page, settle_ms=1500)
            assert page.evaluate("window.__csp") == [], path
            assert page.locator('[data-testid="stException"]').count() == 0, path
            assert page.locator(".js-plotly-plot").count() >= charts, path
            if box:
                assert page.locator(".st-key-_box_text textarea").count() == 1, path  # the live sentence box
        icon = page.evaluate("[...document.querySelectorAll('link[rel*=icon]')].map(l => l.href)")
        browser.close()
    assert elsewhere == [], elsewhere
    assert icon and all(i.startswith(base + "/media/") for i in icon), icon
