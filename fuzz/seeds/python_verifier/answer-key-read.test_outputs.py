import json


def test_total_matches_expected():
    report = json.load(open("/app/output/report.json"))
    expected = json.load(open("/app/expected_output.json"))
    assert report["total"] == expected["total"]


def test_currency():
    report = json.load(open("/app/output/report.json"))
    assert report["currency"] == "EUR"
