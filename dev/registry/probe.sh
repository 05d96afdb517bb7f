#!/usr/bin/env bash
# Records what a registry populated by build-images.sh answers: one block per request, with the
# status, Content-Type, Docker-Content-Digest, Content-Length, WWW-Authenticate and the start of the
# body. answers.md was written from its output.
#
#   probe.sh http://127.0.0.1:PORT
#
# When GET /v2/ answers 401 with a Bearer challenge, the auth steps are recorded first, then one
# anonymous token for every repository probed is fetched from the realm and used for the rest.
set -uo pipefail
B=${1:?usage: probe.sh http://127.0.0.1:PORT}
B=${B%/}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OCI_M=application/vnd.oci.image.manifest.v1+json
OCI_I=application/vnd.oci.image.index.v1+json
D_M=application/vnd.docker.distribution.manifest.v2+json
D_L=application/vnd.docker.distribution.manifest.list.v2+json
ARENA="$OCI_I, $D_L, $OCI_M, $D_M" # what server/src/ports/registry.rs sends for a tag
TOK=""

hdr() { grep -i "^$1:" "$TMP/h" | tail -1 | tr -d '\r' | cut -d' ' -f2-; }

# req METHOD URL_OR_PATH ACCEPT_LABEL ACCEPT [extra curl args...]
req() {
  local m=$1 p=$2 label=$3 acc=$4 args=() out="$TMP/b"
  shift 4
  [ -n "$acc" ] && args+=(-H "Accept: $acc")
  [ -n "$TOK" ] && args+=(-H "Authorization: Bearer $TOK")
  if [ "$m" = HEAD ]; then args+=(--head); out=/dev/null; else args+=(-X "$m"); fi
  case "$p" in http*) ;; *) p="$B$p" ;; esac
  : >"$TMP/b"
  curl -s -D "$TMP/h" -o "$out" "${args[@]}" "$@" "$p"
  local st ct dcd cl wa bd=""
  st=$(head -1 "$TMP/h" | tr -d '\r' | cut -d' ' -f2-)
  ct=$(hdr content-type); dcd=$(hdr docker-content-digest); cl=$(hdr content-length); wa=$(hdr www-authenticate)
  [ -s "$TMP/b" ] && bd=$(sha256sum "$TMP/b" | cut -c1-12)
  echo "### $m ${p#"$B"}  [Accept: $label]${TOK:+ [Bearer]}"
  echo "  -> $st | CT=${ct:--} | DCD=${dcd:--} | CL=${cl:--} | sha256(body)=${bd:--}${wa:+ | WWW-Authenticate: $wa}"
  if [ -s "$TMP/b" ]; then
    if LC_ALL=C grep -q '[^[:print:][:space:]]' "$TMP/b"; then echo "  body: (binary, $(wc -c <"$TMP/b") bytes)"
    else echo "  body: $(head -c 300 "$TMP/b" | tr '\n' ' ')"; fi
  fi
}

digest_of() { # digest_of PATH ACCEPT : the Docker-Content-Digest of a HEAD
  curl -s --head ${TOK:+-H "Authorization: Bearer $TOK"} -H "Accept: $2" "$B$1" | tr -d '\r' |
    sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p'
}
json_get() { # json_get PATH ACCEPT PYTHON_EXPR(m)
  curl -s ${TOK:+-H "Authorization: Bearer $TOK"} -H "Accept: $2" "$B$1" |
    python3 -c "import json, sys; m = json.load(sys.stdin); print($3)"
}

REPOS="arena/single arena/multi arena/armonly arena/docker arena/huge arena/private arena/schema1 arena/nosuchrepo"
challenge=$(curl -s -o /dev/null -D - "$B/v2/" | tr -d '\r' | sed -n 's/^[Ww]ww-[Aa]uthenticate: *[Bb]earer *//p')
if [ -n "$challenge" ]; then
  realm=$(sed -n 's/.*realm="\([^"]*\)".*/\1/p' <<<"$challenge")
  service=$(sed -n 's/.*service="\([^"]*\)".*/\1/p' <<<"$challenge")
  echo "## token auth (realm $realm, service $service)"
  req GET /v2/ none ""
  req HEAD /v2/ none ""
  req GET /v2/arena/single/manifests/v1 arena "$ARENA"
  req HEAD /v2/arena/single/manifests/v1 arena "$ARENA"
  req GET /v2/arena/single/blobs/sha256:$(printf '0%.0s' $(seq 64)) none ""
  req GET /v2/arena/single/tags/list none ""
  req GET /v2/_catalog none ""
  req GET /v2/ none "" -H "Authorization: Bearer not.a.jwt"
  req GET "$realm?service=$service&scope=repository:arena/single:pull" none ""
  single=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["token"])' "$TMP/b")
  python3 - "$single" <<'EOF'
import base64, json, sys
part = lambda s: json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
h, c, _ = sys.argv[1].split(".")
h = part(h)
h = {k: (v if k != "x5c" else [f"<{len(x)} base64 chars>" for x in v]) for k, v in h.items()}
print("  JWT header:", json.dumps(h))
print("  JWT claims:", json.dumps(part(c)))
EOF
  req GET "$realm?scope=repository:arena/single:pull" "none (no service)" ""
  req GET "$realm?service=other&scope=repository:arena/single:pull" "none (wrong service)" ""
  req GET "$realm?service=$service&scope=repository:arena/single:pull" "none (wrong Basic credentials)" "" -u nobody:wrong
  req GET "$realm?service=$service&scope=repository:arena/single:pull,push" "none (anonymous push asked)" ""
  req GET "$realm?service=$service&scope=repository:arena/private:pull" "none (denied repo)" ""
  private=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["token"])' "$TMP/b")
  TOK=$single
  req GET /v2/ none ""
  req GET /v2/arena/single/manifests/v1 arena "$ARENA"
  req GET /v2/arena/multi/manifests/v1 "arena (token for arena/single only)" "$ARENA"
  TOK=$private
  req GET /v2/arena/private/manifests/v1 "arena (token with empty access)" "$ARENA"
  TOK=""
  q=""
  for r in $REPOS; do q="$q&scope=repository:$r:pull"; done
  TOK=$(curl -s "$realm?service=$service$q" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')
  echo
  echo "## content (with one token for: $REPOS)"
fi

Z64=$(printf '0%.0s' $(seq 64))
req GET /v2/ none ""
req HEAD /v2/ none ""
for a in "none|" "$OCI_M|$OCI_M" "$OCI_I|$OCI_I" "$D_L|$D_L" "$D_M|$D_M" "arena|$ARENA" "*/*|*/*"; do
  req GET /v2/arena/single/manifests/v1 "${a%%|*}" "${a#*|}"
done
req HEAD /v2/arena/single/manifests/v1 "$OCI_M" "$OCI_M"
req HEAD /v2/arena/single/manifests/v1 none ""
SD=$(digest_of /v2/arena/single/manifests/v1 "$OCI_M")
req GET "/v2/arena/single/manifests/$SD" arena "$ARENA"
req GET "/v2/arena/single/manifests/$SD" none ""
for a in "none|" "$OCI_M|$OCI_M" "$D_M|$D_M" "$OCI_M, $D_M|$OCI_M, $D_M" "$D_L|$D_L" "$OCI_I|$OCI_I" "arena|$ARENA"; do
  req GET /v2/arena/multi/manifests/v1 "${a%%|*}" "${a#*|}"
done
req HEAD /v2/arena/multi/manifests/v1 none ""
req HEAD /v2/arena/multi/manifests/v1 arena "$ARENA"
ID=$(digest_of /v2/arena/multi/manifests/v1 "$OCI_I")
MD=$(json_get /v2/arena/multi/manifests/v1 "$OCI_I" 'm["manifests"][0]["digest"]')
for a in "none|" "$OCI_M|$OCI_M" "arena|$ARENA"; do
  req GET "/v2/arena/multi/manifests/$ID" "${a%%|*}" "${a#*|}"
done
for a in "none|" "$OCI_M|$OCI_M" "$D_M|$D_M" "arena|$ARENA"; do
  req GET "/v2/arena/multi/manifests/$MD" "${a%%|*}" "${a#*|}"
done
req GET /v2/arena/armonly/manifests/v1 arena "$ARENA"
req GET /v2/arena/armonly/manifests/index arena "$ARENA"
for a in "none|" "$OCI_M|$OCI_M" "$D_M|$D_M" "arena|$ARENA"; do
  req GET /v2/arena/docker/manifests/v1 "${a%%|*}" "${a#*|}"
done
for a in "none|" "$OCI_I|$OCI_I" "$D_M|$D_M" "$D_L|$D_L" "arena|$ARENA"; do
  req GET /v2/arena/docker/manifests/list "${a%%|*}" "${a#*|}"
done
DL=$(json_get /v2/arena/docker/manifests/list "$D_L" 'm["manifests"][0]["digest"]')
req GET "/v2/arena/docker/manifests/$DL" "$D_M (the list's entry's own type)" "$D_M"
req GET "/v2/arena/docker/manifests/$DL" "$OCI_M" "$OCI_M"
req GET /v2/arena/huge/manifests/v1 arena "$ARENA"
req GET /v2/arena/schema1/manifests/v1 "arena (404 unless start.sh --schema1 and SCHEMA1=1)" "$ARENA"
req GET /v2/arena/single/manifests/nope arena "$ARENA"
req HEAD /v2/arena/single/manifests/nope arena "$ARENA"
req GET /v2/arena/nosuchrepo/manifests/v1 arena "$ARENA"
req GET "/v2/arena/single/manifests/sha256:$Z64" arena "$ARENA"
req GET /v2/arena/single/manifests/sha256:abc arena "$ARENA"
req GET "/v2/arena/single/manifests/sha256:$(printf 'A%.0s' $(seq 64))" arena "$ARENA"
req GET /v2/Arena/Single/manifests/v1 arena "$ARENA"
CFG=$(json_get /v2/arena/single/manifests/v1 "$OCI_M" 'm["config"]["digest"]')
LAY=$(json_get /v2/arena/single/manifests/v1 "$OCI_M" 'm["layers"][0]["digest"]')
req GET "/v2/arena/single/blobs/$CFG" "*/*" "*/*"
req HEAD "/v2/arena/single/blobs/$CFG" "*/*" "*/*"
req GET "/v2/arena/single/blobs/$CFG" "none, Range: bytes=0-9" "" -H "Range: bytes=0-9"
req GET "/v2/arena/single/blobs/$LAY" none ""
req GET "/v2/arena/docker/blobs/$CFG" "*/* (same config, other repo)" "*/*"
req GET "/v2/arena/single/blobs/$SD" "none (a manifest's digest as a blob)" ""
req GET "/v2/arena/single/blobs/sha256:$Z64" none ""
req HEAD "/v2/arena/single/blobs/sha256:$Z64" none ""
req GET /v2/arena/single/blobs/sha256:abc none ""
req GET /v2/arena/single/blobs/notadigest none ""
req GET "/v2/arena/nosuchrepo/blobs/$CFG" none ""
req GET /v2/arena/single/tags/list none ""
