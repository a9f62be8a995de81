# server.Dockerfile - `scuda server` for a GPU host (docs/deploy.md).
#
# The driver is the host's: run with the NVIDIA container toolkit
# (`docker run --gpus all`), which mounts the host's libcuda.so.1 and
# libnvidia-ml.so.1 into the container, where `scuda server` finds them.
# Nothing of CUDA is in the image. The package comes from
# scripts/package.sh; the base is any Debian 12 image (CI imports one made
# with debootstrap: no registry needed).
#
#   docker build -f deploy/docker/server.Dockerfile --build-arg BASE=debian:bookworm \
#       -t scuda-server build-pkg
#   docker run -d --gpus all --network host -v /etc/scuda:/etc/scuda:ro \
#       -v scuda-state:/var/lib/scuda scuda-server
ARG BASE=debian:bookworm
FROM ${BASE}
COPY scuda_*.deb /tmp/
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/scuda_*.deb \
 && rm -rf /tmp/scuda_*.deb /var/lib/apt/lists/*
# The token file (NAME TOKEN lines) comes from the host, read-only; the
# state (TLS certificate, control socket) and the module cache persist in
# volumes. Beyond loopback the server speaks TLS and prints its
# certificate's fingerprint at start: `docker logs` shows it.
ENV SCUDA_LOG=info NVIDIA_DRIVER_CAPABILITIES=compute,utility NVIDIA_VISIBLE_DEVICES=all
VOLUME ["/var/lib/scuda", "/var/cache/scuda"]
EXPOSE 14833
ENTRYPOINT ["scuda", "server", "--state-dir", "/var/lib/scuda", "--module-cache", "/var/cache/scuda/modules"]
CMD ["--listen", "0.0.0.0:14833", "--token-file", "/etc/scuda/tokens"]
