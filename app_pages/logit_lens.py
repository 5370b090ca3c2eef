"""The logit lens: every layer's hidden state read through the model's own final norm and output layer."""
import streamlit as st

from explorer.probes.lens import LensError, logit_lens
from explorer.ui import settings
from explorer.ui.cache import probe
from explorer.ui.charts import Origin, show
from explorer.ui.state import Controls
from explorer.ui.widgets import model_and_sentence, page_header, what_to_notice
from explorer.viz import lens as V

c = Controls("logit-lens")
page_header("Logit lens", "What each layer would predict if the model stopped there: its hidden state read through "
            "the model's own final norm and output layer (nostalgebraist 2020).")
_, loaded, text = model_and_sentence(c)
try:
    trace = probe(logit_lens, loaded, text)
except LensError as exc:
    st.info(str(exc))
    st.stop()
for note in trace.notes:
    st.info(note)
theme = settings.theme()
L, T = trace.top_probs.shape
c1, c2 = st.columns(2)
with c1:
    pos = c.selectbox("pos", list(range(T)), default=T - 1, label_visibility="collapsed",
                      format_func=lambda t: f"after token {t}: {trace.tokens[t]}")
with c2:
    layer = c.selectbox("layer", list(range(L)), default=L - 1, label_visibility="collapsed",
                        format_func=lambda i: f"top 10 at {trace.layers[i]}")
own = Origin("model", f"each layer's hidden state through {loaded.id}'s own final norm and output layer; the last "
                      f"layer equals the model's own logits to {trace.lens_error:.1e}.")
show(V.lens_grid(trace, theme, (layer, pos)), own, key="lens_grid", filename="logit-lens", fold=True)
tokens, probs = trace.bars(layer, pos)
final = trace.final_tokens[pos]
show(V.lens_bars(tokens, probs, f"{trace.layers[layer]}, after “{trace.tokens[pos]}”: top {len(tokens)}", theme,
                 mark=final), own, key="lens_bars", filename="logit-lens-bars")
st.caption(f"The model's own prediction after “{trace.tokens[pos]}” is “{final}”: at {trace.layers[layer]} it ranks "
           f"{int(trace.final_rank[layer, pos]) + 1} with p = {trace.final_prob[layer, pos]:.4f} (outlined when in "
           f"the top {len(tokens)}).")
what_to_notice([
    "Read a column bottom to top: early layers often predict a plausible word of the right kind, later layers settle "
    "on the model's own choice.",
    "The hover gives the rank of the model's final prediction at every layer: how early it 'knows' the answer.",
    "The top row is exactly the model's output (the caption above the grid prints the difference).",
])
