"""A hostile student against one running server: every attack of the class-safety issue replayed over HTTP and
Streamlit's websocket protocol (testkit/st_protocol.py), as a browser or a script would send it.

For each attack the test asserts: the attacker gets a clear message (naming the limit and its setting), another
student's session keeps rerunning its view in under a second during the attack (`Bystander`), the health endpoint
keeps answering, the server's memory stays under the replica's limit (2 GiB: deploy/k8s/explorer.yaml,
deploy/compose.yaml) and nothing of one session is visible in another. The figures of each attack are printed
(`-s`) and written to artifacts/hostile-student.json.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import numpy as np
import pytest
import torch

from testkit.browser import streamlit_process
from conftest import ROOT, needs_smollm2
from hostile import lstm_state_dict
from testkit.load_scenario import RssSampler, cpu_seconds, tree_rss_bytes
from testkit.memory_scenario import UPLOAD_ID, add_to_catalogue, churn, put_at_once, reload
from testkit.st_protocol import Run, Session, query
from timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed against a server: alone

REPLICA_LIMIT = 2 * 2**30  # the container's memory limit
RECONNECT_S = 5  # the server's EXPLORER_RECONNECT_S
STALL = 1.0  # seconds: the longest another session's rerun (or the health check) may take during an attack
FIGURES: dict[str, dict] = {}
NOUNS = ("dog", "cat", "bird", "fish", "horse", "cow", "frog", "duck")


@dataclass
class Attack:
    """What one attack did to the server: its own seconds, the bystander's rerun seconds, health-check seconds,
    the server's RSS before, at its sampled peak and after (bytes), and what the attack returned."""

    name: str
    seconds: float = 0.0
    bystander: list[float] = field(default_factory=list)
    alone: float = 0.0  # the bystander's median rerun before the attack (its own cost)
    health: list[float] = field(default_factory=list)
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    result: Any = None

    @property
    def stall(self) -> float:
        return max([0.0, *self.bystander, *self.health])

    def figures(self) -> dict:
        return {"seconds": round(self.seconds, 2), "bystander_max_s": round(max([0.0, *self.bystander]), 3),
                "bystander_reruns": len(self.bystander), "health_max_s": round(max([0.0, *self.health]), 3),
                "rss_before_mb": self.rss_before // 2**20, "rss_peak_mb": self.rss_peak // 2**20,
                "rss_after_mb": self.rss_after // 2**20}

    def check(self) -> None:
        """The class carries on: the bystander reran at least once, never stalled; memory under the limit."""
        FIGURES[self.name] = self.figures()
        print(f"\n{self.name}: {self.figures()}")
        assert self.bystander, f"{self.name}: the bystander never finished a rerun"
        assert self.stall < scaled(STALL), f"{self.name}: another session stalled {self.stall:.2f} s ({self.figures()})"
        assert self.rss_peak < REPLICA_LIMIT, f"{self.name}: server RSS peaked at {self.rss_peak / 2**30:.2f} GiB"


class HealthPoller:
    """Polls /_stcore/health every 0.2 s from a child process, as another client would (a thread of this process
    would also time this process's own work: building and sending a 400 MB body held its interpreter lock 0.5 s);
    `seconds` holds each answer's latency."""

    CHILD = (
        "import sys, time, urllib.request\n"
        "while True:\n"
        "    start = time.perf_counter()\n"
        "    try:\n"
        "        urllib.request.urlopen(sys.argv[1] + '/_stcore/health', timeout=120).read()\n"
        "    except OSError:\n"
        "        pass\n"
        "    print(time.perf_counter() - start, flush=True)\n"
        "    time.sleep(0.2)\n")

    def __init__(self, base: str) -> None:
        self.base, self.seconds = base, []

    def __enter__(self) -> HealthPoller:
        self._proc = subprocess.Popen([sys.executable, "-c", self.CHILD, self.base], stdout=subprocess.PIPE,
                                      text=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._proc.terminate()
        out, _ = self._proc.communicate(timeout=30)
        self.seconds = [float(line) for line in out.split()]


def under_attack(server: tuple[str, Any], name: str, attack: Callable[..., Awaitable[Any]]) -> Attack:
    """Run `attack()` while another student's session reruns the recurrent-cell view on the built-in LSTM LM with a
    new sentence every 0.1 s, the health endpoint is polled and the server's RSS sampled. An attack that takes an
    argument gets an asyncio.Event: while it is set, the other session pauses (to measure the server alone)."""
    base, proc = server
    out = Attack(name, rss_before=tree_rss_bytes(proc.pid))

    async def main() -> None:
        bystander = Session(base, "lstm-gates", query(model="builtin:lstm-lm", text="the dog runs"))
        await bystander.connect()
        await bystander.rerun()
        alone = []  # the bystander's own cost: its reruns before the attack
        for i in range(5):
            alone.append((await bystander.set_text("text", f"the {NOUNS[i]} sleeps")).seconds)
        out.alone = float(np.median(alone))
        stop, pause = asyncio.Event(), asyncio.Event()

        async def keep_working() -> None:
            i = 0
            while not stop.is_set():
                if pause.is_set():
                    await asyncio.sleep(0.05)
                    continue
                run = await bystander.set_text("text", f"the {NOUNS[i % 8]} near the {NOUNS[(i // 8) % 8]} runs")
                assert run.status == "ok", run.status
                out.bystander.append(run.seconds)
                i += 1
                await asyncio.sleep(0.1)

        task = asyncio.create_task(keep_working())
        start = time.perf_counter()
        try:
            out.result = await (attack(pause) if inspect.signature(attack).parameters else attack())
        finally:
            out.seconds = time.perf_counter() - start
            await asyncio.sleep(0.5)  # the bystander's rerun right after the attack counts too
            stop.set()
            await task
            await bystander.close()

    with RssSampler(proc.pid, 0.05) as rss, HealthPoller(base) as health:
        asyncio.run(main())
    out.health, out.rss_peak, out.rss_after = health.seconds, rss.max_sampled, tree_rss_bytes(proc.pid)
    return out


@pytest.fixture(scope="module")
def server():
    # the live input, as a class uses it; a closed tab's session shut down 5 s after it closed (30 s by default)
    # the weights' budget of deploy/k8s/explorer.yaml and deploy/compose.yaml (1,024 MB), so that every attack is
    # replayed against a replica as it is deployed
    with streamlit_process({"EXPLORER_RECONNECT_S": str(RECONNECT_S), "EXPLORER_MAX_MODEL_MB": "1024"},
                           timeout=180) as (base, proc):
        # open the bystander's view and the Models page once (the first Hugging Face model imports transformers,
        # once per process), so that no attack is charged for the server's own first-use costs
        async def warm() -> None:
            for page, q in (("lstm-gates", query(model="builtin:lstm-lm", text="the dog runs")), ("catalogue", "")):
                async with Session(base, page, q) as s:
                    await s.rerun()

        asyncio.run(warm())
        yield base, proc
    out = ROOT / "artifacts" / "hostile-student.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(FIGURES, indent=1))


SETTING = re.compile(r"EXPLORER(?:\\?_[A-Z]+)+")  # a setting's name, as written in Markdown (underscores escaped)


def messages(run: Run) -> str:
    return "\n".join(run.strings)


def no_exception(run: Run) -> None:
    assert run.status == "ok", run.status


# ---------------------------------------------------------------------------------------------- files
BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi")]
    + ["title: Laughs", "steps:", "  - page: *i", "    params: {text: *i}"]) + "\n"


def test_a_lesson_of_nested_yaml_aliases_is_refused_at_once(server) -> None:
    assert len(BILLION_LAUGHS) < 700  # a few hundred bytes that would expand to 9**9 strings

    async def attack() -> Run:
        async with Session(server[0], "lesson-plans") as s:
            await s.rerun()
            _, run = await s.upload("_lesson_upload", [("laughs.yaml", BILLION_LAUGHS.encode())])
            no_exception(run)
            return run

    out = under_attack(server, "YAML aliases in a lesson", attack)
    out.check()
    text = messages(out.result)
    assert re.search(r"alias|anchor", text, re.I), text[-2000:]
    assert out.rss_peak - out.rss_before < 200 * 2**20
    assert out.seconds < scaled(10)


def tokenizer_json(pattern: str) -> bytes:
    """A word-level tokenizer.json for the 10-row LSTM below whose Split pre-tokenizer uses `pattern`."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<bos>", "<eos>", "a", "the", "dog", "runs", "cat", "b"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    return tok.to_str().encode()


def safetensors_bytes(state: dict[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    return save(state)




@pytest.mark.parametrize("pattern, what", [(r"a*a*a*\d", "backtracks"), (r"(a|a)+$", "panics")])
def test_a_tokenizer_regex_from_an_upload_never_stalls_the_server(server, pattern: str, what: str) -> None:
    files = [("lm.safetensors", safetensors_bytes(lstm_state_dict(10))), ("tokenizer.json", tokenizer_json(pattern))]

    async def attack() -> list[Run]:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            _, run = await add_to_catalogue(s, files)
            no_exception(run)
            runs = [run]
            uid = next(iter(UPLOAD_ID.findall(messages(run))), None)
            if uid is not None:  # accepted: the regex may only run where a timeout stops it
                s.page, s.query, s.states = "lstm-gates", query(model=uid, text="a" * 2000), {}
                runs.append(await s.rerun())
                no_exception(runs[-1])
                runs.append(await s.set_text("text", "the dog runs"))  # the session still works afterwards
                no_exception(runs[-1])
            return runs

    out = under_attack(server, f"tokenizer regex that {what}", attack)
    out.check()
    text = "\n".join(messages(r) for r in out.result)
    assert re.search(r"regular expression|regex|pattern", text, re.I), text[-2000:]
    assert out.seconds < scaled(30)


STRIDE_ZERO = torch.zeros(1).expand(2**30)  # 1 float32 element that stands for 4 GiB


def test_a_stride_zero_tensor_is_refused_before_anything_is_allocated(server) -> None:
    buf = io.BytesIO()
    torch.save({"emb.weight": STRIDE_ZERO.view(2**15, 2**15)}, buf)
    data = buf.getvalue()
    assert len(data) < 4096

    async def attack() -> Run:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            _, run = await add_to_catalogue(s, [("tiny.pt", data)])
            no_exception(run)
            return run

    out = under_attack(server, "stride-0 tensor in a .pt", attack)
    out.check()
    assert SETTING.search(messages(out.result)), messages(out.result)[-2000:]
    assert out.rss_peak - out.rss_before < 300 * 2**20


def test_a_ten_million_word_vocabulary_is_refused_by_its_size(server) -> None:
    vocab = json.dumps([f"w{i}" for i in range(10_000_000)]).encode()
    files = [("lm.safetensors", safetensors_bytes(lstm_state_dict(10))), ("vocab.json", vocab)]

    async def attack() -> Run:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            _, run = await add_to_catalogue(s, files)
            no_exception(run)
            return run

    out = under_attack(server, "10-million-word vocab.json", attack)
    out.check()
    assert SETTING.search(messages(out.result)), messages(out.result)[-2000:]
    assert out.rss_peak - out.rss_before < 600 * 2**20


def test_a_vocabulary_with_ids_from_one_is_checked_in_linear_time(server) -> None:
    n = 400_000
    vocab = json.dumps({f"w{i}": i + 1 for i in range(n)}).encode()
    files = [("lm.safetensors", safetensors_bytes(lstm_state_dict(n + 1, emb=2, hidden=2))), ("vocab.json", vocab)]

    async def attack() -> Run:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            _, run = await add_to_catalogue(s, files)
            no_exception(run)
            return run

    out = under_attack(server, "400k-entry {token: id} vocabulary, ids from 1", attack)
    out.check()
    assert out.seconds < scaled(20)


# --------------------------------------------------------------------------------------------- memory
def test_files_posted_straight_to_the_upload_endpoint_stay_within_the_budget(server) -> None:
    """Issue 41, item 3: six sessions PUT a 240 MB file each at once (six 300 MB PUTs once peaked at 6.1 GB). One
    budget (512 MB) counts the files held and the bodies in flight from their declared length, so the bodies over it
    are refused before they are read; and what the files held goes back when their tabs close."""
    blob = bytes(240 * 2**20)

    async def attack() -> list[int | str]:
        sessions, statuses = await put_at_once(server[0], 6, blob)
        for s in sessions:
            await s.close()  # the tabs close: whatever they left in the upload store goes
        return statuses

    out = under_attack(server, "six 240 MB files posted to the upload endpoint at once", attack)
    out.check()
    accepted = [st for st in out.result if st == 204]
    FIGURES[out.name]["statuses"] = out.result
    assert 1 <= len(accepted) <= 2, out.result  # 2 × 240 MB fit in 512 MB
    assert out.rss_peak - out.rss_before < (2 * 240 + 150) * 2**20, FIGURES[out.name]
    time.sleep(RECONNECT_S + 3)
    kept = tree_rss_bytes(server[1].pid) - out.rss_before
    FIGURES[out.name]["rss_kept_after_close_mb"] = kept // 2**20
    assert kept < 50 * 2**20, f"{kept / 2**20:.0f} MB kept after the tabs closed"


def long_sentence(n_words: int, seed: int) -> str:
    """An everyday sentence of `n_words` words (about as many SmolLM2 tokens), different for each seed."""
    import random

    words = ("the teacher asked the class why the small dog near the old bridge was barking at the birds while "
             "children played in the park and the rain fell on the quiet town").split()
    rng = random.Random(seed)
    return " ".join(rng.choice(words) for _ in range(n_words)) + " ."


@needs_smollm2
def test_long_sentences_on_the_real_model_stay_within_the_request_and_session_budgets(server) -> None:
    """Self-attention on SmolLM2: four 500-word sentences, then a 1,024-word one (before: +160 MB kept per sentence,
    the 1,024-token one 24 s of CPU and +3.3 GB at its peak, kept after the tab closed). Each is cut to what the
    per-request budget prices within 400 MB (a note names EXPLORER_REQUEST_MB), the session keeps at most its 128 MB
    of results, and the server stays under the replica's 2 GiB."""
    kept: dict[str, int] = {}

    async def attack(pause: asyncio.Event) -> list[Run]:
        pause.set()  # the model loads (once per process) with the other session paused: its first use is not timed
        s = Session(server[0], "self-attention", query(model="pretrained:smollm2", text="the cat sat ."))
        await s.connect()
        await s.rerun()
        await asyncio.sleep(1)
        kept["loaded"] = tree_rss_bytes(server[1].pid)
        pause.clear()
        runs = []
        for i, n in enumerate((500, 500, 500, 500, 1024)):
            runs.append(await s.set_text("text", long_sentence(n, i), timeout=180))
        kept["sentences"] = tree_rss_bytes(server[1].pid)
        await s.close()
        return runs

    out = under_attack(server, "five long sentences into self-attention on SmolLM2", attack)
    out.check()
    time.sleep(3)
    kept["closed"] = tree_rss_bytes(server[1].pid)
    for run in out.result:
        no_exception(run)
        assert run.seconds < scaled(15), run.seconds
        said = messages(run).replace("\\_", "_")
        assert re.search(r"only the first [\d,]+ are used", said) and "EXPLORER_REQUEST_MB" in said, said[-1500:]
    grown = (kept["sentences"] - kept["loaded"]) // 2**20
    FIGURES[out.name].update(kept_mb=grown, kept_after_close_mb=(kept["closed"] - kept["loaded"]) // 2**20,
                             slowest_rerun_s=round(max(r.seconds for r in out.result), 2))
    # RSS while the session is open: its results (EXPLORER_SESSION_RESULTS_MB, 128) and what the allocator keeps of a
    # request's peak (EXPLORER_REQUEST_MB, 400) after freeing it; measured 201–321 MB (222–287 MB a release before),
    # so a bound of 300 failed one run in two; after the tab closes −29 to 109 MB (kept_after_close_mb, recorded)
    from explorer.runtime import budget

    bound = (budget.session_result_bytes() + budget.request_bytes()) // 2**20
    assert grown < bound, f"{grown} MB kept by one session's five sentences (bound {bound} MB)"


@needs_smollm2
def test_a_3000_word_decoding_prompt_on_the_real_model_is_cut_to_the_request_budget(server) -> None:
    """Before: a 4,096-token prompt cost one decoding rerun 124 s and 2.7 GB. Now a 3,000-word one (~17,000
    characters, within the 20,000 a sentence may have) is cut at its start to what the
    per-request budget prices within 5 s of CPU (a note says so), and the other session keeps its pace."""
    async def attack(pause: asyncio.Event) -> Run:
        pause.set()  # the model's first use in this process is not the attack
        async with Session(server[0], "decoding-strategies", query(model="pretrained:smollm2", text="The cat")) as s:
            await s.rerun(timeout=180)
            pause.clear()
            return await s.set_text("text", long_sentence(3000, 7), timeout=180)

    out = under_attack(server, "a 3,000-word prompt into decoding on SmolLM2", attack)
    out.check()
    no_exception(out.result)
    text = messages(out.result).replace("\\_", "_")
    assert re.search(r"only its last [\d,]+ are read", text) and "EXPLORER_REQUEST" in text, text[-2000:]
    assert out.result.seconds < scaled(20), out.result.seconds
    assert out.rss_peak - out.rss_before < 1024 * 2**20


@needs_smollm2
def test_two_students_heavy_work_on_the_real_model_takes_turns_and_the_class_keeps_its_pace(server) -> None:
    """Two students retype into token attribution and decoding on SmolLM2 at once (each run holds a core for
    seconds) while the other session types into the recurrent cell: the heavy runs take turns (EXPLORER_HEAVY_SLOTS:
    one at a time on 2 cores), the waiting one is told where it is in the queue, and the other session's reruns stay
    under a second."""
    async def attack(pause: asyncio.Event) -> list[Run]:
        pause.set()  # the model's first use in this process is not the attack
        a = Session(server[0], "token-attribution", query(model="pretrained:smollm2", text="The cat sat on the",
                                                          method="integrated gradients"))  # seconds per run
        d = Session(server[0], "decoding-strategies", query(model="pretrained:smollm2", text="The dog ran to the"))
        for s in (a, d):
            await s.connect()
            await s.rerun(timeout=240)
        pause.clear()
        runs: list[Run] = []
        for i in range(2):
            runs += await asyncio.gather(a.set_text("text", f"The {NOUNS[i]} sat near the old", timeout=240),
                                         d.set_text("text", f"The {NOUNS[i]} ran along the", timeout=240))
        for s in (a, d):
            await s.close()
        return runs

    out = under_attack(server, "two students' attribution and decoding on SmolLM2 at once", attack)
    out.check()
    for run in out.result:
        no_exception(run)
    said = " ".join(messages(r) for r in out.result).replace("\\_", "_")
    assert re.search(r"Waiting for the server: \d heavy runs? .* ahead of yours", said), said[-2000:]
    FIGURES[out.name]["slowest_heavy_rerun_s"] = round(max(r.seconds for r in out.result), 2)
    FIGURES[out.name]["bystander_alone_s"] = round(out.alone, 3)
    # a light rerun waits behind heavy work for no more than ~0.2 s beyond its own cost (0.1 s more on a loaded CI)
    assert max(out.bystander) <= out.alone + 0.3, (out.alone, sorted(out.bystander)[-5:])


CYCLED = ("builtin:lstm-lm", "builtin:gru-lm", "builtin:rnn-lm", "builtin:lstm-lm-wordnet", "builtin:gru-lm-wordnet",
          "builtin:rnn-lm-wordnet", "builtin:tiny-gpt")


def test_cycling_models_by_link_and_asking_to_unload_the_classs_models_do_not_stall_the_class(server) -> None:
    """Issue 41, item 2: a student opens seven models by link again and again for 20 s, each in a new session (as a
    script reloading ?model= links does), and asks the Models page to unload a model of the class. The class's
    models stay loaded once loaded (never evicted to make room, and no session may unload them), so the cycling costs
    page runs, not loads: the other session keeps its pace and the server's memory does not grow."""
    async def attack(pause: asyncio.Event) -> dict:
        pause.set()  # the first load of each model is not the attack
        for mid in CYCLED:
            async with Session(server[0], "lstm-gates", query(model=mid, text="the dog runs")) as s:
                no_exception(await s.rerun())
        loaded = tree_rss_bytes(server[1].pid)  # every cycled model loaded once
        pause.clear()
        opens, start = 0, time.monotonic()
        while time.monotonic() - start < 20:
            async with Session(server[0], "lstm-gates", query(model=CYCLED[opens % len(CYCLED)],
                                                             text="the dog runs")) as s:
                no_exception(await s.rerun())
            opens += 1
        async with Session(server[0], "catalogue") as mallory:
            page = await mallory.rerun()
            offered = "unload_pick" in mallory.widget_ids or "Unload model" in mallory.widget_labels
        return {"opens": opens, "unload_offered": offered, "page": messages(page), "loaded_rss": loaded}

    out = under_attack(server, "cycling 7 models by link for 20 s", attack)
    out.check()
    FIGURES[out.name]["opens"] = out.result["opens"]
    assert out.result["opens"] >= 20 and not out.result["unload_offered"]
    assert "never a session" in out.result["page"]
    FIGURES[out.name]["rss_with_the_models_loaded_mb"] = out.result["loaded_rss"] >> 20
    print(FIGURES[out.name])
    assert out.rss_after - out.result["loaded_rss"] < 100 * 2**20, (out.result["loaded_rss"] >> 20, out.rss_after >> 20)


def test_two_hundred_sessions_over_every_view_leave_the_replica_as_they_found_it(server) -> None:
    """Issue 41, items 1 and 6: 200 sessions open and close, two at a time, every view at its defaults (on the real
    model where it is the default). The class's models stay loaded once loaded and each closed tab's session is shut
    down after its reconnect window, so the server's memory stays under the replica's limit and comes back (it was
    1.8 -> 9.1 GB at ~140 sessions when each view's model pushed another out)."""
    figures = asyncio.run(churn(server[0], server[1].pid, 200, reconnect_s=RECONNECT_S))
    FIGURES["200 sessions over every view"] = figures
    print(figures)
    rss = figures["rss_mib"]
    assert rss["peak"] < REPLICA_LIMIT // 2**20, rss
    assert rss["closed"] - rss["warm"] < 100, rss  # the RSS once every view had run once, ± 100 MB


def test_an_uploaded_model_loaded_and_released_gives_its_memory_back(server) -> None:
    """Issue 41, item 1: a session uploads a ~100 MB model, opens it in a view and closes; twice. Its upload and the
    model loaded from it are dropped when its session ends, and the freed pages go back to the system (malloc_trim):
    the server's RSS after each cycle is the RSS before, within 50 MB (it grew by ~260 MB a cycle)."""
    figures = asyncio.run(reload(server[0], server[1].pid, 2, reconnect_s=RECONNECT_S))
    FIGURES["a 100 MB upload loaded and released, twice"] = figures
    print(figures)
    before, *after = figures["rss_mib"]
    assert all(abs(a - before) < 50 for a in after), figures["rss_mib"]


@needs_smollm2
@pytest.mark.parametrize("page, params", [
    ("decoding-strategies", {"max_new": "100"}),  # 100 new tokens, every strategy: ~15 s of a core
    # integrated gradients of the prediction, to 1 %: 5-15 s (SmolLM2's default method is LRP, 0.3 s: named here)
    ("token-attribution", {"steps": "1024", "method": "integrated gradients"}),
])
def test_a_closed_tab_stops_its_work_within_a_second(server, page: str, params: dict) -> None:
    """Issue 41, item 4: a student starts long work on SmolLM2 and closes the tab a second in: the work stops at its
    next progress report (explorer.ui.cache.abandoned, besides Streamlit's own stop), so the server's CPU goes
    quiet."""
    base, proc = server

    async def close_mid_run() -> tuple[float, float]:
        s = Session(base, page, query(model="pretrained:smollm2", text="The cat", **params))
        await s.connect()
        await s.rerun(timeout=240)  # the model loaded, the first run done
        running = asyncio.create_task(s.set_text("text", "The old dog walked slowly along the", timeout=240))
        await asyncio.sleep(1.5)
        assert not running.done()
        busy = cpu_seconds(proc.pid)
        await s.close()
        with contextlib.suppress(Exception):
            await running  # its websocket is gone
        await asyncio.sleep(1.0)
        after_a_second = cpu_seconds(proc.pid)
        await asyncio.sleep(3.0)
        return after_a_second - busy, cpu_seconds(proc.pid) - after_a_second

    first_second, next_three = asyncio.run(close_mid_run())
    FIGURES[f"a closed tab's {page} on SmolLM2"] = {"cpu_s_in_the_second_after": round(first_second, 2),
                                                    "cpu_s_in_the_3_s_after_that": round(next_three, 2)}
    print(FIGURES[f"a closed tab's {page} on SmolLM2"])
    assert next_three < 0.5, (first_second, next_three)  # work still running would take ~3 s of CPU here


def test_a_ten_megabyte_sentence_over_the_websocket_is_refused_on_the_server(server) -> None:
    async def attack() -> Run:
        async with Session(server[0], "lstm-gates", query(model="builtin:lstm-lm", text="the dog runs")) as s:
            await s.rerun()
            run = await s.set_text("text", "the dog runs " * 800_000)
            no_exception(run)
            return run

    out = under_attack(server, "10 MB sentence over the websocket", attack)
    out.check()
    assert re.search(r"20,000 characters", messages(out.result)), messages(out.result)[-2000:]
    assert out.seconds < scaled(5)
    assert out.rss_peak - out.rss_before < 300 * 2**20


def _wrong_values() -> dict[str, Any]:
    """Widget states of every kind a script can put on the websocket, several not finite or not parsing."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    ints, doubles = WidgetState(), WidgetState()
    ints.int_array_value.data.extend([5, 99])
    doubles.double_array_value.data.extend([float("nan"), 1e308])
    return {"text": dict(string_value="x"), "NaN": dict(double_value=float("nan")), "inf": dict(double_value=1e999),
            "number": dict(double_value=2.5), "int": dict(int_value=99_999), "bool": dict(bool_value=True),
            "ints": ints, "doubles": doubles, "json": dict(json_value="{not json")}


@pytest.mark.parametrize("page, params", [
    ("positional-encodings", {}),  # number boxes, sliders, selects, radios, toggles, text boxes
    ("lstm-gates", {"model": "builtin:lstm-lm", "text": "the dog runs"}),  # the live sentence box (JSON), tokens
    ("token-attribution", {"model": "builtin:tiny-gpt", "text": "the dog runs"}),  # "steps", where NaN stuck
])
def test_widget_values_of_the_wrong_kind_over_the_websocket_are_ignored_with_a_message(server, page, params) -> None:
    """Every widget of the page gets every wrong kind of value, in a new session per widget: no run raises, each value
    is ignored with a message naming the control, and the next rerun of that session is clean (issue 41, item 5), so
    the next wrong value meets a clean session again."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    async def attack() -> list[str]:
        async with Session(server[0], page, query(**params)) as s:
            first = await s.rerun()
            no_exception(first)
            widgets = dict(s.widget_ids)
        assert len(widgets) >= 3, widgets
        seen = []
        for key, wid in widgets.items():
            async with Session(server[0], page, query(**params)) as s:
                await s.rerun()
                for kind, value in _wrong_values().items():
                    state = WidgetState(**value) if isinstance(value, dict) else WidgetState()
                    if not isinstance(value, dict):
                        state.CopyFrom(value)
                    state.id = wid
                    s.states = {wid: state}
                    run = await s.rerun(s.fragments.get(wid, ""))
                    assert run.status == "ok", (key, kind, run.status)
                    if "Ignored a value sent for" in run.text():
                        seen.append(f"{key}: {kind}")
                        assert f"“{key}”" in run.text().replace("\\", "")  # Markdown-escaped on screen
                    s.states = {}
                    again = await s.rerun()
                    assert again.status == "ok" and "Ignored a value" not in again.text(), (key, kind)
        return seen

    out = under_attack(server, f"wrong widget values on {page}", attack)
    out.check()
    assert len(out.result) >= len(_wrong_values()), out.result  # a number box alone refuses most of them


# ----------------------------------------------------------------------------------------- cross-talk
def test_one_sessions_uploads_are_neither_listed_nor_evicted_by_another(server) -> None:
    mine = [("alices-secret-model.safetensors", safetensors_bytes(lstm_state_dict(10, emb=4))),
            ("vocab.json", json.dumps(["<pad>", "<unk>", "<bos>", "<eos>", "a", "the", "dog", "runs", "cat",
                                       "b"]).encode())]

    async def attack() -> dict:
        alice = Session(server[0], "catalogue")
        await alice.connect()
        await alice.rerun()
        _, run = await add_to_catalogue(alice, mine)
        uid = UPLOAD_ID.findall(messages(run))[0]
        async with Session(server[0], "catalogue") as mallory:
            await mallory.rerun()
            for i in range(10):  # more uploads than a server used to keep in all
                _, seen = await add_to_catalogue(mallory, [(f"m{i}.safetensors",
                                                            safetensors_bytes(lstm_state_dict(10, emb=4 + i))),
                                                           mine[1]])
            listed = messages(seen)
        alice.page, alice.query, alice.states = "lstm-gates", query(model=uid, text="the dog runs"), {}
        still = await alice.rerun()
        await alice.close()
        return {"uid": uid, "mallory_sees": listed, "alice_run": still}

    out = under_attack(server, "uploads of one session against another's", attack)
    out.check()
    assert "alices-secret-model" not in out.result["mallory_sees"]
    assert out.result["uid"] not in out.result["mallory_sees"]
    no_exception(out.result["alice_run"])
    assert "no longer on the server" not in messages(out.result["alice_run"])
    assert "dog" in messages(out.result["alice_run"])


# ------------------------------------------------------------------------------------------ links
INJECTIONS = {"model": "hf:[Login](https://evil.example/a)", "lesson": "[Login](https://evil.example/l)",
              "lesson_step": "![x](https://evil.example/s.png)", "nn": "![x](https://evil.example/t.png)"}
UNESCAPED = re.compile(r"(?<!\\)\]\((?:https?:)?//evil|<img|<a\s", re.I)


@pytest.mark.parametrize("page, param", [("self-attention", "model"), ("lstm-gates", "lesson"),
                                         ("lstm-gates", "lesson_step"), ("word-embeddings", "nn")])
def test_a_shared_link_cannot_put_a_link_or_an_image_on_the_page(server, page: str, param: str) -> None:
    async def attack() -> Run:
        async with Session(server[0], page, query(**{param: INJECTIONS[param]})) as s:
            run = await s.rerun()
            no_exception(run)
            return run

    out = under_attack(server, f"markdown in ?{param}= on {page}", attack)
    out.check()
    found = [m.group(0) for text in out.result.strings for m in UNESCAPED.finditer(text)]
    assert not found, found


def test_seven_strategies_in_a_link_do_not_crash_the_decoding_page(server) -> None:
    seven = "greedy,temperature,top-k,top-p,typical,min-p,beam"

    async def attack() -> Run:
        async with Session(server[0], "decoding-strategies",
                           query(model="builtin:tiny-gpt", strategies=seven, text="the dog")) as s:
            return await s.rerun()

    out = under_attack(server, "seven strategies in ?strategies=", attack)
    out.check()
    no_exception(out.result)


# ------------------------------------------------------------------------------------------- training
def distinct_words(n: int) -> str:
    """n distinct lowercase words ('a', 'b', …, 'ba', …), each twice, as a text to train on."""
    def word(i: int) -> str:
        out = ""
        while True:
            out, i = chr(97 + i % 26) + out, i // 26
            if not i:
                return out
    words = [word(i) for i in range(n)]
    return " ".join(words + words[::-1])


async def start_training(s: Session, text: str | None, minutes: float = 0.25) -> Run:
    """On the Models page: pick the corpus (my text, or the generated English), the time limit, press Start."""
    s.set_state("train_corpus", string_value="My text" if text is not None else "Generated English")
    await s.rerun()
    if text is not None:
        s.set_state("train_text", string_value=text)
    s.set_state("train_minutes", double_value=minutes)
    await s.rerun()
    return await s.click("train_start")


def test_training_on_a_huge_vocabulary_stays_in_its_budget_and_frees_the_slot_when_the_tab_closes(server) -> None:
    text = distinct_words(100_000)  # 963,443 characters: within the 1,000,000 the page takes (issue 57)

    async def attack() -> dict:
        mallory = Session(server[0], "catalogue")
        await mallory.connect()
        await mallory.rerun()
        started = await start_training(mallory, text)
        await asyncio.sleep(2)
        await mallory.close()  # the tab closes while the job trains
        closed = time.perf_counter()
        async with Session(server[0], "catalogue") as alice:
            await alice.rerun()
            for _ in range(20):  # the slot is free again within a couple of seconds
                run = await start_training(alice, None, minutes=0.1)
                if "The training slot is taken" not in messages(run):
                    break
                await asyncio.sleep(0.25)
            freed = time.perf_counter() - closed
            stop = alice.widget_ids.get("train_stop") or alice.widget_labels.get("Stop training")
            if stop:
                await alice.click("train_stop")
        return {"started": started, "alice": run, "freed_s": freed}

    out = under_attack(server, "training on 100,000 distinct words, then closing the tab", attack)
    out.check()
    no_exception(out.result["started"])
    assert "EXPLORER_MAX_TRAIN_VOCAB" in messages(out.result["started"]).replace("\\_", "_"), \
        messages(out.result["started"])[-2000:]
    assert "The training slot is taken" not in messages(out.result["alice"])
    FIGURES[out.name]["slot_free_after_close_s"] = round(out.result["freed_s"], 2)
    assert out.result["freed_s"] < scaled(5)
    assert out.rss_peak - out.rss_before < 800 * 2**20


def test_a_finished_training_job_costs_no_cpu_while_its_tab_stays_open_and_an_hour_is_refused(server) -> None:
    async def attack(pause: asyncio.Event) -> dict:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            hour = await start_training(s, None, minutes=60)  # the form's old maximum, sent as a raw widget value
            await s.drain()
            await s.click("train_stop")  # (the job it started is stopped: one job per session at a time)
            for _ in range(60):
                await asyncio.sleep(0.5)
                await s.drain(0.2)
                if "train_stop" not in (await s.rerun()).keys:
                    break
            started = await start_training(s, None, minutes=0.1)
            assert "The training slot is taken" not in messages(started), messages(started)[-1000:]
            for _ in range(120):  # until the job is done (no Stop button) and its download button drawn
                await asyncio.sleep(1)
                await s.drain(0.2)
                done = await s.rerun()
                if "train_download" in done.keys and "train_stop" not in done.keys:
                    break
            await s.drain()
            pause.set()  # the other session stops typing: the server alone
            await asyncio.sleep(0.5)
            before = cpu_seconds(server[1].pid)
            await asyncio.sleep(5)  # the finished job's panel stays open in this tab
            idle = cpu_seconds(server[1].pid) - before
            pause.clear()
            return {"hour": hour, "done": done, "idle_cpu_s": idle}

    out = under_attack(server, "a finished training job's tab left open; an hour asked for", attack)
    out.check()
    # an out-of-range value is not taken (Streamlit resets the field): the job that starts trains at most the
    # server's limit (EXPLORER_MAX_TRAIN_SECONDS, 180 s by default), never an hour
    limits = [float(x) for x in re.findall(r"at most ([\d.]+) s\)", messages(out.result["hour"]))]
    assert limits and max(limits) <= 180, messages(out.result["hour"])[-2000:]
    no_exception(out.result["done"])
    FIGURES[out.name]["server_cpu_s_over_5_s_idle"] = round(out.result["idle_cpu_s"], 2)
    assert out.result["idle_cpu_s"] < 0.5, out.result["idle_cpu_s"]  # a zip rebuilt every second cost 5.2 s each


# ---------------------------------------------------------------------------------------------- issue 57: one link
HELD = re.compile(r"([\d,]+) MB of weights held of a budget of ([\d,]+) MB")


async def held_weights(base: str) -> tuple[int, int, list[str]]:
    """What the Models page says the server holds: (MB of weights, the budget in MB, its text)."""
    async with Session(base, "catalogue") as s:
        run = await s.rerun()
    text = messages(run).replace("\\", "")
    found = HELD.search(text)
    assert found, text[-1500:]
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", "")), text


@needs_smollm2
def test_links_comparing_every_model_on_three_views_load_no_copy_and_change_no_default(server) -> None:
    """Issue 57, items 1-3 and 7, replayed: `compare=` cycled through every offline catalogue model on the masked
    words, the logit lens and the recurrent cell, each link in a new session (the view's own model too). A model a
    view cannot use is refused from the catalogue's knowledge, never loaded (SmolLM2 as a masked LM was loaded, 513
    MB, and kept); the weights held stay under the budget; a new session of each view opens on its default model."""
    from explorer.loading.catalogue import catalogue

    ids = [e.id for e in catalogue() if e.id.startswith(("builtin:", "pretrained:"))]
    views = (("masked-words", "the keys to the [MASK] are here"), ("logit-lens", "the keys to the cabinet are"),
             ("lstm-gates", "the keys to the cabinet are"))

    async def cycle() -> tuple[int, int, int]:
        refused, shown, runs = 0, 0, 0
        for page, text in views:
            for mid in ids:
                async with Session(server[0], page, query(compare=mid, text=text)) as s:
                    run = await s.rerun()
                no_exception(run)
                said = messages(run).replace("\\", "")
                refused += "cannot open in this view" in said
                shown += "is the model shown" in said
                runs += 1
        return refused, shown, runs

    async def attack(pause: asyncio.Event) -> dict:
        before = await held_weights(server[0])
        pause.set()  # the first pass loads what may be compared, once: a student's first use, not the attack
        await cycle()
        loaded = await held_weights(server[0])
        pause.clear()
        refused, shown, runs = await cycle()  # the cycling itself: page runs, no load
        after = await held_weights(server[0])
        defaults = {}
        for page, _ in views:
            async with Session(server[0], page) as s:
                defaults[page] = messages(await s.rerun()).replace("\\", "")
        return {"before": before, "loaded": loaded, "after": after, "refused": refused, "shown": shown,
                "runs": runs, "defaults": defaults}

    out = under_attack(server, f"compare= cycled through {len(ids)} models on 3 views", attack)
    out.check()
    r = out.result
    FIGURES[out.name].update({"links": r["runs"], "refused_from_the_catalogue": r["refused"],
                              "weights_held_mb_before": r["before"][0], "after_the_first_pass": r["loaded"][0],
                              "weights_held_mb_after": r["after"][0], "budget_mb": r["after"][1]})
    print(FIGURES[out.name])
    assert r["refused"] >= len(ids) and r["shown"] >= 2  # the lens's and the cell's own models are said
    assert r["after"][0] <= r["after"][1], r["after"][:2]  # the byte budget holds
    assert r["after"][1] == 1024  # the manifests' budget
    assert out.rss_peak < REPLICA_LIMIT
    assert "pretrained:smollm2" in r["defaults"]["logit-lens"]  # another student's defaults are the class's
    assert "pretrained:minilm-mlm" in r["defaults"]["masked-words"]
    assert "lstm-lm-wordnet" in r["defaults"]["lstm-gates"]


@pytest.mark.parametrize("raw", ["inf", "-inf", "1e400"])
def test_a_training_step_of_inf_is_a_message_not_a_traceback(server, raw: str) -> None:
    """Issue 57, item 3, replayed: ?train_step=inf (and -inf, 1e400) raised OverflowError with a server path on
    every rerun; it is now refused like any URL value, and the view opens at the trained model."""
    async def attack() -> tuple[Run, Run]:
        async with Session(server[0], "lstm-gates", query(model="builtin:lstm-lm", train_step=raw)) as s:
            return await s.rerun(), await s.rerun()

    run, again = asyncio.run(attack())
    no_exception(run)
    no_exception(again)  # every rerun while the URL held it raised
    said = messages(run).replace("\\", "")
    assert f"Ignoring ?train_step={raw}: not a value this control takes" in said
    assert "Traceback" not in said and "/explorer/" not in said and ".py" not in said


def test_a_five_megabyte_paste_is_cut_to_the_limit_read_once_and_costs_reruns_nothing(server) -> None:
    """Issue 57, item 5, replayed: 4,999,000 characters pasted into the training text box (sent over the websocket:
    a browser stops at the box's 1,000,000) were read on every rerun, 7.7-15.5 s each. Now the box keeps its
    first 1,000,000 characters, read once, and later reruns of the page cost what they cost without it (within
    0.3 s)."""
    async def attack() -> dict:
        async with Session(server[0], "catalogue") as s:
            await s.rerun()
            s.set_state("train_corpus", string_value="My text")
            plain = [(await s.rerun()).seconds for _ in range(3)]
            s.set_state("train_text", string_value="the dog runs . " * 333_267)  # 4,999,005 characters
            first = await s.rerun()
            again = [(await s.rerun()).seconds for _ in range(3)]
        return {"plain": plain, "first": first, "again": again}

    out = under_attack(server, "a 5 MB paste in the training box, then reruns", attack)
    out.check()
    r = out.result
    no_exception(r["first"])
    # the box takes its first 1,000,000 characters (Streamlit cuts a longer value on the server): 66,667 sentences
    assert "66,667 sentences, 266,667 tokens" in messages(r["first"]), messages(r["first"])[-300:]
    FIGURES[out.name].update({"rerun_s_without": round(min(r["plain"]), 3), "first_s": round(r["first"].seconds, 3),
                              "rerun_s_with": round(min(r["again"]), 3)})
    print(FIGURES[out.name])
    assert min(r["again"]) < min(r["plain"]) + 0.3, (r["plain"], r["again"])


def test_a_lesson_with_script_links_and_a_right_to_left_override_is_shown_inert(server) -> None:
    """Issue 57, item 6, replayed: a lesson uploaded on the Lessons page whose caption links to javascript:,
    data: and vbscript: targets and whose titles hold U+202E. The page draws the links' text only (an https link and
    an in-app link stay links) and shows ⟨U+202E⟩ where the control was."""
    from test_one_link import LESSON

    async def attack() -> Run:
        async with Session(server[0], "lesson-plans") as s:
            await s.rerun()
            _, run = await s.upload("_lesson_upload", [("hostile.yaml", LESSON.encode())])
            return run

    run = asyncio.run(attack())
    no_exception(run)
    shown = messages(run)
    assert "Caption test ⟨U+202E⟩exe.live" in shown.replace("\\", "") and "\u202e" not in shown
    assert not re.search(r"\]\(\s*(javascript|data|vbscript)", shown, re.I), shown[-2000:]
    assert "[the docs](https://example.org/a_(b))" in shown and "[step 2](/lstm-gates?model=builtin:lstm-lm)" in shown
