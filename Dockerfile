# syntax=docker/dockerfile:1
#
# One image with both memgate binaries:
#   /usr/local/bin/memgate-operator   (the default entrypoint: `memgate-operator run`)
#   /usr/local/bin/memgate-gateway    (what the operator's gateway Deployments run)
#
# Build and push from your own CI (no container engine is needed to develop or test memgate):
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" -t REGISTRY/memgate:0.1.0 .
#   docker push REGISTRY/memgate:0.1.0
#
# The build stage runs scripts/build-release.sh, the same script the test command runs, and
# e2e/tests/container_image.rs checks this file's stages, user and copied paths against that build.

ARG RUST_VERSION=1.95.0

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN ./scripts/build-release.sh

# Distroless "cc": glibc and libgcc only (what the binaries link against), no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="memgate" \
      org.opencontainers.image.description="memgate operator and gateway: Mem0-compatible memory services served to agents as Remote MCP and Nexent providers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /src/target/release/memgate-operator /usr/local/bin/memgate-operator
COPY --from=build /src/target/release/memgate-gateway /usr/local/bin/memgate-gateway
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/memgate-operator"]
CMD ["run"]
