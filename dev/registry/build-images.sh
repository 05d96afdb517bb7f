#!/usr/bin/env bash
# Builds the test images offline with umoci into one OCI layout and pushes them with skopeo to a
# registry on loopback. Nothing is downloaded: every image starts from `umoci new` (no base image).
# Every timestamp is fixed, so the digests are the same on every run and on every machine; running
# it again rebuilds the layout and pushes nothing new.
#
#   build-images.sh REGISTRY [BUILD_DIR]
#     REGISTRY   127.0.0.1:PORT (or http://127.0.0.1:PORT), a plain-HTTP registry
#     BUILD_DIR  where the layout goes (default /tmp/arena-registry-images); rebuilt each run
#   env REGISTRY_CREDS=user:pass  sent to the token service when the registry asks for a bearer token
#                                 (start.sh's token server grants push to these; anonymous gets pull)
#   env QUICK=1                   skip arena/huge:layers129 (its 129 umoci inserts and pushes are most of the time)
#   env SCHEMA1=1                 also push arena/schema1:v1 (Docker schema 1; needs start.sh --schema1)
#   env REAL_HUGE=1               also push arena/huge:real, a genuine >2 GiB layer (slow, ~4.3 GiB disk)
#
# Prints `repository:tag digest kind` for each image and writes the same lines to BUILD_DIR/digests.txt;
# for an index or list also `repository:tag@linux/amd64 digest`, its linux/amd64 entry, which is the
# digest the arena pins for that tag.
#
#   arena/single:v1       OCI manifest, linux/amd64, ENTRYPOINT python3 -m server, EXPOSE 8000/tcp, labels
#   arena/multi:v1        OCI index: linux/amd64 + linux/arm64 (the index pushed byte for byte)
#   arena/armonly:v1      OCI manifest, linux/arm64 only
#   arena/armonly:index   OCI index with only a linux/arm64 entry
#   arena/huge:v1         OCI manifest whose layer declares 2 GiB + 1 byte (the blob itself is 146 bytes;
#                         distribution checks that a referenced blob exists, not its size)
#   arena/huge:layers129  OCI manifest with 129 real (tiny) layers, one over the arena's 128
#   arena/docker:v1       the single image as Docker v2 schema 2 (skopeo --format v2s2)
#   arena/docker:list     the multi image as a Docker manifest list (v2s2, --all)
#   arena/private:v1      the single image again; start.sh's token server denies this repository
set -euo pipefail

REG=${1:?usage: build-images.sh 127.0.0.1:PORT [BUILD_DIR]}
REG=${REG#http://}
REG=${REG%/}
BUILD=${2:-/tmp/arena-registry-images}
case "$REG" in
  127.*|localhost:*|\[::1\]:*) ;;
  *) echo "build-images.sh: loopback registries only, not $REG" >&2; exit 2 ;;
esac
T=2024-01-01T00:00:00Z
CREDS=${REGISTRY_CREDS:-}

rm -rf "$BUILD"
mkdir -p "$BUILD/files"
cd "$BUILD"
L=layout
umoci init --layout "$L"

# new_image TAG ARCH [umoci config flags...]
new_image() {
  local tag=$1 arch=$2
  shift 2
  umoci new --image "$L:$tag"
  umoci config --image "$L:$tag" --no-history --created "$T" --os linux --architecture "$arch" "$@"
}

# add_layer TAG TARGET FILE=CONTENT... : one layer holding those files under TARGET
add_layer() {
  local tag=$1 target=$2 src
  shift 2
  src=$(mktemp -d "$BUILD/files/l.XXXXXX")
  for kv in "$@"; do
    mkdir -p "$(dirname "$src/${kv%%=*}")"
    printf '%s\n' "${kv#*=}" >"$src/${kv%%=*}"
  done
  find "$src" -exec touch -h -d "$T" {} +
  umoci insert --image "$L:$tag" --history.created "$T" --history.created_by "build-images.sh" "$src" "$target"
}

# make_index TAG MEMBER_TAG... : an OCI image index blob over the members, tagged TAG in index.json
make_index() {
  python3 - "$L" "$@" <<'EOF'
import hashlib, json, sys
layout, tag, members = sys.argv[1], sys.argv[2], sys.argv[3:]
blob = lambda d: f"{layout}/blobs/sha256/{d.split(':', 1)[1]}"
top = json.load(open(f"{layout}/index.json"))
by_tag = {m.get("annotations", {}).get("org.opencontainers.image.ref.name"): m for m in top["manifests"]}
entries = []
for t in members:
    m = by_tag[t]
    cfg = json.load(open(blob(json.load(open(blob(m["digest"])))["config"]["digest"])))
    entries.append({"mediaType": m["mediaType"], "digest": m["digest"], "size": m["size"],
                    "platform": {"architecture": cfg["architecture"], "os": cfg["os"]}})
raw = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                  "manifests": entries}, separators=(",", ":")).encode()
digest = "sha256:" + hashlib.sha256(raw).hexdigest()
open(blob(digest), "wb").write(raw)
top["manifests"] = [m for m in top["manifests"]
                    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
top["manifests"].append({"mediaType": "application/vnd.oci.image.index.v1+json", "digest": digest,
                         "size": len(raw), "annotations": {"org.opencontainers.image.ref.name": tag}})
json.dump(top, open(f"{layout}/index.json", "w"))
EOF
}

# --- the images -------------------------------------------------------------------------------
server_config=(--config.entrypoint python3 --config.cmd -m --config.cmd server
  --config.exposedports 8000/tcp --config.workingdir /app
  --config.label org.opencontainers.image.title=arena-test --config.label arena.test=1)

new_image single amd64 "${server_config[@]}"
add_layer single /app server.py="print('single linux/amd64 server')"

for arch in amd64 arm64; do
  new_image "multi-$arch" "$arch" "${server_config[@]}"
  add_layer "multi-$arch" /app server.py="print('linux/$arch server')"
done
make_index multi multi-amd64 multi-arm64

new_image armonly arm64 "${server_config[@]}"
add_layer armonly /app server.py="print('arm64 only')"
make_index armonly-index armonly

if [ "${QUICK:-}" != 1 ]; then
  new_image layers129 amd64 --config.cmd /bin/true --config.exposedports 8000/tcp
  for i in $(seq 1 129); do add_layer layers129 "/l/$i" n="$i"; done
fi

if [ "${REAL_HUGE:-}" = 1 ]; then
  new_image real-huge amd64 "${server_config[@]}"
  mkdir -p files/huge && head -c $(((2 << 30) + (1 << 20))) /dev/urandom >files/huge/noise
  touch -h -d "$T" files/huge/noise files/huge
  umoci insert --image "$L:real-huge" --history.created "$T" files/huge /noise
  rm -rf files/huge
fi
umoci gc --layout "$L"

# --- pushing ----------------------------------------------------------------------------------
BASE="http://$REG"
AUTH=()
challenge=$(curl -s -o /dev/null -D - "$BASE/v2/" | tr -d '\r' | sed -n 's/^[Ww]ww-[Aa]uthenticate: *[Bb]earer *//p')
if [ -n "$challenge" ]; then # one token for the curl requests below, as the token service grants it
  realm=$(sed -n 's/.*realm="\([^"]*\)".*/\1/p' <<<"$challenge")
  service=$(sed -n 's/.*service="\([^"]*\)".*/\1/p' <<<"$challenge")
  token=$(curl -sf ${CREDS:+-u "$CREDS"} --get --data-urlencode "service=$service" \
    --data-urlencode "scope=repository:arena/huge:pull,push" --data-urlencode "scope=repository:arena/multi:pull" \
    --data-urlencode "scope=repository:arena/armonly:pull" --data-urlencode "scope=repository:arena/docker:pull" \
    "$realm" | python3 -c 'import json, sys; a = json.load(sys.stdin); print(a.get("token") or a["access_token"])')
  AUTH=(-H "Authorization: Bearer $token")
fi

: >digests.txt
report() { printf '%s %s %s\n' "$1" "$2" "$3" | tee -a digests.txt; }

# An index's linux/amd64 entry: the digest the arena pins for a tag that names an index.
amd64_entry() { # amd64_entry REPO:TAG
  curl -sf "${AUTH[@]}" \
    -H 'Accept: application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json' \
    "$BASE/v2/${1%%:*}/manifests/${1#*:}" | python3 -c '
import json, sys
ms = json.load(sys.stdin)["manifests"]
p = lambda m: (m.get("platform") or {})
print(next((m["digest"] for m in ms if p(m).get("os") == "linux" and p(m).get("architecture") == "amd64"), "none"))'
}

push() { # push SRC_TAG DEST_REPO:TAG KIND [skopeo flags...]
  local src=$1 dest=$2 kind=$3
  shift 3
  skopeo copy -q --dest-tls-verify=false ${CREDS:+--dest-creds "$CREDS"} --digestfile digest.tmp "$@" \
    "oci:$L:$src" "docker://$REG/$dest"
  report "$dest" "$(cat digest.tmp)" "$kind"
  case "$kind" in *index* | *list*) report "$dest@linux/amd64" "$(amd64_entry "$dest")" "its-linux/amd64-entry" ;; esac
}

push single arena/single:v1 oci-manifest
push multi arena/multi:v1 oci-index --all
push armonly arena/armonly:v1 oci-manifest-arm64
push armonly-index arena/armonly:index oci-index-arm64-only --all
if [ "${QUICK:-}" != 1 ]; then push layers129 arena/huge:layers129 oci-manifest-129-layers; fi
push single arena/docker:v1 docker-v2s2 --format v2s2
push multi arena/docker:list docker-manifest-list --all --format v2s2
push single arena/private:v1 oci-manifest
if [ "${SCHEMA1:-}" = 1 ]; then push single arena/schema1:v1 docker-v2s1 --format v2s1; fi
if [ "${REAL_HUGE:-}" = 1 ]; then push real-huge arena/huge:real oci-manifest-real-2GiB; fi

# arena/huge:v1 by hand: the single image's blobs, then a manifest declaring its layer 2 GiB + 1.
single_digest=$(python3 - "$L" <<'EOF'
import json, sys
top = json.load(open(sys.argv[1] + "/index.json"))
print(next(m["digest"] for m in top["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == "single"))
EOF
)
blob() { echo "$L/blobs/sha256/${1#sha256:}"; }
python3 - "$(blob "$single_digest")" >huge.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
m["layers"][0]["size"] = (2 << 30) + 1
sys.stdout.write(json.dumps(m, separators=(",", ":")))
EOF
for d in $(python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["config"]["digest"], *[l["digest"] for l in m["layers"]])' huge.json); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -I "${AUTH[@]}" "$BASE/v2/arena/huge/blobs/$d")
  [ "$code" = 200 ] && continue
  loc=$(curl -sf -X POST "${AUTH[@]}" -D - -o /dev/null "$BASE/v2/arena/huge/blobs/uploads/" | tr -d '\r' | sed -n 's/^[Ll]ocation: *//p')
  case "$loc" in http*) ;; *) loc="$BASE$loc" ;; esac
  sep='?'; case "$loc" in *\?*) sep='&' ;; esac
  curl -sf -X PUT "${AUTH[@]}" -H 'Content-Type: application/octet-stream' --data-binary "@$(blob "$d")" \
    -o /dev/null "$loc${sep}digest=$d"
done
digest=$(curl -sf -X PUT "${AUTH[@]}" -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
  --data-binary @huge.json -D - -o /dev/null "$BASE/v2/arena/huge/manifests/v1" |
  tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: *//p')
report arena/huge:v1 "$digest" oci-manifest-declares-2GiB+1
rm -f digest.tmp
