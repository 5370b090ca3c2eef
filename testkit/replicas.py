"""N app replicas behind Debian's nginx with the shipped sticky configuration (deploy/nginx/explorer.conf.template),
all on loopback ports: the scale-out of deploy/compose.yaml without Docker.

    with behind_nginx(2) as (base, procs): ...   # base: the proxy's http://127.0.0.1:<port>
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from string import Template
from typing import Iterator

from testkit.browser import ROOT, free_port, streamlit_process, wait_healthy

TEMPLATE = ROOT / "deploy" / "nginx" / "explorer.conf.template"
NGINX = os.environ.get("NGINX", shutil.which("nginx") or "/usr/sbin/nginx")


REVEAL = "    add_header X-Upstream $upstream_addr always;  # the test harness's: which replica answered\n"


def render(upstreams: list[str], listen: str | int, reveal_upstream: bool = False) -> str:
    """The template as the nginx image renders it (envsubst of the two EXPLORER_ variables only). reveal_upstream:
    the harness's copy also names the replica that answered, in X-Upstream (read by testkit/st_protocol.py; the
    shipped template names no internal address)."""
    text = Template(TEMPLATE.read_text()).safe_substitute(
        EXPLORER_UPSTREAMS=" ".join(f"server {u};" for u in upstreams), EXPLORER_LISTEN=str(listen))
    if reveal_upstream:
        anchor = "    add_header Set-Cookie "
        text = text.replace(anchor, REVEAL + anchor, 1)
    return text


def nginx_conf(site: Path, workdir: Path) -> str:
    """A main nginx.conf for an unprivileged run in `workdir` that includes the rendered site."""
    return f"""daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    include {site};
}}
"""


def check_config(upstreams: list[str], listen: str | int) -> subprocess.CompletedProcess:
    """`nginx -t` on the rendered configuration (returns the completed process; returncode 0 when accepted)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "site.conf").write_text(render(upstreams, listen))
        (work / "nginx.conf").write_text(nginx_conf(work / "site.conf", work))
        return subprocess.run([NGINX, "-t", "-c", str(work / "nginx.conf"), "-p", str(work)],
                              capture_output=True, text=True, timeout=30)


@contextmanager
def behind_nginx(n: int, env: dict[str, str] | None = None,
                 reveal_upstream: bool = True) -> Iterator[tuple[str, list[subprocess.Popen]]]:
    """Start n app processes and nginx in front of them, listening on 127.0.0.1 only; yields (proxy base URL, the app
    processes). reveal_upstream: render's (the load generator counts the sessions per replica with it)."""
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        apps = [stack.enter_context(streamlit_process(env)) for _ in range(n)]
        work = Path(tmp)
        port = free_port()
        (work / "site.conf").write_text(render([base.removeprefix("http://") for base, _ in apps], f"127.0.0.1:{port}",
                                               reveal_upstream))
        (work / "nginx.conf").write_text(nginx_conf(work / "site.conf", work))
        proc = subprocess.Popen([NGINX, "-c", str(work / "nginx.conf"), "-p", str(work)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        base = f"http://127.0.0.1:{port}"
        try:
            def failure() -> str:
                err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
                log = work / "error.log"
                return f"nginx did not start: {err}{log.read_text()[-2000:] if log.exists() else ''}"

            wait_healthy(base, proc, 20, failure)
            yield base, [p for _, p in apps]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
