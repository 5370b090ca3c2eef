"""The server alone, without browsers: simulated sessions over Streamlit's websocket protocol (testkit/st_protocol.py).

Fast: the cross-talk detector finds a sentence however a view draws it (chart axes, JSON escapes, HTML), and
flags another session's. Slow: nine sessions on a fresh server (three per view) open their view at the same
moment and type new sentences; none may fail, each must see its own sentence and no other. Opening together is
what found the lazy-import race of transformers (explorer/runtime/hf_runtime.py).
"""
from __future__ import annotations

import asyncio
import json

import pytest

from testkit.serve_scenario import VIEWS, sentence, sentences_drawn, simulate
from testkit.st_protocol import Run


def _run(*strings: str) -> Run:
    return Run(0.1, "ok", list(strings), len(strings), "")


def test_the_detector_reads_every_way_a_view_draws_a_sentence() -> None:
    s = sentence(0)
    words = s.split()
    axis = json.dumps({"x": [f"{i} · {w}" for i, w in enumerate(["<bos>", *words])]})  # recurrent cell
    heads = json.dumps({"y": ["[CLS]", *words, "[SEP]"]})  # self-attention (MiniLM pieces)
    prompt = "<span style='opacity:0.55'>&lt;bos&gt; " + s + "</span> <wbr><span title='-1.2'>and</span>"
    for drawn in (axis, heads, prompt, f"Prompt as the model reads it: <bos> · {' · '.join(words)}"):
        assert sentences_drawn(_run(drawn)) == {s}, drawn
    assert sentences_drawn(_run(s.replace("old", "new"))) == set()
    assert sentences_drawn(_run(axis, heads.replace(words[1], "zebra"))) == {s, s.replace(words[1], "zebra")}


def test_sentences_of_a_run_are_distinct() -> None:
    assert len({sentence(k) for k in range(3000)}) == 3000


@pytest.mark.slow
@pytest.mark.serial  # timed against a server: alone
def test_sessions_opening_together_each_see_only_their_own_sentence() -> None:
    from testkit.browser import streamlit_process

    with streamlit_process() as (base, proc):
        result = asyncio.run(simulate(base, 9, duration=12, think=(0.5, 1.5), server_pids=(proc.pid,)))
    print("\n" + result.row())
    assert result.errors == [], result.errors
    assert result.cross_talk == [], result.cross_talk
    assert len(result.opens) == 9
    for view in VIEWS:
        assert result.stats(view)["reruns"] >= 3, view
    assert {r.session for r in result.reruns} == set(range(9))
