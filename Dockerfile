# sparsescope: the web app with the default model, offline at run time.
# Build:  docker build -t sparsescope .
# Run:    docker run --rm -p 8000:8000 -v sparsescope-data:/data sparsescope
# GPU:    docker run --rm --gpus all -p 8000:8000 -v sparsescope-data:/data sparsescope
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    SPARSESCOPE_HOST=0.0.0.0 \
    SPARSESCOPE_PORT=8000 \
    SPARSESCOPE_DATA_DIR=/data

WORKDIR /src
# PyTorch first and pinned: the registry's Linux build carries CUDA, so the model runs on a GPU
# when the container is given one (--gpus all), on the CPU otherwise.
RUN pip install "torch==2.13.0"
COPY pyproject.toml README.md ./
COPY app ./app
COPY sparse_core ./sparse_core
COPY frontend ./frontend
COPY static ./static
RUN pip install . && rm -rf /src/build

RUN useradd --create-home --uid 10001 sparsescope \
    && mkdir -p /data && chown sparsescope:sparsescope /data
# by uid: the runtime (and runAsNonRoot) can check it is not root without /etc/passwd
USER 10001
WORKDIR /home/sparsescope
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["sparsescope", "serve", "--host", "0.0.0.0", "--port", "8000"]
