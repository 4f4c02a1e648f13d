# syntax=docker/dockerfile:1
# The Moltaro polling orchestrator as a container: one process, configured by
# environment, its SQLite store on the /data volume. See docs/operations.md.

# --- build: a wheel of the package alone (no compilers or build tools reach runtime)
FROM docker.io/library/python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY orchestrator ./orchestrator
RUN pip wheel --no-deps --wheel-dir /wheels .

# --- runtime: the locked dependencies and the wheel in a venv, run as a non-root user
FROM docker.io/library/python:3.11-slim AS runtime
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
# Exact versions with their hashes (requirements.lock, refreshed as
# docs/operations.md says), then the wheel without resolving anything; pip check
# fails the build when the lock misses a dependency of the wheel. The wheel is
# bind-mounted from the build stage, so no layer keeps a copy of it.
RUN --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \
    --mount=type=bind,from=build,source=/wheels,target=/tmp/wheels \
    pip install --require-hashes --no-deps -r /tmp/requirements.lock \
 && pip install --no-deps /tmp/wheels/*.whl \
 && pip check

# A regular (not --system) account with an explicit id: no SYS_UID_MAX warning,
# and no lastlog/faillog entries for it (--no-log-init).
RUN groupadd --gid 10001 orchestrator \
 && useradd --uid 10001 --gid orchestrator --no-log-init --no-create-home \
            --home-dir /data --shell /usr/sbin/nologin orchestrator \
 && mkdir -p /data \
 && chown orchestrator:orchestrator /data

# Listening on all interfaces: the service refuses to start without API tokens
# (ORCH_API_TOKENS) unless ORCH_SERVER__ALLOW_UNAUTHENTICATED=true is set.
ENV ORCH_SERVER__LISTEN=0.0.0.0:8080 \
    ORCH_STORE__PATH=/data/orchestrator.db \
    ORCH_LOGGING__FORMAT=json
VOLUME ["/data"]
WORKDIR /data
EXPOSE 8080
USER 10001:10001

# slim has no curl: `orchestrator health` asks /healthz at the service's own
# ORCH_SERVER__LISTEN (on loopback), so moving the port moves the check too.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["orchestrator", "health"]

# SIGTERM drains gracefully (exit 0) within shutdown_grace_s + shutdown_hard_s
# (15 s by default): give the container a stop timeout above that (--stop-timeout 30).
STOPSIGNAL SIGTERM
ENTRYPOINT ["orchestrator"]
CMD ["serve"]
