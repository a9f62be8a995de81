# client.Dockerfile - CUDA programs on a CPU-only machine, their GPU work
# on a SCUDA server (docs/deploy.md).
#
# Every command runs under `scuda run`, so SCUDA's libcuda.so.1 and
# libnvidia-ml.so.1 (in /usr/lib/scuda, never the system library path)
# come first: a CUDA program or `python3` with a CUDA library runs as
# it is. The server and the token come from the environment.
#
#   docker build -f deploy/docker/client.Dockerfile --build-arg BASE=debian:bookworm \
#       -t scuda-client build-pkg
#   docker run --rm --network host -e SCUDA_SERVER=gpubox:14833 \
#       -e SCUDA_TOKEN=... -e SCUDA_TLS_FINGERPRINT=sha256:... scuda-client ./my_cuda_program
ARG BASE=debian:bookworm
FROM ${BASE}
COPY scuda_*.deb /tmp/
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/scuda_*.deb python3 \
 && rm -rf /tmp/scuda_*.deb /var/lib/apt/lists/*
WORKDIR /work
# `scuda run` checks the server first and says why when it cannot use it.
ENTRYPOINT ["scuda", "run", "--"]
CMD ["python3"]
