#!/usr/bin/env bash
# Stops what start.sh DIR started (by the PIDs it wrote), and nothing else. DIR/data is kept.
set -uo pipefail
DIR=${1:?usage: stop.sh DIR}
# Alive and not a zombie (an orphan waits for its reaper a moment after it exits).
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }
for f in registry token; do
  pidfile="$DIR/$f.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null; fi
  fi
  rm -f "$pidfile" "$DIR/$f.port"
done
rm -f "$DIR/env"
