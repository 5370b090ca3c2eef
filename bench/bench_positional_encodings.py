"""Timing of the positional-encodings view: is a control change close to the bare cost?

For each panel, a control is changed to a value not seen before (so nothing is served from the cache) and the
page is rerun with AppTest. Printed per panel (medians of RUNS runs, milliseconds):
  A probes       the probe functions the change needs, called directly (no Streamlit)
  B +figs        A plus building the panel's Plotly figures from the results (no Streamlit)
  R home         a rerun of the trivial page (app_pages/overview.py) through app.py
  page rerun     the positional-encodings page rerun after the control change (AppTest), as the browser asks for
                 it: the whole page, or only the st.fragment holding the control (marked "fragment"; the full-page
                 rerun is printed below the table for those)
  /(A+R), /(B+R) page rerun divided by (A + R) and by (B + R); the issue's target is < 1.5 for /(A+R)

Run: python bench/bench_positional_encodings.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Callable

from _common import open_page  # noqa: E402  (sets the environment first, tests/ on the path)
from testkit.fragments import fragment_ids, page_states, run_fragment  # noqa: E402

PAGE = "app_pages/positional_encodings.py"


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    runs = max(5, args.runs)

    from explorer.probes import position_formulas as PF
    from explorer.probes import positional_encodings as P
    from explorer.loading.pretrained import minilm_dir
    from explorer.loading.loaders import load_model

    home = open_page()
    home.run()
    bare_rerun = statistics.median(timed(home.run) for _ in range(runs))

    # (panel, control, URL params, widget getter, values, probe work for a value, probe + figures for a value)
    from explorer.viz import positional_encodings as V
    from explorer.viz.theme import NORMAL as T

    def sin_view(n: int, d: int, b: float, pos: int = 10, i: int = 4) -> None:
        tr = PF.sinusoidal(n, d, b)
        PF.formula_values(tr, pos, i)
        V.pe_heatmap(tr.pe, T, "", mark=(pos, 2 * i))
        V.wavelengths(tr.wavelength, T, n, i)

    def sim_view(n: int, d: int, b: float, k: int, pos: int = 10) -> None:
        sim = PF.similarity(PF.sinusoidal(n, d, b).pe, "dot")
        rot = PF.rotation_check(n, d, b, k)
        V.matrix_heatmap(sim, T, "", "position", "position")
        V.similarity_line(sim, pos, T, "dot")
        V.rotation_block(rot.R, T)
        V.rotation_errors(rot.errors, rot.angles, k, T)

    def rope_view(pos: int) -> None:
        rt = PF.rope(128, 100, 10000.0, pos, "ones", 0)
        V.rope_pairs(rt.q, rt.q_rot, rt.angles, pos, T)
        V.rope_scores(rt.offsets, rt.starts, rt.scores, T)

    minilm = load_model("pretrained:minilm") if minilm_dir() is not None else None
    cases: list[tuple] = [
        ("sinusoidal", "d_model", {}, lambda at: at.number_input(key="d_model"), [130 + 2 * r for r in range(runs)],
         lambda v: PF.sinusoidal(100, v, 10000.0), lambda v: sin_view(100, v, 10000.0)),
        ("sinusoidal", "base", {}, lambda at: at.number_input(key="base"), [5000.0 + 17 * r for r in range(runs)],
         lambda v: PF.sinusoidal(100, 128, v), lambda v: sin_view(100, 128, v)),
        ("sinusoidal", "pos", {}, lambda at: at.slider(key="pos"), [20 + r for r in range(runs)],
         lambda v: PF.sinusoidal(100, 128, 10000.0), lambda v: sin_view(100, 128, 10000.0, v)),
        ("similarity", "k", {"panel": "similarity"}, lambda at: at.slider(key="k"), [20 + r for r in range(runs)],
         lambda v: PF.rotation_check(100, 128, 10000.0, v), lambda v: sim_view(100, 128, 10000.0, v)),
        ("similarity", "d_model", {"panel": "similarity"}, lambda at: at.number_input(key="d_model"),
         [200 + 2 * r for r in range(runs)],
         lambda v: (PF.similarity(PF.sinusoidal(100, v, 1e4).pe, "dot"), PF.rotation_check(100, v, 1e4, 5)),
         lambda v: sim_view(100, v, 10000.0, 5)),
        ("rope", "pos", {"panel": "rope"}, lambda at: at.slider(key="pos"), [40 + r for r in range(runs)],
         lambda v: PF.rope(128, 100, 10000.0, v, "ones", 0), rope_view),
    ]
    if minilm is not None:
        lt, la = P.learned_positions(minilm), P.learned_analysis(minilm)

        def learned_view(pos: int) -> None:
            V.pe_heatmap(lt.weight, T, "")
            V.matrix_heatmap(la.dot, T, "", "position", "position")
            V.similarity_line(la.dot, pos, T, "dot")
            V.pca_positions(la.coords, la.explained, T, 2)

        def sentence_view(text: str, seed: int) -> None:
            sv = P.sentence_vectors(minilm, text)
            pt = P.permutation_experiment(minilm, text, seed)
            V.sentence_vectors(sv.tokens, sv.token, sv.position, sv.total, T)
            V.vector_lines(sv.token[0], sv.position[0], sv.total[0], "", T)
            V.permutation_bars(pt.tokens, pt.diff_nopos, pt.diff_pos, pt.diff_causal, T)

        text = "The dog bit the man."
        cases += [
            ("learned", "pos (fragment)", {"panel": "learned"}, lambda at: at.slider(key="pos"),
             [100 + r for r in range(runs)], lambda v: None, learned_view),
            ("sentence", "seed", {"panel": "sentence"}, lambda at: at.number_input(key="seed"),
             [10 + r for r in range(runs)], lambda v: P.permutation_experiment(minilm, text, v),
             lambda v: sentence_view(text, v)),
            ("sentence", "text", {"panel": "sentence"}, lambda at: at.text_input(key="text"),
             [f"The dog bit the man {r} times." for r in range(runs)],
             lambda v: (P.sentence_vectors(minilm, v), P.permutation_experiment(minilm, v, 0)),
             lambda v: sentence_view(v, 0)),
        ]

    rows, full_reruns = [], []
    for panel, control, params, widget, values, compute, view in cases:
        bare = statistics.median(timed(lambda v=v: compute(v)) for v in values)
        bare_fig = statistics.median(timed(lambda v=v: view(v)) for v in values)
        at = open_page(PAGE, params)
        at.run()
        if "fragment" in control:  # the full-page rerun too, for comparison
            full = []
            for v in values:
                widget(at).set_value(v + 50)
                full.append(timed(at.run))
            full_reruns.append((f"{panel} / {control}", statistics.median(full)))
            page_tree, [fid] = page_states(at), fragment_ids(at)
            rerun_once = lambda: run_fragment(at, fid, page_tree)  # noqa: E731
        else:
            rerun_once = at.run
        page = []
        for v in values:
            widget(at).set_value(v)
            page.append(timed(rerun_once))
            assert not at.exception, [e.value for e in at.exception]
        rerun = statistics.median(page)
        rows.append((f"{panel} / {control}", bare, bare_fig, bare_rerun, rerun,
                     rerun / (bare + bare_rerun), rerun / (bare_fig + bare_rerun)))

    mode = "one ScriptCache shared across reruns (as on the server)"
    print(f"Positional encodings view — medians of {runs} runs (ms), CPU, {os.cpu_count()} cores, {mode}")
    print("A = bare compute (probes only), B = bare compute + building the panel's figures, R = bare page rerun")
    header = (f"{'panel / control changed':<24} {'A probes':>9} {'B +figs':>9} {'R home':>8} {'page rerun':>11} "
              f"{'/(A+R)':>7} {'/(B+R)':>7}")
    print(header)
    print("-" * len(header))
    for name, bare, bare_fig, base, rerun, ratio, ratio_fig in rows:
        print(f"{name:<24} {bare:9.1f} {bare_fig:9.1f} {base:8.1f} {rerun:11.1f} {ratio:7.2f} {ratio_fig:7.2f}")
    for name, ms in full_reruns:
        print(f"{name}: a full-page rerun instead of the fragment's would take {ms:.1f} ms")


if __name__ == "__main__":
    main()
