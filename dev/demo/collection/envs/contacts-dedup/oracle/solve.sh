#!/bin/bash
# Reference solution: keep the first row per normalised e-mail address.
set -euo pipefail
mkdir -p /app/output
python3 - <<'PY'
import csv
import json

with open("/app/data/contacts.csv", newline="") as fh:
    reader = csv.DictReader(fh)
    fields = reader.fieldnames
    rows = list(reader)
seen, kept = set(), []
for row in rows:
    key = row["email"].strip().lower()
    if key not in seen:
        seen.add(key)
        kept.append(row)
with open("/app/output/contacts_clean.csv", "w", newline="") as fh:
    writer = csv.DictWriter(fh, fieldnames=fields)
    writer.writeheader()
    writer.writerows(kept)
report = {"input_rows": len(rows), "unique_rows": len(kept), "duplicates_removed": len(rows) - len(kept)}
json.dump(report, open("/app/output/report.json", "w"), indent=2)
PY
