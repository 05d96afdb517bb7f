# The Space's image (HF Docker Space, `sdk: docker`, port 7860). One build stage makes the release
# server and the site with the same steps `dev/space-image assemble` runs (and `dev/test` checks);
# the image that runs holds only their output, as a non-root user. Every tool comes from a package
# registry (Debian, crates.io, npm) at build time; nothing is downloaded when the Space runs.
FROM rust:1.95-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The commit /api/version reports (HF passes no .git into the build context).
ARG ARENA_BUILD_COMMIT=unknown
ENV ARENA_BUILD_COMMIT=${ARENA_BUILD_COMMIT} CARGO_TARGET_DIR=/src/target/cargo
RUN dev/space-image assemble /out

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 arena \
 && mkdir -p /data && chown arena:arena /data
COPY --from=build /out/app /app
USER arena
WORKDIR /home/arena
# /data is the Space's persistent storage: the SQLite database (unless DATABASE_URL names
# PostgreSQL) and the private overlay read at start from the dataset ARENA_PRIVATE_REPO names.
ENV ARENA_ADDR=0.0.0.0:7860 ARENA_DATA_DIR=/data ARENA_CONFIGS_DIR=/app/configs ARENA_SITE_ROOT=/app/site
EXPOSE 7860
CMD ["/app/arena", "serve"]
