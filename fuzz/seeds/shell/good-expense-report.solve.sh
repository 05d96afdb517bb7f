#!/bin/bash
# Reference solution: aggregate the claims with the standard library.
set -euo pipefail
mkdir -p /app/output
python3 - <<'PY'
import csv
import json

rows = list(csv.DictReader(open("/app/data/expenses.csv")))
by_category = {}
for row in rows:
    by_category[row["category"]] = by_category.get(row["category"], 0.0) + float(row["amount"])
currencies = sorted({row["currency"] for row in rows})
report = {
    "total": round(sum(float(row["amount"]) for row in rows), 2),
    "currency": currencies[0],
    "claim_count": len(rows),
    "by_category": {k: round(v, 2) for k, v in by_category.items()},
}
json.dump(report, open("/app/output/report.json", "w"), indent=2)
PY
