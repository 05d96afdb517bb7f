# Shared by the dev scripts: paths and the tool installs a fresh machine needs.
# Everything comes from the package registries (crates.io, npm, PyPI, Debian), nothing else.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# A target directory outside the clone lets every clone on this machine reuse one build.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/arena-target}
# A cold debug build gains nothing from incremental compilation (there is nothing yet to reuse) and
# pays for writing its data; the first build of an empty target directory turns it off, for the
# whole run (cargo's fingerprints include it: a `cargo test` after would otherwise build again).
if [ -z "${CARGO_INCREMENTAL+set}" ] && [ ! -d "$CARGO_TARGET_DIR/debug" ]; then
  export CARGO_INCREMENTAL=0
fi
SITE="$ROOT/target/site"
# The front end's wasm builds in a target directory of its own: cargo locks a target directory
# while it builds, and this way dev/test builds the wasm while the Rust tests run.
export WASM_TARGET_DIR=${WASM_TARGET_DIR:-$CARGO_TARGET_DIR-wasm}
# Clippy's lints as errors, in the form clippy-driver reads from CLIPPY_ARGS (what `cargo clippy --
# -D warnings` passes it).
CLIPPY_DENY="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
WASM_OPT_CACHE="$HOME/.cache/arena-wasm-opt"
# The commit the binary reports at /api/version; set for every cargo call so builds agree.
export ARENA_BUILD_COMMIT
ARENA_BUILD_COMMIT=${ARENA_BUILD_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}

log() { printf '\033[1m[dev]\033[0m %s\n' "$*" >&2; }

# Named phases with their wall-clock seconds, printed at exit (`phase NAME` starts one and ends the
# one before), so a slow suite says where its time went.
# Each phase also says the CPU time the whole machine spent meanwhile (user and system, from
# /proc/stat): a phase whose CPU is twice its wall clock used both cores, and only less work makes it
# shorter; one with idle cores waits on something.
PHASE_TIMES=() PHASE_NAME='' PHASE_START=0 PHASE_CPU=0
cpu_s() { awk '/^cpu /{printf "%d", ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat; }
phase() { phase_end; PHASE_NAME=$1 PHASE_START=$SECONDS PHASE_CPU=$(cpu_s); log "$1"; }
phase_end() {
  [ -n "$PHASE_NAME" ] &&
    PHASE_TIMES+=("$(printf '%6d s %6d cpu-s  %s' $((SECONDS - PHASE_START)) $(($(cpu_s) - PHASE_CPU)) "$PHASE_NAME")")
  PHASE_NAME=''
}
phase_report() {
  phase_end
  [ ${#PHASE_TIMES[@]} -gt 0 ] || return 0
  log "time per phase (wall clock, and the CPU seconds of both cores meanwhile):"
  printf '%s\n' "${PHASE_TIMES[@]}" >&2
  printf '%6d s %6d cpu-s  in all\n' "$SECONDS" $(($(cpu_s) - RUN_CPU)) >&2
}
RUN_CPU=$(cpu_s)
# What runs at exit: the test stack stops, and the phases are reported.
on_exit() { stop_test_stack; phase_report; }

# The wasm-bindgen version the lockfile pins; the CLI must match it exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

ensure_wasm_target() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

# The front end's build lints as it compiles (build_site), so it needs clippy wherever it runs.
ensure_clippy() {
  if ! rustup which clippy-driver >/dev/null 2>&1; then
    log "adding clippy"
    rustup component add clippy
  fi
}

ensure_wasm_bindgen() {
  local want have
  want=$(wasm_bindgen_version)
  have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [ "$have" != "$want" ]; then
    log "installing wasm-bindgen-cli $want from crates.io (a few minutes, once)"
    # Optimised a little (opt-level 1 compiles in about half the time of 3, and reads the pages'
    # module in about the same second), in a target directory of its own.
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      CARGO_TARGET_DIR="$HOME/.cache/arena-target-tools" cargo install wasm-bindgen-cli --version "$want"
  fi
}

ensure_node_tools() {
  if [ ! -x node_modules/.bin/wasm-opt ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    log "installing npm packages (binaryen, playwright-core, axe-core)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
}

apt_install() {
  log "installing Debian packages: $*"
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ]; then
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  }
}

ensure_test_tools() {
  local missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
  command -v wrk >/dev/null || missing+=(wrk)
  # A real container registry for the OpenEnv track's registry tests (dev/registry/).
  [ -x /usr/bin/docker-registry ] || missing+=(docker-registry)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v umoci >/dev/null || missing+=(umoci)
  # The stand-in runs a sandbox's command in its own network and mount namespace (standin::sandbox).
  command -v socat >/dev/null || missing+=(socat)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  python3 -c 'import pytest' 2>/dev/null || { log "installing pytest from PyPI"; python3 -m pip install -q pytest; }
  # The API contract check (tests/cli/test_openapi_contract.py), at a fixed version.
  [ "$(schemathesis --version 2>/dev/null | awk '{print $NF}')" = 4.32.5 ] || {
    log "installing schemathesis 4.32.5 from PyPI"; python3 -m pip install -q schemathesis==4.32.5; }
  # The Rust tests' runner (.config/nextest.toml); machines of this kind have it, others build it.
  cargo nextest --version >/dev/null 2>&1 || {
    log "installing cargo-nextest from crates.io (a few minutes, once)"; cargo install -q --locked cargo-nextest; }
}

# What the stand-in's HF jobs run on this machine's Python (the arena's job script and the simulated
# pipeline, standin/sim): huggingface_hub and websockets from PyPI.
ensure_job_python() {
  # At the version the arena's Jobs calls were checked against (tests/cli/test_hf_jobs_client.py).
  [ "$(python3 -c 'import huggingface_hub; print(huggingface_hub.__version__)' 2>/dev/null)" = 2.4.0 ] &&
    python3 -c 'import websockets.sync.client' 2>/dev/null && return
  log "installing huggingface_hub 2.4.0 and websockets from PyPI (what the arena's job script needs)"
  python3 -m pip install -q huggingface_hub==2.4.0 "websockets>=13,<16"
}

# The datasets the stand-in makes from folders, with commits fixed by their content: the local demo's
# held-out suite (dev/local-challenge/suites/local-heldout.toml pins its commit).
seed_datasets() {
  printf 'arena-demo/local-heldout=%s' "$ROOT/dev/local-challenge/heldout"
}

# openenv-core 0.3.0 from PyPI, kept apart from the other Python packages (it pulls fastmcp): the
# local OpenEnv images built before openenv 0.10 run on it (`{openenv_core}` in an image's
# mounts). Sets OPENENV_CORE to the folder (put it on PYTHONPATH).
OPENENV_CORE="$HOME/.cache/arena-openenv-core"
ensure_openenv_core() {
  install_openenv_release "$OPENENV_CORE" "openenv-core==0.3.0" "about a minute, once"
}

# openenv 0.10.0 from PyPI (the `openenv` package, what `pip install openenv` and `openenv init`
# give participants today), kept apart like openenv-core: the local 0.10 images run on it
# (`{openenv}` in an image's mounts, STANDIN_OPENENV), and admission is checked against its
# `openenv validate --url URL --json` (its `--url` prints text without `--json`). Its own
# requirement keeps fastmcp below 4 (MCPEnvironment is written for FastMCP 3), so nothing else is
# pinned. Sets OPENENV to the folder (put it on PYTHONPATH).
OPENENV="$HOME/.cache/arena-openenv"
ensure_openenv() {
  install_openenv_release "$OPENENV" "openenv==0.10.0" "about a minute, once"
}

# Installs the OpenEnv release REQUIREMENT into DIR with its own requirements but gradio. Gradio
# serves only the web UI at /web, which a server mounts when ENABLE_WEB_INTERFACE is set (never
# here, and off by default); both releases' `openenv.core.env_server` do without it when it is
# missing (`except ModuleNotFoundError` around `web_interface`). Its import was two thirds of every
# local sandbox's start (about 3 of 4.6 CPU-s, and a dev/test starts over 400 sandboxes on these two
# cores); HF's machines pay it for real images, not this one. The stamp works as install_target's.
install_openenv_release() {
  local dir=$1 requirement=$2 note=$3
  local stamp="$requirement without gradio"
  [ "$(cat "$dir/.arena-stamp" 2>/dev/null)" = "$stamp" ] && return
  log "installing $requirement from PyPI into $dir, without gradio ($note)"
  rm -rf "$dir.partial" "$dir.release"
  python3 -m pip install -q --no-deps --target "$dir.release" "$requirement"
  python3 -c '
import importlib.metadata, re, sys
dist = next(importlib.metadata.distributions(path=[sys.argv[1]]))
for r in dist.requires or []:
    if "extra ==" not in r and re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() != "gradio":
        print(r)' "$dir.release" >"$dir.release/.arena-requirements"
  python3 -m pip install -q --target "$dir.partial" -r "$dir.release/.arena-requirements"
  # The release over its requirements: cp merges the folders (its `bin/openenv` beside `bin/uvicorn`).
  cp -r "$dir.release"/. "$dir.partial"/
  rm -rf "$dir.release"
  echo "$stamp" >"$dir.partial/.arena-stamp"
  rm -rf "$dir" && mv "$dir.partial" "$dir"
}

# Installs REQUIREMENTS from PyPI into the folder DIR (pip --target), once: the folder's stamp
# holds the requirements, so changing them installs again, and a cut install leaves only
# DIR.partial behind.
install_target() {
  local dir=$1 requirements=$2 note=$3
  [ "$(cat "$dir/.arena-stamp" 2>/dev/null)" = "$requirements" ] && return
  log "installing $requirements from PyPI into $dir ($note)"
  rm -rf "$dir.partial"
  # shellcheck disable=SC2086
  python3 -m pip install -q --target "$dir.partial" $requirements
  echo "$requirements" >"$dir.partial/.arena-stamp"
  rm -rf "$dir" && mv "$dir.partial" "$dir"
}

# The official MCP Python client (`mcp` 2.3 from PyPI), kept apart like openenv (it pins its own
# pydantic and httpx2): the tests drive `/mcp` with it through tests/cli/mcp_client.py. Sets
# MCP_CLIENT to the folder (put it on PYTHONPATH).
MCP_CLIENT="$HOME/.cache/arena-mcp-client"
MCP_REQUIREMENTS="mcp==2.3.0"
ensure_mcp_client() {
  install_target "$MCP_CLIENT" "$MCP_REQUIREMENTS" "once"
}

# The OpenEnv trainer's Python (cluster/pyproject.toml: TRL, transformers, torch, peft, trackio),
# about 3.2 GB from PyPI once, kept outside the clone. Sets TRAINER_PY. The pins are read from
# the pyproject, so changing one installs again.
TRAINER_ENV="$HOME/.cache/arena-trainer"
TRAINER_PY="$TRAINER_ENV/bin/python"
ensure_trainer_python() {
  local want
  want=$(sha256sum cluster/pyproject.toml | cut -c1-16)
  [ "$(cat "$TRAINER_ENV/.arena-stamp" 2>/dev/null)" = "$want" ] && return
  local py=/root/.pyenv/versions/3.12.1/bin/python3.12
  [ -x "$py" ] || py=$(command -v python3.12 || command -v python3)
  log "installing the OpenEnv trainer's packages from PyPI into $TRAINER_ENV (about 3.2 GB and 4 minutes, once)"
  [ -x "$TRAINER_PY" ] || "$py" -m venv "$TRAINER_ENV"
  local deps
  deps=$("$TRAINER_PY" -c 'import tomllib; d = tomllib.load(open("cluster/pyproject.toml", "rb"))["project"]; print("\n".join(d["dependencies"] + d["optional-dependencies"]["test"]))')
  # shellcheck disable=SC2086
  "$TRAINER_PY" -m pip install -q $deps
  echo "$want" > "$TRAINER_ENV/.arena-stamp"
}

# wasm-bindgen and wasm-opt for one compiled crate, skipped when its wasm has not changed.
wasm_module() {
  local crate=$1 name=$2
  local wasm="$WASM_TARGET_DIR/wasm32-unknown-unknown/wasm-release/${crate//-/_}.wasm"
  if [ ! -f "$SITE/pkg/${name}_bg.wasm" ] || [ "$wasm" -nt "$SITE/pkg/${name}_bg.wasm" ]; then
    wasm-bindgen --target web --no-typescript --out-dir "$SITE/pkg" --out-name "$name" "$wasm"
    # wasm-opt takes minutes on two cores: its output is kept by its input's hash, so a clean
    # clone of code built before (CI after a session) optimises nothing again.
    local key optimised
    key=$( (sha256sum "$SITE/pkg/${name}_bg.wasm"; node_modules/.bin/wasm-opt --version) | sha256sum | cut -c1-32)
    optimised="$WASM_OPT_CACHE/$key.wasm"
    if [ -f "$optimised" ]; then
      log "$name's wasm was optimised before (wasm-opt cache)"
      cp "$optimised" "$SITE/pkg/${name}_bg.wasm"
    else
      log "optimising $name's wasm (wasm-opt -Oz)"
      node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int \
        --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
        "$SITE/pkg/${name}_bg.wasm" -o "$SITE/pkg/${name}_bg.wasm"
      mkdir -p "$WASM_OPT_CACHE"
      # Older entries go: the cache keeps the last few builds.
      find "$WASM_OPT_CACHE" -name '*.wasm' -mtime +7 -delete 2>/dev/null || true
      cp "$SITE/pkg/${name}_bg.wasm" "$optimised.partial" && mv "$optimised.partial" "$optimised"
    fi
  fi
}

# The pages' wasm modules: crate and output name. Each page loads one (app/src/page_modules.rs):
# the four pages a visitor opens most have their own, holding only their islands, and so do the
# collection forms.
PAGE_MODULES=(frontend:arena frontend-board:page_board frontend-arena:page_arena
  frontend-collection:page_collection frontend-run:page_run frontend-submit:page_submit)

# Builds the hydrating front end into target/site: wasm (optimised by wasm-opt), JS glue, CSS,
# the public files and the served scripts (assembled from scripts/).
build_site() {
  ensure_wasm_target
  ensure_clippy
  ensure_wasm_bindgen
  ensure_node_tools
  log "building the front end (wasm32): a module for each page group, and the checker module /arena/check loads"
  # One cargo call per module: in one call cargo would unify the app's island features, and every
  # module would hold every island. Each crate keeps its own output, so nothing is built twice.
  # Clippy lints our crates as they compile (clippy-driver as cargo's workspace wrapper), so the
  # wasm needs no check build of its own; dev/run and dev/test build alike and share the output.
  local module clippy_driver
  clippy_driver=$(rustup which clippy-driver)
  for module in "${PAGE_MODULES[@]}" checker:checker; do
    CARGO_TARGET_DIR="$WASM_TARGET_DIR" RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS="$CLIPPY_DENY" \
      cargo build -p "${module%%:*}" --lib --target wasm32-unknown-unknown --profile wasm-release
  done
  mkdir -p "$SITE/pkg"
  for module in "${PAGE_MODULES[@]}" checker:checker; do
    wasm_module "${module%%:*}" "${module#*:}"
  done
  cp style/main.css "$SITE/pkg/arena.css"
  node dev/precompress.mjs "$SITE/pkg"
  cp -R public/. "$SITE/"
  # The served scripts, assembled from scripts/ (their shared parts written once).
  python3 dev/assemble_scripts.py "$SITE"
  # The agent quickstart lives at the repository root (as on the Space repository) and is served too.
  cp README.agent-example.md "$SITE/"
  check_bundle
}

# What a first visit to any page may transfer of script and wasm (brotli bytes, as the server
# sends them): its module's wasm and JS glue. dev/pageview.mjs measures the same in Chromium.
PAGE_BUDGET=150000

check_bundle() {
  local module name size over=0
  for module in "${PAGE_MODULES[@]}"; do
    name=${module#*:}
    size=$(( $(stat -c %s "$SITE/pkg/${name}_bg.wasm.br") + $(stat -c %s "$SITE/pkg/${name}.js.br") ))
    if [ "$size" -gt "$PAGE_BUDGET" ]; then
      log "$name: $size bytes of script and wasm (brotli), over the budget of $PAGE_BUDGET (dev/lib.sh): see what grew with dev/wasm_contributors.py"
      over=1
    else
      log "$name: $size bytes of script and wasm (brotli, budget $PAGE_BUDGET)"
    fi
  done
  return $over
}

# Builds the server binary: release for dev/run, debug for the tests (shared with cargo test).
build_server() {
  local profile=$1
  log "building the server ($profile)"
  if [ "$profile" = release ]; then
    cargo build -p server -p standin --release
  else
    # With the tests' own feature set (`--tests` unifies the dev-dependencies' features, as
    # `cargo test --workspace` does): after dev/test's `cargo test` this builds nothing again.
    # --timings: where the build's time went, unit by unit (target/cargo-timings/).
    cargo build --workspace --exclude 'frontend*' --bins --tests --timings
  fi
}

# The registry dev/run and dev/test serve: configs/ plus the simulated local-demo challenge
# (dev/local-challenge), with the shared cap set to $2 USD when given.
assemble_local_configs() {
  local dest=$1 cap=${2:-}
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -R configs/. "$dest/"
  for sub in challenges methods suites benchmarks fixture/task-lists; do
    mkdir -p "$dest/$sub"
    cp dev/local-challenge/"$sub"/* "$dest/$sub/"
  done
  # The OpenEnv track is evaluated on the demo's public benchmark (the real one is private).
  sed -i 's/^benchmark = .*/benchmark = "local-bench"/' "$dest/arena.toml"
  if [ -n "$cap" ]; then
    sed -i "s/^cap_usd = .*/cap_usd = $cap/" "$dest/arena.toml"
  fi
}

# Starts the HF stand-in and an arena on free loopback ports with the local-demo registry, as the
# CLI and browser tests (and the page benchmarks) use them; PROFILE is the build (debug, release).
# CLUSTER is `simulated` (the default: the stand-in's simulated trainer connects) or `real` (no
# cluster connects: the test starts the real agent, cluster/). Sets `url`, `hub` and `work`,
# exports ARENA_TEST_* for the tests, and stops both on exit or at `stop_test_stack`.
start_test_stack() {
  local attempt
  # A port found free may be taken before its server binds it (every group binds loopback ports
  # all the time): a stack whose server could not bind is started again on other ports.
  for attempt in 1 2 3 4 5; do
    start_test_stack_once "$@" && return 0
    [ "$?" = 75 ] || exit 1
    log "a port of the test stack was taken before its server bound it; starting it again on others"
    stop_test_stack
  done
  log "the test stack found no free ports in five tries"
  exit 1
}

# Answers 75 (EX_TEMPFAIL) when a server exited because its port was taken.
start_test_stack_once() {
  local profile=$1 cluster=${2:-simulated}
  work=$(mktemp -d)
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  port=$(free_port)
  hub_port=$(free_port)
  url="http://127.0.0.1:$port"
  hub="http://127.0.0.1:$hub_port"
  log "starting the HF stand-in at $hub and the arena at $url"
  mkdir -p "$work/hub-repos" "$work/fingerprints"
  "$CARGO_TARGET_DIR/$profile/arena" fingerprint-suite tests/fixtures/heldout/sealed-suite --suite openenv-heldout --sealed \
    >"$work/fingerprints/openenv-heldout.json" || exit 1
  "$CARGO_TARGET_DIR/$profile/arena" fingerprint-suite tests/fixtures/heldout/public-bench --suite public-bench \
    >"$work/fingerprints/public-bench.json" || exit 1
  # (Called from start_test_stack's condition, where errexit does not hold: failures exit here.)
  assemble_local_configs "$work/configs" || exit 1
  cluster_secret=dev-test-cluster-credential
  local simulated=()
  [ "$cluster" = real ] || simulated=(STANDIN_CLUSTER_URL="$url" STANDIN_CLUSTER_SECRET="$cluster_secret")
  # Every CLI and browser test reaches this one server from 127.0.0.1 as a few accounts, so the
  # per-address and per-account caps are lifted here; the API tests check them at their defaults.
  STANDIN_ADDR="127.0.0.1:$hub_port" ARENA_HUB_USERS="$ROOT/tests/fixtures/hub-users.json" STANDIN_STAGE_MS=300 \
    STANDIN_CLIENT_ID=arena-test STANDIN_CLIENT_SECRET=arena-test-secret ARENA_HUB_REPOS="$work/hub-repos" \
    STANDIN_IMAGES="$ROOT/tests/fixtures/images" \
    STANDIN_OPENENV_CORE="$OPENENV_CORE" STANDIN_OPENENV="$OPENENV" STANDIN_CLUSTER_HEARTBEAT_MS=500 STANDIN_SEED_DATASETS="$(seed_datasets)" STANDIN_JOB_NULLS=1 \
    env "${simulated[@]}" "$CARGO_TARGET_DIR/$profile/arena-standin" >"$work/standin.log" 2>&1 &
  standin_pid=$!
  trap on_exit EXIT
  # The arena checks its sandbox reader with the stand-in's whoami at start: it starts once the
  # stand-in answers (anything); a stand-in that exited is said at once.
  wait_for_standin "$hub" "$standin_pid" "$work/standin.log" || return $?
  ARENA_ADDR="127.0.0.1:$port" ARENA_DATA_DIR="$work" ARENA_SITE_ROOT="$SITE" ARENA_FINGERPRINTS_DIR="$work/fingerprints" \
    ARENA_CONFIGS_DIR="$work/configs" HF_TOKEN=hf_local_test_arena_bot_5a5a5a ARENA_JOBS_NAMESPACE=benchflow \
    ARENA_SANDBOX_TOKEN=hf_local_test_arena_sandbox_3c3c3c ARENA_SANDBOX_NAMESPACE=benchflow-sandboxes \
    ARENA_WEBHOOK_KEY=7e57ed7e57ed7e57ed7e57ed7e57ed7e57ed7e57ed7e57ed7e57ed7e57ed7e57 \
    ARENA_EVAL_NAMESPACE=benchflow-eval \
    ARENA_RUNS_DATASET=benchflow/arena-runs ARENA_LEADERBOARD_DATASET=benchflow/arena-leaderboard ARENA_WORKER_TICK_S=1 \
    ARENA_JOB_SECRET_DAYTONA_API_KEY=local-simulated-daytona-key ARENA_RELAY_HEARTBEAT_S=1 \
    ARENA_UNSEEN_TOKENS_PER_MINUTE=5000 ARENA_UNSEEN_TOKENS_TOTAL_PER_MINUTE=5000 ARENA_VALIDATIONS_PER_HOUR=5000 ARENA_SCHEMA_CHECKS_PER_MINUTE="${STACK_SCHEMA_CHECKS_PER_MINUTE:-5000}" \
    GITHUB_API_URL="$hub" GITHUB_RAW_URL="$hub/raw" \
    ARENA_FRAME_ANCESTORS="https://huggingface.co https://*.huggingface.co http://localhost:*" \
    HF_ENDPOINT="$hub" OPENID_PROVIDER_URL="$hub" OAUTH_CLIENT_ID=arena-test OAUTH_CLIENT_SECRET=arena-test-secret \
    ARENA_SANDBOX_HEALTH_S=120 ARENA_SANDBOX_LIMIT=3 ARENA_CLUSTER_SECRET="$cluster_secret" ARENA_REGISTRY_DOCKER_URL="$hub/registry/docker.io" ARENA_REGISTRY_GHCR_URL="$hub/registry/ghcr.io" \
    RUST_LOG=warn "$CARGO_TARGET_DIR/$profile/arena" serve >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 120); do
    kill -0 "$server_pid" 2>/dev/null || break
    curl -fs "$url/healthz" >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! kill -0 "$server_pid" 2>/dev/null || ! curl -fs "$url/healthz" >/dev/null; then
    port_taken "$work/server.log" && return 75
    log "the arena at $url did not answer"
    cat "$work/server.log" >&2
    exit 1
  fi
  export ARENA_TEST_URL="$url" ARENA_TEST_HUB_URL="$hub" ARENA_TEST_USERS="$ROOT/tests/fixtures/hub-users.json"
  export ARENA_TEST_HUB_REPOS="$work/hub-repos" ARENA_TEST_OPENENV_CORE="$OPENENV_CORE" ARENA_TEST_OPENENV="$OPENENV"
  export ARENA_TEST_CLUSTER_SECRET="$cluster_secret" ARENA_TEST_MCP_CLIENT="$MCP_CLIENT"
  # The stand-in speaks the Hub's git-LFS path, not Xet: the tests' huggingface_hub takes it.
  export HF_HUB_DISABLE_XET=1
}

# Waits until the stand-in at URL answers (anything), for 60 s at most, while its process (PID)
# lives: another server answering on its port does not count. A stand-in that exited because its
# port was taken answers 75; one that exited otherwise, or never answered, is said with its log.
wait_for_standin() {
  local at=$1 pid=$2 logfile=${3:-}
  for _ in $(seq 120); do
    kill -0 "$pid" 2>/dev/null || break
    curl -s -o /dev/null "$at/api/whoami-v2" && kill -0 "$pid" 2>/dev/null && return 0
    sleep 0.5
  done
  [ -n "$logfile" ] && port_taken "$logfile" && return 75
  log "the HF stand-in at $at did not answer"
  [ -z "$logfile" ] || cat "$logfile" >&2
  exit 1
}

# Whether a server's log says it could not bind its port.
port_taken() { grep -qi "address already in use\|AddrInUse" "$1" 2>/dev/null; }

stop_test_stack() {
  kill "${server_pid:-}" "${standin_pid:-}" 2>/dev/null || true
  wait "${server_pid:-}" "${standin_pid:-}" 2>/dev/null || true
  [ -n "${work:-}" ] && rm -rf "$work"
  server_pid='' standin_pid='' work=''
}
