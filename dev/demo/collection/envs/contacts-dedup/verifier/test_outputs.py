import csv
import json


def test_report_counts():
    report = json.load(open("/app/output/report.json"))
    assert report["input_rows"] == 6
    assert report["unique_rows"] == 4
    assert report["duplicates_removed"] == 2


def test_clean_rows():
    rows = list(csv.DictReader(open("/app/output/contacts_clean.csv")))
    assert [r["email"].strip().lower() for r in rows] == [
        "ana.ruiz@example.org",
        "ben@example.net",
        "chen.wei@example.com",
        "dara@example.ie",
    ]
    assert rows[0]["name"] == "Ana Ruiz"
    assert rows[3]["city"] == "Cork"
