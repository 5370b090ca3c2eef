"""What a class at the back of the room cannot read, measured from the DOM and Plotly's SVG (not by eye).

`legibility_problems(page, min_px)` lists, for the page as it is laid out now:
  * chart text (titles, ticks, axis titles, legends, annotations) smaller than `min_px`;
  * chart text cut by the edge of its chart (any corner of its box outside the chart's SVG);
  * chart texts that overlap each other, rotated ones included (their boxes mapped to the screen and tested with
    the separating-axis theorem; each box is first shrunk by the line's leading, which holds no ink);
  * chart toolbars over a chart's text, with the pointer on the chart (where they show);
  * controls whose label or value does not fit (select boxes, buttons, radio and pill labels, multiselect chips);
  * text of the page (Markdown, captions, labels, tables, badges) smaller than `min_px`.
Each problem is a short sentence naming the text, so a failure says what to fix.
"""
from __future__ import annotations

MEASURE = r"""(minPx) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const out = [];
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return false;
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return false;
    }
    return true;
  };
  const INK = /[^\s\u200b-\u200f\u2060\ufeff]/;  // a text with something to read (not only spaces and joiners)
  const label = (s) => JSON.stringify(s.replace(/\s+/g, ' ').trim().slice(0, 40));
  // sub- and superscripts are drawn smaller than the text they belong to, by design (KaTeX, SVG, HTML)
  // KaTeX draws scripts (.msupsub, .mtight) smaller and keeps a hidden MathML copy (.katex-mathml)
  const script = (e) => !!e.closest('.msupsub, .mtight, .katex-mathml, sub, sup')
                        || e.tagName === 'tspan' && /%$/.test(e.style.fontSize);  // Plotly's <sub>: font-size 70%
  const icon = (e) => !!e.closest('[data-testid="stIconMaterial"]') || /Material/.test(getComputedStyle(e).fontFamily);
  // a text's box on the screen, as 4 corners (rotations kept), its leading shrunk away
  const quad = (t) => {
    const b = t.getBBox(), m = t.getScreenCTM();
    if (!m || b.width === 0) return null;
    const dy = b.height * 0.12, dx = Math.min(1, b.width / 4);
    const pts = [[b.x + dx, b.y + dy], [b.x + b.width - dx, b.y + dy], [b.x + b.width - dx, b.y + b.height - dy],
                 [b.x + dx, b.y + b.height - dy]];
    return pts.map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const overlap = (p, q) => {
    for (const poly of [p, q]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], nx = y1 - y2, ny = x2 - x1;
      const proj = (pts) => pts.map(([x, y]) => x * nx + y * ny);
      const a = proj(p), c = proj(q), len = Math.hypot(nx, ny) || 1;
      if (Math.max(...a) - Math.min(...c) <= len * 0.5 || Math.max(...c) - Math.min(...a) <= len * 0.5) return false;
    }
    return true;
  };
  for (const plot of main.querySelectorAll('.js-plotly-plot')) {
    if (!shown(plot)) continue;
    const svg = plot.querySelector('svg.main-svg');
    const pb = (svg || plot).getBoundingClientRect();
    const name = label((plot.querySelector('.gtitle') || {textContent: 'a chart'}).textContent);
    const texts = [...plot.querySelectorAll('svg text')]
      .filter(t => INK.test(t.textContent) && !t.closest('.hoverlayer') && shown(t));
    const quads = [];
    for (const t of texts) {
      const sizes = [t, ...[...t.querySelectorAll('tspan')].filter(e => !script(e))]
        .map(e => parseFloat(getComputedStyle(e).fontSize));
      const px = Math.min(...sizes);
      if (px < minPx - 0.05) out.push(`${name}: ${label(t.textContent)} at ${px.toFixed(1)} px`);
      const q = quad(t);
      if (!q) continue;
      if (q.some(([x, y]) => x < pb.left - 1 || x > pb.right + 1 || y < pb.top - 1 || y > pb.bottom + 1))
        out.push(`${name}: ${label(t.textContent)} is cut by the chart's edge`);
      quads.push([t, q]);
    }
    for (let i = 0; i < quads.length; i++) for (let j = i + 1; j < quads.length; j++)
      if (overlap(quads[i][1], quads[j][1]))
        out.push(`${name}: ${label(quads[i][0].textContent)} overlaps ${label(quads[j][0].textContent)}`);
  }
  const cut = (el) => el.scrollWidth > el.clientWidth + 1;
  for (const i of main.querySelectorAll('[data-testid="stSelectbox"] input, [data-testid="stMultiSelect"] input'))
    if (shown(i) && i.value && cut(i)) out.push(`control: ${label(i.value)} does not fit its box`);
  for (const p of main.querySelectorAll('button p, [data-testid="stWidgetLabel"] p, [role="radiogroup"] p'))
    if (shown(p) && cut(p)) out.push(`control: ${label(p.textContent)} does not fit`);
  for (const box of main.querySelectorAll('[data-testid="stMultiSelectTagsContainer"]')) {  // chips hidden in the box
    const b = box.getBoundingClientRect();
    for (const chip of box.querySelectorAll('*')) {  // the innermost elements with text: the chips' labels
      const r = chip.getBoundingClientRect();
      if (r.width < 1 || [...chip.children].some(c => INK.test(c.textContent))) continue;
      if (INK.test(chip.textContent) && (r.right > b.right + 1 || r.bottom > b.bottom + 1 || r.left < b.left - 1))
        out.push(`control: ${label(chip.textContent)} is hidden by its multiselect's box`);
    }
  }
  for (const el of main.querySelectorAll('div, span, p, label'))  // whatever the page cuts with an ellipsis
    if (!el.closest('svg') && getComputedStyle(el).textOverflow === 'ellipsis' && cut(el) && shown(el))
      out.push(`control: ${label(el.textContent)} is cut with an ellipsis`);
  const small = new Map();
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!INK.test(n.textContent) || !el || el.closest('svg, .js-plotly-plot, [data-testid="stDataFrame"], textarea')
        || script(el) || icon(el)) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < minPx - 0.05 && shown(el)) small.set(label(n.textContent), px);
  }
  for (const [text, px] of small) out.push(`page text ${text} at ${px.toFixed(1)} px`);
  return out;
}"""

TOOLBAR = r"""(i) => {
  const plot = [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')][i];
  const bars = [...document.querySelectorAll('[data-testid="stElementToolbar"], .modebar')]
    .map(b => b.getBoundingClientRect()).filter(r => r.width > 0 && r.height > 0);
  const out = [];
  for (const t of plot.querySelectorAll('.gtitle, .g-xtitle text, .g-ytitle text, .legend text, .annotation text')) {
    const r = t.getBoundingClientRect();
    for (const b of bars)
      if (r.left < b.right - 1 && b.left < r.right - 1 && r.top < b.bottom - 1 && b.top < r.bottom - 1)
        out.push(`the chart toolbar covers ${JSON.stringify(t.textContent.slice(0, 40))}`);
  }
  return out;
}"""


def legibility_problems(page, min_px: float = 18.0, hover: bool = True) -> list[str]:
    """What cannot be read on `page` as laid out now (module docstring); with `hover`, each chart is pointed at in
    turn to show its toolbar, which must cover none of its text."""
    problems = list(dict.fromkeys(page.evaluate(MEASURE, min_px)))
    if hover:
        plots = page.locator('[data-testid="stMain"] .js-plotly-plot')
        for i in range(plots.count()):
            plot = plots.nth(i)
            box = plot.bounding_box()
            if not box or box["width"] < 1 or box["y"] > page.viewport_size["height"]:
                continue
            plot.hover(position={"x": box["width"] / 2, "y": min(box["height"] / 2, 40)}, force=True)
            page.wait_for_timeout(150)
            problems += page.evaluate(TOOLBAR, i)
        page.mouse.move(0, 0)
    return list(dict.fromkeys(problems))
