# The operator image: `maya plan` (planner, predictor) and the kopf operator,
# without torch, which only emulation pods need (they run the user's image).
#   docker build -t maya-operator .
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/tmp/numba \
    MAYA_CACHE_DIR=/tmp/maya
WORKDIR /src
COPY pyproject.toml README.md ./
COPY maya maya
COPY predictor predictor
COPY operator operator
# pyproject.toml's dependencies without torch, plus its `operator` extra, with
# its version specifiers (tests/test_chart.py checks that the lists agree); the
# package itself goes in with --no-deps so that torch stays out.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir \
        jsonschema pyyaml rich optuna numpy scikit-learn==1.9.1 numba==0.68.1 \
        kopf==1.45.2 kubernetes prometheus-client==0.26.0 \
    && pip install --no-cache-dir --no-deps . \
    && rm -rf /src
WORKDIR /
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["kopf", "run", "--all-namespaces", "--liveness=http://0.0.0.0:8081/healthz", "-m", "maya.operator.handlers"]
