import json


def load_report():
    return json.load(open("/app/output/report.json"))


def test_total():
    report = load_report()
    assert report["total"] == 1234.5


def test_currency():
    data = load_report()
    assert data["currency"] == "EUR"


def test_claim_count():
    assert load_report()["claim_count"] == 5


def test_by_category():
    assert load_report()["by_category"] == {
        "travel": 594.6,
        "meals": 89.9,
        "lodging": 250.0,
        "equipment": 300.0,
    }
