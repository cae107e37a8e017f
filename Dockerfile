# sparsescope: the web app with the default model, offline at run time.
#
# Build (docker):  docker build -t sparsescope .
# Run:             docker run --rm -p 8000:8000 -v sparsescope-data:/data sparsescope
# CUDA variant:    docker build -t sparsescope:cuda --build-arg TORCH_INDEX_URL=https://pypi.org/simple .
#                  docker run --rm --gpus all -p 8000:8000 -v sparsescope-data:/data sparsescope:cuda
#                  (PyPI's Linux torch wheel carries CUDA; the default index is PyTorch's CPU-only one)
# No docker, or no registry reachable: scripts/image.sh build|run (buildah, and a Debian base made
# with mmdebstrap: --build-arg BASE=localhost/sparsescope-base:12). See the README, "Docker".
#
# BASE: any image with python3 (>= 3.10) that can make a venv: python:3.11-slim, or plain Debian
# bookworm with python3, python3-venv and ca-certificates. Everything goes into the venv /opt/venv
# (Debian's own python refuses system-wide pip installs).
#
# The metadata comes first and few instructions follow the big steps: a builder on the vfs storage
# driver (buildah without overlay) copies the whole root filesystem for every layer.
ARG BASE=python:3.11-slim
FROM ${BASE}

# PyTorch is installed first and pinned (its pin wins), from TORCH_INDEX_URL: PyTorch's CPU-only
# index by default; https://pypi.org/simple for the CUDA build (see the header).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/hf \
    SPARSESCOPE_HOST=0.0.0.0 \
    SPARSESCOPE_PORT=8000 \
    SPARSESCOPE_DATA_DIR=/data \
    NUMBA_CACHE_DIR=/home/sparsescope/.numba
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["sparsescope", "serve", "--host", "0.0.0.0", "--port", "8000"]
WORKDIR /home/sparsescope

# the server's user (uid 10001) owns its home and the share database's folder, a volume
RUN useradd --uid 10001 --user-group --home-dir /home/sparsescope --no-create-home sparsescope \
    && mkdir -p /data && chown sparsescope:sparsescope /data /home/sparsescope
VOLUME ["/data"]

RUN python3 -m venv /opt/venv \
    && pip install --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}"

# the dependencies that pyproject.toml names, in a layer of their own: a change to the code alone
# rebuilds only the project's layer below (tomllib from Python 3.11; tomli before it)
COPY pyproject.toml /src/pyproject.toml
RUN (python -c "import tomllib" 2>/dev/null || pip install "tomli>=2") \
    && python -c "import sys; from importlib import import_module as m; \
t = m('tomllib' if sys.version_info >= (3, 11) else 'tomli'); \
print(*t.load(open('/src/pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm -rf /src /tmp/requirements.txt

# the build context is what the wheel ships (.dockerignore): pyproject.toml, README.md, app,
# sparse_core, frontend, static. Installed not editable, without test extras; no source kept.
COPY . /src/
# the compiled kernels (entmax, methods) built once here (numba's cache), not at every container start
RUN pip install /src && rm -rf /src \
    && mkdir -p /home/sparsescope/.numba \
    && python -c "import sys, sparse_core._method_kernels as m, sparse_core.entmax.cpu as k; sys.exit(0 if k.warm() and m.warm() else 1)" \
    && chown -R sparsescope:sparsescope /home/sparsescope/.numba

# by uid: the runtime (and runAsNonRoot) can check it is not root without /etc/passwd
USER 10001
