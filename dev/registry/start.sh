#!/usr/bin/env bash
# Starts a real CNCF distribution registry (Debian's docker-registry 2.8) on a free loopback port,
# with filesystem storage in DIR, and, unless --no-auth, the anonymous token server beside it on
# another free loopback port (`auth: token`, as Docker Hub and GHCR do). Nothing leaves loopback.
#
#   start.sh DIR [--no-auth] [--key-id] [--grant-push] [--deny REPO]... [--schema1] [--fields F]
#
#   --no-auth      no token auth: GET /v2/ answers 200 and anyone may push
#   --key-id       tokens name their key by `kid` instead of carrying the certificate in `x5c`
#   --grant-push   the token server grants push to anonymous requests too
#   --deny REPO    a repository whose tokens carry no access (default: arena/private)
#   --schema1      accept Docker schema 1 pushes (`compatibility.schema1.enabled`; off by default in 2.8)
#   --fields F     the token answer carries `token` and `access_token` (F=both, Docker Hub's; the
#                  default), only `token` (F=token, GHCR's) or only `access_token` (F=access_token)
#
# Writes in DIR: data/ (the registry's storage; kept across restarts), auth/{key,cert}.pem (made once
# with openssl), config.yml, registry.port, registry.pid, registry.log, and with auth token.port,
# token.pid, token.log; and env, a file to source:
#   REGISTRY=127.0.0.1:PORT  REGISTRY_URL=http://127.0.0.1:PORT  TOKEN_REALM=http://127.0.0.1:TPORT/token
#   REGISTRY_SAME_ORIGIN_URL=http://127.0.0.1:TPORT  REGISTRY_SERVICE=registry.test
#   REGISTRY_ISSUER=arena-test-token  REGISTRY_CREDS=arena:arena
# REGISTRY_URL is laid out like Docker Hub (the realm is on another origin: the arena needs
# ARENA_REGISTRY_AUTH_ORIGINS=http://127.0.0.1:TPORT); REGISTRY_SAME_ORIGIN_URL is the same registry
# through the token server, laid out like GHCR (realm on the registry's own origin).
# REGISTRY_CREDS are the Basic credentials the token server grants push to (skopeo --dest-creds;
# build-images.sh reads the variable). stop.sh DIR stops both.
set -euo pipefail

DIR=${1:?usage: start.sh DIR [--no-auth] [--key-id] [--grant-push] [--deny REPO]... [--schema1] [--fields F]}
shift
AUTH=1
TOKEN_FLAGS=()
DENY=()
SCHEMA1=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-auth) AUTH=0 ;;
    --key-id) TOKEN_FLAGS+=(--key-id) ;;
    --grant-push) TOKEN_FLAGS+=(--grant-push) ;;
    --deny) DENY+=(--deny "$2"); shift ;;
    --fields) TOKEN_FLAGS+=(--fields "$2"); shift ;;
    --schema1) SCHEMA1="compatibility:
  schema1:
    enabled: true" ;;
    *) echo "start.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#DENY[@]} -gt 0 ] || DENY=(--deny arena/private)
HERE=$(cd "$(dirname "$0")" && pwd)
SERVICE=registry.test
ISSUER=arena-test-token
CREDS=arena:arena
REGISTRY_BIN=${REGISTRY_BIN:-/usr/bin/docker-registry}
[ -x "$REGISTRY_BIN" ] || { echo "start.sh: no $REGISTRY_BIN (apt-get install docker-registry)" >&2; exit 1; }

mkdir -p "$DIR/data" "$DIR/auth"
DIR=$(cd "$DIR" && pwd)
for f in registry token; do
  if [ -s "$DIR/$f.pid" ] && kill -0 "$(cat "$DIR/$f.pid")" 2>/dev/null &&
    ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$(cat "$DIR/$f.pid")/stat" 2>/dev/null; then
    echo "start.sh: $f already running in $DIR (pid $(cat "$DIR/$f.pid")); stop.sh $DIR first" >&2
    exit 1
  fi
done
rm -f "$DIR"/{registry,token}.{port,pid} "$DIR/env"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_for URL: until it answers anything (any HTTP status), at most 10 s
wait_for() {
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" || true)" != 000 ] && return 0
    sleep 0.1
  done
  return 1
}

auth_config=""
if [ "$AUTH" = 1 ]; then
  if [ ! -s "$DIR/auth/key.pem" ] || [ ! -s "$DIR/auth/cert.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/auth/key.pem" -out "$DIR/auth/cert.pem" \
      -days 3650 -subj "/CN=$ISSUER" 2>/dev/null
  fi
  nohup python3 "$HERE/token-server.py" --key "$DIR/auth/key.pem" --cert "$DIR/auth/cert.pem" \
    --port 0 --port-file "$DIR/token.port" --proxy-port-file "$DIR/registry.port" --service "$SERVICE" --issuer "$ISSUER" \
    --push-credentials "$CREDS" "${DENY[@]}" ${TOKEN_FLAGS[@]+"${TOKEN_FLAGS[@]}"} \
    >"$DIR/token.log" 2>&1 </dev/null &
  echo $! >"$DIR/token.pid"
  for _ in $(seq 1 100); do [ -s "$DIR/token.port" ] && break; sleep 0.1; done
  [ -s "$DIR/token.port" ] || { echo "start.sh: the token server did not start:" >&2; cat "$DIR/token.log" >&2; exit 1; }
  TOKEN_PORT=$(cat "$DIR/token.port")
  wait_for "http://127.0.0.1:$TOKEN_PORT/healthz"
  auth_config="auth:
  token:
    realm: http://127.0.0.1:$TOKEN_PORT/token
    service: $SERVICE
    issuer: $ISSUER
    rootcertbundle: $DIR/auth/cert.pem"
fi

# A free port can be taken between the probe and the bind: try a few.
for attempt in 1 2 3 4 5; do
  PORT=$(free_port)
  cat >"$DIR/config.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$PORT
  secret: arena-test-registry-secret
  headers:
    X-Content-Type-Options: [nosniff]
$auth_config
$SCHEMA1
EOF
  nohup "$REGISTRY_BIN" serve "$DIR/config.yml" >"$DIR/registry.log" 2>&1 </dev/null &
  echo $! >"$DIR/registry.pid"
  if wait_for "http://127.0.0.1:$PORT/v2/" && kill -0 "$(cat "$DIR/registry.pid")" 2>/dev/null; then
    echo "$PORT" >"$DIR/registry.port"
    break
  fi
  kill "$(cat "$DIR/registry.pid")" 2>/dev/null || true
  rm -f "$DIR/registry.pid"
  [ "$attempt" = 5 ] && { echo "start.sh: the registry did not start:" >&2; cat "$DIR/registry.log" >&2; exit 1; }
done

{
  echo "REGISTRY=127.0.0.1:$PORT"
  echo "REGISTRY_URL=http://127.0.0.1:$PORT"
  if [ "$AUTH" = 1 ]; then
    echo "TOKEN_REALM=http://127.0.0.1:$TOKEN_PORT/token"
    echo "REGISTRY_SAME_ORIGIN_URL=http://127.0.0.1:$TOKEN_PORT"
    echo "REGISTRY_SERVICE=$SERVICE"
    echo "REGISTRY_ISSUER=$ISSUER"
    echo "REGISTRY_CREDS=$CREDS"
  fi
} >"$DIR/env"
cat "$DIR/env"
