# ServerFS MCP image: one static binary in an empty (`scratch`) image.
# No shell, no libc, no package manager, nothing but /serverfs-mcp.
#
# Two ways to get the binary (selected with the build arg SERVERFS_BUILD;
# BuildKit builds only the stage the final image needs, so the other one is
# never pulled or built):
#
#   source    (default) compile it from this checkout in the official Rust
#             image: `docker compose build`.
#   prebuilt  copy a static binary built on the host, for machines that reach
#             no container registry (nothing is pulled at all):
#               RUSTFLAGS='-C target-feature=+crt-static' cargo build --release \
#                 --locked -p serverfs-mcp --target x86_64-unknown-linux-gnu
#               mkdir -p target/docker-bin
#               cp target/x86_64-unknown-linux-gnu/release/serverfs-mcp target/docker-bin/
#               DOCKER_BUILDKIT=1 docker compose build --build-arg SERVERFS_BUILD=prebuilt
#
# The `probe` target is a test-only MCP client used by tests/docker/smoke.sh;
# it is never part of the serverfs-mcp image.
#
# There is deliberately no `# syntax=` line: the Dockerfile frontend built into
# the engine is used, so the build pulls no frontend image either.

ARG RUST_IMAGE=rust:1.95.0-slim-bookworm
ARG SERVERFS_BUILD=source

# ---------------------------------------------------------------- source ---
FROM ${RUST_IMAGE} AS source
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY crates ./crates
# glibc with crt-static gives a fully static executable; --target keeps build
# scripts and proc-macros dynamic, as they must be.
RUN set -eu; \
    target="$(uname -m)-unknown-linux-gnu"; \
    RUSTFLAGS='-C target-feature=+crt-static' \
      cargo build --release --locked -p serverfs-mcp --target "$target"; \
    mkdir -p /out; \
    cp "target/$target/release/serverfs-mcp" /out/serverfs-mcp; \
    case "$(ldd /out/serverfs-mcp 2>&1 || true)" in \
      *"statically linked"*|*"not a dynamic executable"*) ;; \
      *) echo "serverfs-mcp is not statically linked" >&2; exit 1 ;; \
    esac

# -------------------------------------------------------------- prebuilt ---
FROM scratch AS prebuilt
COPY target/docker-bin/serverfs-mcp /out/serverfs-mcp

# ----------------------------------------------------------------- probe ---
# Test-only MCP client (crates/probe) for tests/docker/smoke.sh.
FROM scratch AS probe
COPY target/docker-bin/serverfs-probe /serverfs-probe
USER 10001:10001
ENTRYPOINT ["/serverfs-probe"]
CMD ["idle"]

# ---------------------------------------------------------------- binary ---
FROM ${SERVERFS_BUILD} AS binary

# --------------------------------------------------------------- runtime ---
FROM scratch AS runtime
LABEL org.opencontainers.image.title="serverfs-mcp" \
      org.opencontainers.image.description="Read-only MCP server exposing configured Linux directories as named workdirs."
COPY --from=binary /out/serverfs-mcp /serverfs-mcp
# Compose mounts the 16 workdir slots under /workdirs, read-only.
ENV SERVERFS_LISTEN=0.0.0.0:8000 \
    SERVERFS_WORKDIRS_DIR=/workdirs
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=5 \
    CMD ["/serverfs-mcp", "healthcheck"]
ENTRYPOINT ["/serverfs-mcp"]
