#!/bin/bash
# Reference solution: parse each log line into timestamp, level and message.
set -euo pipefail
mkdir -p /app/output
python3 - <<'PY'
import collections
import json

levels = collections.Counter()
errors = collections.Counter()
first_error = None
lines = [l for l in open("/app/data/app.log").read().splitlines() if l.strip()]
for line in lines:
    stamp, level, message = line.split(None, 2)
    levels[level] += 1
    if level == "ERROR":
        errors[message] += 1
        first_error = first_error or stamp
summary = {
    "total_lines": len(lines),
    "by_level": {k: levels.get(k, 0) for k in ("INFO", "WARN", "ERROR")},
    "most_common_error": errors.most_common(1)[0][0],
    "first_error_at": first_error,
}
json.dump(summary, open("/app/output/summary.json", "w"), indent=2)
PY
