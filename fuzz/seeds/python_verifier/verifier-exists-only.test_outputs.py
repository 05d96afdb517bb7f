import os


def test_report_exists():
    assert os.path.exists("/app/output/report.json")


def test_output_dir_exists():
    assert os.path.isdir("/app/output")
