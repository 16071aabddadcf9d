# The panel for a lab server (docker-compose.yml runs every process of `make run` from this image).
# The same RPC build as `make run`: llama-cpp-python with GGML_RPC for the head and its engines, and the
# laptop runtime bundle that deployments push to laptops, from one vendored llama.cpp tree. openssh-client
# is for the supervisor's tunnels to the laptops' rpc-servers.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build binutils git openssh-client redis-tools \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV CLUSTERPANEL_CACHE=/opt/clusterpanel-cache \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    DATA_DIR=/data \
    PYTHONUNBUFFERED=1

RUN python -m venv /opt/venv && pip install --no-cache-dir --upgrade pip
COPY requirements.txt requirements-nodeps.txt ./
COPY scripts/build_llama.py scripts/llama_source.py scripts/
COPY scripts/llama_patches scripts/llama_patches
RUN WHEEL=$(python scripts/build_llama.py) \
 && pip install --no-cache-dir "$WHEEL" -r requirements.txt \
 && pip install --no-cache-dir --no-deps -r requirements-nodeps.txt \
 && rm -rf $CLUSTERPANEL_CACHE/*/src-*

COPY . .
ENV STATIC_ROOT=/app/staticfiles
# The image is unusable without the runtime bundle (deployments push it to laptops): fail the build now.
RUN DATA_DIR=/tmp/build SECRET_KEY=build-only python manage.py collectstatic --noinput -v0 \
 && DATA_DIR=/tmp/build SECRET_KEY=build-only python manage.py shell -c \
      "from nodes.runtime.bundle import find_bundle; print('runtime bundle:', find_bundle().summary)" \
 && rm -rf /tmp/build

EXPOSE 8000
# daphne, refusing request bodies over their limit before reading them (clusterpanel/web/webserver.py)
CMD ["python", "-m", "clusterpanel.web.webserver", "-b", "0.0.0.0", "-p", "8000", "clusterpanel.asgi:application"]
