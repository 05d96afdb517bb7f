import json


def summary():
    return json.load(open("/app/output/summary.json"))


def test_line_counts():
    data = summary()
    assert data["total_lines"] == 9
    assert data["by_level"] == {"INFO": 4, "WARN": 2, "ERROR": 3}


def test_most_common_error():
    assert summary()["most_common_error"] == "payment gateway timeout"


def test_first_error_at():
    assert summary()["first_error_at"] == "2024-05-02T10:02:40Z"
