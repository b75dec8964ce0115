# The operator image: the `maya` package (planner, predictor, operator) without
# torch, which only emulation pods need (they run the user's own image).
#   docker build -t maya-operator .
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY maya maya
COPY predictor predictor
COPY operator operator
RUN pip install --no-cache-dir --no-deps . numpy && rm -rf /src
USER 65532:65532
ENTRYPOINT ["maya"]
