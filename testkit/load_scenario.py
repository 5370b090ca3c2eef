"""The load scenario shared by tests/test_load.py and bench/bench_load.py.

One real server (`streamlit run app.py`), one headless Chromium, N browser contexts (one Streamlit session
each). Half the sessions start on the self-attention view and half on the recurrent-cell (LSTM) view; all
type a sentence at the same moment, wait for the chart of *their* sentence, then switch to the other view
through the sidebar and type a second sentence. Every sentence holds one noun no other session types
(a word of the built-in English vocabulary that is also one MiniLM word piece), so a chart showing another
session's noun would be cross-talk.

Measured: per typed sentence, seconds from the last keystroke to a rendered Plotly chart whose SVG text holds
the sentence's noun (this includes the live input's 350 ms debounce); the server's resident memory (RSS of
the server process and its children, sampled every 0.1 s, and the kernel's VmHWM peak of the server).
"""
from __future__ import annotations

import asyncio
import json
import os
import platform
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from testkit.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_process

# In both built-in English vocabularies (generated and real) and single MiniLM word pieces; none occurs in the views'
# default texts.
NOUNS = (
    "horse", "cow", "pig", "goat", "mouse", "rabbit", "fox", "wolf", "lion", "tiger",
    "elephant", "monkey", "bird", "duck", "owl", "snake", "frog", "donkey", "bear", "squirrel",
)
# The noun comes last: a prefix typed before it (sent if a keystroke lags past the debounce) never shows it.
TEMPLATE = "the girl near the river likes the old {noun}"
VIEWS = {"self-attention": "Self-attention", "lstm-gates": "Recurrent cell"}  # url path -> sidebar title
HEADINGS = {"self-attention": "Self-attention", "lstm-gates": "Inside the recurrent cell"}
TYPING_DELAY_MS = 20  # between keystrokes (a fast typist; below the 350 ms debounce)

_CHART_TEXT_JS = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')]
    .map(e => e.textContent)"""
# true once a chart's SVG holds `tok` as a tick label ("tok" in attention, "t · tok" in the recurrent cell)
_CHART_HAS_JS = """tok => [...document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')]
    .some(e => { const t = e.textContent.trim(); return t === tok || t.endsWith(' · ' + tok); })"""


@dataclass
class Sample:
    """One typed sentence: seconds from the last keystroke to its chart."""

    session: int
    view: str  # url path
    noun: str
    seconds: float


@dataclass
class LoadResult:
    """Figures of one run (seconds, bytes). `errors` lists what went wrong per session (empty when clean)."""

    sessions: int
    samples: list[Sample]
    errors: list[str]
    cross_talk: list[str]  # "session i on view v saw noun n of session j"
    peak_rss_bytes: int  # max over the run of the RSS of the server and its children (sampled) and its VmHWM
    rss_after_warmup_bytes: int
    rss_end_bytes: int
    machine: str
    load_average: tuple[float, float]  # 1-minute load average at start and end
    wall_seconds: float
    server_cpu_seconds: float = 0.0  # CPU time (user + system) the server used after the warm-up
    notes: list[str] = field(default_factory=list)

    def seconds(self, view: str | None = None) -> np.ndarray:
        return np.array([s.seconds for s in self.samples if view in (None, s.view)], dtype=np.float64)

    def percentile(self, q: float, view: str | None = None) -> float:
        """q-th percentile (linear interpolation) of typing→chart seconds; nan without samples."""
        xs = self.seconds(view)
        return float(np.percentile(xs, q)) if xs.size else float("nan")

    def summary(self) -> dict:
        """The figures as plain JSON (seconds, MiB)."""
        per_view = {v: {"samples": int(self.seconds(v).size), "p50_s": round(self.percentile(50, v), 3),
                        "p95_s": round(self.percentile(95, v), 3)} for v in VIEWS}
        return {
            "sessions": self.sessions,
            "typed_sentences": len(self.samples),
            "typing_to_chart_p50_s": round(self.percentile(50), 3),
            "typing_to_chart_p95_s": round(self.percentile(95), 3),
            "typing_to_chart_max_s": round(float(self.seconds().max()), 3) if self.samples else None,
            "per_view": per_view,
            "server_peak_rss_mib": round(self.peak_rss_bytes / 2**20, 1),
            "server_rss_after_warmup_mib": round(self.rss_after_warmup_bytes / 2**20, 1),
            "server_rss_end_mib": round(self.rss_end_bytes / 2**20, 1),
            "server_cpu_s_after_warmup": round(self.server_cpu_seconds, 1),
            "errors": self.errors,
            "cross_talk": self.cross_talk,
            "machine": self.machine,
            "load_average_start_end": [round(x, 2) for x in self.load_average],
            "wall_s": round(self.wall_seconds, 1),
            "samples": [asdict(s) for s in self.samples],
            "notes": self.notes,
        }

    def markdown(self) -> str:
        """A table for docs/serving.md (one row)."""
        return (
            "| sessions | typed sentences | typing → chart p50 | p95 | max | server peak RSS | machine |\n"
            "|---|---|---|---|---|---|---|\n"
            f"| {self.sessions} (browser contexts, {len(VIEWS)} views each) | {len(self.samples)} | "
            f"{self.percentile(50):.2f} s | {self.percentile(95):.2f} s | "
            f"{float(self.seconds().max()) if self.samples else float('nan'):.2f} s | "
            f"{self.peak_rss_bytes / 2**20:,.0f} MiB | {self.machine} |"
        )


# ------------------------------------------------------------------------------------------ memory
def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _status_kib(pid: int, field_name: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` and all its descendants (VmRSS from /proc), bytes."""
    return 1024 * sum(_status_kib(p, "VmRSS") for p in _descendants(pid))


class RssSampler:
    """Samples `tree_rss_bytes(pid)` every `interval` seconds in a thread; `peak` also counts the kernel's VmHWM."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid, self.interval = pid, interval
        self.max_sampled = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max_sampled = max(self.max_sampled, tree_rss_bytes(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> int:
        return max(self.max_sampled, 1024 * _status_kib(self.pid, "VmHWM"), tree_rss_bytes(self.pid))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (its threads included), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def machine() -> str:
    """e.g. '2 CPU cores (Intel Xeon ...), 24 GiB, Linux x86_64'."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    mem = ""
    try:
        mem = f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{os.cpu_count()} CPU cores ({cpu}){mem}, {platform.system()} {platform.machine()}"


# ----------------------------------------------------------------------------------------- browser
async def wait_settled(page, timeout_s: float, settle_ms: int = 1000) -> None:
    """Wait until the app's script has finished (no running indicator, no skeleton) for `settle_ms`."""
    deadline = time.monotonic() + timeout_s
    await page.wait_for_selector('[data-testid="stSidebarUserContent"] >> text=Settings', timeout=timeout_s * 1000)
    quiet_since = None
    while time.monotonic() < deadline:
        busy = await page.locator('[data-testid="stStatusWidget"], [data-testid="stSkeleton"]').count()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= settle_ms:
            return
        await page.wait_for_timeout(100)
    raise TimeoutError(f"the app kept running for {timeout_s:.0f} s")


async def page_errors(page) -> list[str]:
    """Streamlit exception boxes and 'page not found' notices on the page (texts, empty when clean)."""
    found = []
    exc = page.locator('[data-testid="stException"]')
    for i in range(await exc.count()):
        found.append("exception: " + (await exc.nth(i).inner_text())[:300])
    if await page.get_by_text("Page not found").count():
        found.append("page not found")
    return found


async def _type_and_time(page, noun: str, timeout_s: float) -> float:
    box = page.locator("textarea.sentence-box__input")  # the live sentence box (explorer.ui.sentence_box, key `text`)
    await box.click()
    await box.press("Control+a")
    await box.press_sequentially(TEMPLATE.format(noun=noun), delay=TYPING_DELAY_MS)
    t0 = time.perf_counter()
    await page.wait_for_function(_CHART_HAS_JS, arg=noun, polling=50, timeout=timeout_s * 1000)
    return time.perf_counter() - t0


@dataclass
class _Session:
    index: int
    views: tuple[str, str]  # first view, second view (url paths)
    nouns: tuple[str, str]
    context: object = None
    page: object = None
    failed: bool = False


class _Run:
    """The browser side of one run: phases over all sessions, each phase awaited for all before the next."""

    def __init__(self, browser, base: str, result: LoadResult, timeout_s: float, shots: Path | None) -> None:
        self.browser, self.base, self.result, self.timeout_s, self.shots = browser, base, result, timeout_s, shots

    async def guarded(self, s: _Session, view: str, coro_fn) -> None:
        """Run one phase of session `s`; a failure is recorded (with a screenshot) and ends that session."""
        if s.failed:
            return
        try:
            await coro_fn()
        except Exception as exc:  # record and go on: the other sessions keep their figures
            s.failed = True
            self.result.errors.append(f"session {s.index} on {view}: {type(exc).__name__}: {str(exc)[:300]}")
            if self.shots is not None and s.page is not None:
                try:
                    self.shots.mkdir(parents=True, exist_ok=True)
                    await s.page.screenshot(path=str(self.shots / f"load-session{s.index}-{view}.png"), full_page=True)
                except Exception:
                    pass

    async def open_view(self, s: _Session, step: int) -> None:
        """Step 0: a new browser context opens the view's URL; step 1: the sidebar link (same Streamlit session)."""
        view = s.views[step]
        if step == 0:
            s.context = await self.browser.new_context(viewport={"width": 1400, "height": 1000})
            s.page = await s.context.new_page()
            await s.page.goto(f"{self.base}/{view}", timeout=self.timeout_s * 1000)
        else:
            await s.page.locator('[data-testid="stSidebarNav"] a', has_text=VIEWS[view]).first.click()
        await s.page.wait_for_selector(f'[data-testid="stMain"] h1 >> text="{HEADINGS[view]}"',
                                       timeout=self.timeout_s * 1000)
        await s.page.wait_for_selector('[data-testid="stPlotlyChart"] svg text', timeout=self.timeout_s * 1000)
        await wait_settled(s.page, self.timeout_s)

    async def type_sentence(self, s: _Session, step: int, owner: dict[str, int]) -> None:
        """Type this session's sentence, time it to its chart, then check errors and cross-talk."""
        view, noun = s.views[step], s.nouns[step]
        seconds = await _type_and_time(s.page, noun, self.timeout_s)
        self.result.samples.append(Sample(s.index, view, noun, round(seconds, 4)))
        await wait_settled(s.page, self.timeout_s, settle_ms=500)
        for err in await page_errors(s.page):
            self.result.errors.append(f"session {s.index} on {view}: {err}")
        shown = " ".join(await s.page.evaluate(_CHART_TEXT_JS))
        shown += " " + await s.page.locator('[data-testid="stMain"]').inner_text()
        words = set(shown.replace("·", " ").split())
        if noun not in words:
            self.result.errors.append(f"session {s.index} on {view}: its noun '{noun}' is not shown after settling")
        for other, j in owner.items():
            if j != s.index and other in words:
                self.result.cross_talk.append(f"session {s.index} on {view} saw '{other}' of session {j}")


async def _drive(base: str, n_sessions: int, result: LoadResult, timeout_s: float, shots: Path | None,
                 on_warm) -> None:
    from playwright.async_api import async_playwright

    paths = list(VIEWS)
    sessions = [_Session(i, (paths[i % 2], paths[(i + 1) % 2]), (NOUNS[2 * i], NOUNS[2 * i + 1]))
                for i in range(n_sessions)]
    owner = {noun: s.index for s in sessions for noun in s.nouns}
    ms = timeout_s * 1000
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        run = _Run(browser, base, result, timeout_s, shots)
        try:
            # warm-up (not measured): the root URL first (see docs/serving.md), then each view once, so that the models
            # are loaded and the page scripts compiled before the sessions start
            warm = await browser.new_context(viewport={"width": 1400, "height": 1000})
            page = await warm.new_page()
            try:
                await page.goto(base + "/", timeout=ms)
                await wait_settled(page, timeout_s)
                for view in paths:
                    await page.goto(f"{base}/{view}", timeout=ms)
                    await page.wait_for_selector('[data-testid="stPlotlyChart"] svg text', timeout=ms)
                    await wait_settled(page, timeout_s)
            except Exception as exc:
                text = (await page.locator("body").inner_text())[:1500]
                raise RuntimeError(f"warm-up failed ({type(exc).__name__}: {str(exc)[:300]}); page: {text}") from None
            await warm.close()
            on_warm()
            for step in range(2):
                # every session first has its view open and idle, then all type at the same moment
                await asyncio.gather(*(run.guarded(s, s.views[step], lambda s=s: run.open_view(s, step))
                                       for s in sessions))
                await asyncio.gather(*(run.guarded(s, s.views[step], lambda s=s: run.type_sentence(s, step, owner))
                                       for s in sessions))
        finally:
            await browser.close()


def run_load(n_sessions: int = 10, timeout_s: float = 300, env: dict[str, str] | None = None,
             shots: Path | None = ROOT / "artifacts" / "screenshots") -> LoadResult:
    """Start the server, run the scenario with `n_sessions` concurrent browser contexts, return the figures.

    timeout_s bounds each wait (page load, script run, chart after typing). Screenshots of failed sessions go
    to `shots`.
    """
    if n_sessions > len(NOUNS) // 2:
        raise ValueError(f"at most {len(NOUNS) // 2} sessions (two unique nouns each)")
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    result = LoadResult(n_sessions, [], [], [], 0, 0, 0, machine(), (os.getloadavg()[0], 0.0), 0.0)
    t0 = time.monotonic()
    with streamlit_process(env) as (base, proc), RssSampler(proc.pid) as rss:
        def on_warm() -> None:
            result.rss_after_warmup_bytes = tree_rss_bytes(proc.pid)
            result.server_cpu_seconds = -cpu_seconds(proc.pid)

        asyncio.run(_drive(base, n_sessions, result, timeout_s, shots, on_warm))
        result.rss_end_bytes = tree_rss_bytes(proc.pid)
        result.server_cpu_seconds += cpu_seconds(proc.pid)
        result.peak_rss_bytes = rss.peak
        if proc.poll() is not None:
            result.errors.append(f"the server exited with {proc.returncode}: {''.join(proc.log_tail)[-1000:]}")
        tracebacks = [line for line in proc.log_tail if "Traceback" in line]
        if tracebacks:
            result.notes.append("server log: " + "".join(proc.log_tail)[-2000:])
    result.wall_seconds = time.monotonic() - t0
    result.load_average = (result.load_average[0], os.getloadavg()[0])
    result.samples.sort(key=lambda x: (x.session, x.view))
    return result


def write_json(result: LoadResult, path: Path = ROOT / "artifacts" / "load.json") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.summary(), indent=2))
    return path
