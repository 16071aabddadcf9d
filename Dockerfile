# The panel for a lab server. The same RPC build as `make run`: llama-cpp-python
# with GGML_RPC and the laptop runtime bundle, from one vendored llama.cpp tree.
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
COPY scripts/build_llama.py scripts/
RUN WHEEL=$(python scripts/build_llama.py) \
 && pip install --no-cache-dir "$WHEEL" -r requirements.txt \
 && pip install --no-cache-dir --no-deps -r requirements-nodeps.txt \
 && rm -rf $CLUSTERPANEL_CACHE/*/src

COPY . .
ENV STATIC_ROOT=/app/staticfiles
RUN DATA_DIR=/tmp/build SECRET_KEY=build-only python manage.py collectstatic --noinput -v0 \
 && rm -rf /tmp/build

EXPOSE 8000
CMD ["python", "-m", "daphne", "-b", "0.0.0.0", "-p", "8000", "clusterpanel.asgi:application"]
