# The `axle` binary in a small image: built with the etcd discovery backend, the shipped
# plugins embedded (they are built for wasm32-wasip2 during the build), nothing else.
#
#   docker build -t axle .
#   docker run --rm axle --help
#   docker compose -f examples/compose.yaml up

FROM rust:1.95-bookworm AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/*
RUN rustup target add wasm32-wasip2
WORKDIR /src
COPY . .
RUN cargo build --release -p axle-cli --features etcd \
    && cp target/release/axle /usr/local/bin/axle

FROM debian:bookworm-slim
COPY --from=builder /usr/local/bin/axle /usr/local/bin/axle
# Compiled plugins are cached here (private to the user, as axle requires).
ENV AXLE_CACHE_DIR=/tmp/axle-cache
USER nobody
ENTRYPOINT ["axle"]
