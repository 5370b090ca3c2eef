"""What a class does to one replica's memory: scenarios run against a real server over Streamlit's protocol, shared
by bench/bench_memory.py (figures) and tests/test_hostile_student.py (limits). Each returns its figures (RSS in MiB)."""
from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from testkit.load_scenario import RssSampler, tree_rss_bytes
from testkit.st_protocol import Run, Session, query

UPLOAD_ID = re.compile(r"upload:[0-9a-f]{8,}")


async def add_to_catalogue(s: Session, files: list[tuple[str, bytes]]) -> tuple[list[int], Run]:
    """Upload `files` on the Models page and press "Add to the catalogue" (when the button is drawn)."""
    statuses, run = await s.upload("upload_files", files)
    if "Add to the catalogue" in s.widget_labels or "upload_add" in s.widget_ids:
        run = await s.click("upload_add" if "upload_add" in s.widget_ids else "Add to the catalogue")
    return statuses, run


MiB = 2**20


def views() -> list[str]:
    from explorer.views import VIEWS

    return [v.url_path for v in VIEWS]


def window(reconnect_s: float | None = None) -> float:
    """Seconds until a closed tab's session is shut down (explorer.ui.reconnect: `reconnect_s`, by default the
    server's EXPLORER_RECONNECT_S as this process's environment has it, else 30), and 3 more for its sweep."""
    return (reconnect_s if reconnect_s is not None else float(os.environ.get("EXPLORER_RECONNECT_S") or 30)) + 3


async def settle(pid: int, seconds: float) -> int:
    """RSS after `seconds` of quiet, bytes."""
    await asyncio.sleep(seconds)
    return tree_rss_bytes(pid)


async def churn(base: str, pid: int, sessions: int, at_once: int = 2, reconnect_s: float | None = None) -> dict:
    """`sessions` sessions, `at_once` at a time, each opening one view at its defaults (every view in turn), running
    it once and closing; RSS after every view's first run ("warm"), every 25 sessions and after they have all closed
    (and their reconnect window, `reconnect_s`, has passed)."""
    pages, seconds, rss = views(), [], {"start": tree_rss_bytes(pid) // MiB}
    warm, filled = {}, {}
    for page in pages:  # each view's first run (its models loaded, its defaults computed) is not the churn
        async with Session(base, page) as s:
            t0 = time.perf_counter()
            await s.rerun(timeout=600)
            warm[page] = round(time.perf_counter() - t0, 2)
        filled[page] = tree_rss_bytes(pid) // MiB  # what each view's models and first results add to the replica
        print(f"opened {page}: {filled[page]} MiB", flush=True)
    rss["warm"] = tree_rss_bytes(pid) // MiB
    print(f"every view opened once: {rss['warm']} MiB ({warm})", flush=True)
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        async with Session(base, pages[i % len(pages)]) as s:
            seconds.append((await s.rerun(timeout=600)).seconds)
        done += 1
        if done % 25 == 0:
            rss[str(done)] = tree_rss_bytes(pid) // MiB
            print(f"{done} sessions: {rss[str(done)]} MiB", flush=True)

    with RssSampler(pid, 0.2) as sampler:
        for start in range(0, sessions, at_once):
            await asyncio.gather(*(one(i) for i in range(start, min(sessions, start + at_once))))
    rss["peak"] = sampler.max_sampled // MiB
    rss["closed"] = (await settle(pid, window(reconnect_s))) // MiB
    print(f"all closed: {rss['closed']} MiB (peak {rss['peak']} MiB)", flush=True)
    return {"sessions": sessions, "views": len(pages), "rss_mib": rss, "rss_after_view_mib": filled,
            "first_run_s": warm,
            "rerun_p50_s": round(statistics.median(seconds), 2), "rerun_max_s": round(max(seconds), 2)}


def big_lstm(seed: int = 0, vocab: int = 50_000, width: int = 256) -> list[tuple[str, bytes]]:
    """An LSTM language model of ~100 MB (its embedding and output layer over `vocab` words) with its vocab.json;
    another `seed`, other weights (another upload)."""
    import torch
    from safetensors.torch import save

    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(width, width, batch_first=True)
    state = {"emb.weight": torch.randn(vocab, width), "fc.weight": torch.randn(vocab, width),
             "fc.bias": torch.zeros(vocab)}
    state.update({f"lstm.{k}": v.detach().clone() for k, v in lstm.state_dict().items()})
    words = ["<pad>", "<unk>", "<bos>", "<eos>", "the", "dog", "runs"] + [f"w{i}" for i in range(7, vocab)]
    return [("big-lstm.safetensors", save(state)), ("vocab.json", json.dumps(words).encode())]


async def reload(base: str, pid: int, cycles: int, reconnect_s: float | None = None) -> dict:
    """Each cycle: a session uploads the ~100 MB LSTM on the Models page, opens it in the recurrent-cell view, and
    closes; its upload and the model loaded from it are then released. RSS before the first and after each."""
    for page, q in (("lstm-gates", query(model="builtin:lstm-lm", text="the dog runs")), ("catalogue", "")):
        async with Session(base, page, q) as s:  # the pages' own models (the Models page's MiniLM) loaded first
            await s.rerun(timeout=600)
    rss = [(await settle(pid, window(reconnect_s))) // MiB]
    print(f"before: {rss[0]} MiB", flush=True)
    peaks = []
    for c in range(cycles):
        files = big_lstm(seed=c)
        with RssSampler(pid, 0.1) as sampler:
            async with Session(base, "catalogue") as s:
                await s.rerun(timeout=600)
                statuses, run = await add_to_catalogue(s, files)
                found = UPLOAD_ID.findall(" ".join(run.strings) + " " + s.query)
                assert found and all(200 <= x < 300 for x in statuses), (statuses, run.strings[-5:])
                async with Session(base, "lstm-gates", query(model=found[0], text="the dog runs")) as view:
                    view.cookies = s.cookies
                    seen = await view.rerun(timeout=600)
        peaks.append(sampler.max_sampled // MiB)
        rss.append((await settle(pid, window(reconnect_s))) // MiB)
        print(f"cycle {c + 1}: peak {peaks[-1]} MiB, after {rss[-1]} MiB ({seen.status})", flush=True)
    return {"upload_mb": round(sum(len(d) for _, d in files) / MiB, 1), "rss_mib": rss, "peak_mib": peaks,
            "kept_after_last_mib": rss[-1] - rss[0]}


async def uploads(base: str, pid: int, size_mb: int = 240) -> dict:
    """Six sessions PUT a `size_mb` file each at once; then one session PUTs four; then every session closes."""
    blob = bytes(size_mb * MiB)
    out: dict = {"rss_start_mib": tree_rss_bytes(pid) // MiB}
    with RssSampler(pid, 0.05) as sampler:
        t0 = time.perf_counter()
        sessions, statuses = await put_at_once(base, 6, blob)
        out["six_at_once"] = {"statuses": statuses, "seconds": round(time.perf_counter() - t0, 2)}
    out["six_at_once"]["peak_mib"] = sampler.max_sampled // MiB
    out["six_at_once"]["held_mib"] = tree_rss_bytes(pid) // MiB
    print(f"six at once: {out['six_at_once']}", flush=True)
    for s in sessions:
        await s.close()
    out["rss_after_close_mib"] = (await settle(pid, 10)) // MiB
    one = Session(base, "catalogue")
    await one.connect()
    await one.rerun(timeout=600)
    names = [f"big{i}.safetensors" for i in range(4)]
    with RssSampler(pid, 0.05) as sampler:
        statuses = [put(one, url, blob) for _, url in await one.upload_urls(names)]
    out["four_in_one_session"] = {"statuses": statuses, "peak_mib": sampler.max_sampled // MiB,
                                  "held_mib": tree_rss_bytes(pid) // MiB}
    print(f"four in one session: {out['four_in_one_session']}", flush=True)
    await one.close()
    out["rss_150s_after_close_mib"] = (await settle(pid, 150)) // MiB
    print(f"150 s after the last tab closed: {out['rss_150s_after_close_mib']} MiB", flush=True)
    return out


async def put_at_once(base: str, n: int, blob: bytes) -> tuple[list[Session], list[int | str]]:
    """`n` sessions open the Models page, then each PUTs `blob` to an upload URL of its own, all at once (a thread
    each; the event loop keeps serving other tasks). Returns the sessions, still open, and each PUT's status."""
    sessions = [Session(base, "catalogue") for _ in range(n)]
    for s in sessions:
        await s.connect()
        await s.rerun(timeout=600)
    urls = [(await s.upload_urls(["big.safetensors"]))[0][1] for s in sessions]
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(n) as pool:
        statuses = await asyncio.gather(*(loop.run_in_executor(pool, put, s, url, blob)
                                          for s, url in zip(sessions, urls)))
    return sessions, list(statuses)


def put(s: Session, url: str, blob: bytes) -> int | str:
    """The status of one PUT, or the connection error when the server answered before the body was sent."""
    try:
        return s.put_file(url, "big.safetensors", blob, timeout=300)
    except OSError:  # refused from its declared length: the server answered and closed while the body was sent
        return "closed mid-body"


