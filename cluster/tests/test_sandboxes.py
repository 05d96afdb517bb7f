"""Where a sandbox is reached, and that a run's cleanup covers both of its namespaces."""

from types import SimpleNamespace

from arena_cluster.sandboxes import EVAL_PURPOSE, TRAIN_PURPOSE, Sandboxes, cancel_all, exposed_url


def test_the_url_of_a_port_is_the_one_whose_host_names_it():
    urls = ["https://job1--9000.hf.jobs", "https://job1--8000.hf.jobs/"]
    assert exposed_url(urls, 8000, [9000, 8000]) == "https://job1--8000.hf.jobs"
    assert exposed_url(urls, 7000, [9000, 7000]) is None, "never by its place in a list of several"
    assert exposed_url(["https://job1--8000.hf.jobs"], 8000) == "https://job1--8000.hf.jobs"


def test_a_job_that_exposes_one_port_has_one_url_whatever_its_host():
    """The stand-in lists a loopback port of its own per exposed port (behind its token-checking
    proxy): a job that exposes just that one port, with exactly one URL listed, is reached there."""
    assert exposed_url(["http://127.0.0.1:41234/"], 8000, [8000]) == "http://127.0.0.1:41234"
    assert exposed_url(["http://127.0.0.1:41234"], 8000) == "http://127.0.0.1:41234"
    assert exposed_url(["http://127.0.0.1:41234", "http://127.0.0.1:41235"], 8000, [8000]) is None
    assert exposed_url(["http://127.0.0.1:41234"], 8000, [8000, 9000]) is None, "two ports: which one is unknown"
    assert exposed_url([], 8000, [8000]) is None and exposed_url(None, 8000) is None


class FakeJobs:
    """HF's Jobs API as `Sandboxes` uses it, over jobs in several namespaces."""

    def __init__(self, jobs):
        self.jobs = jobs  # namespace -> [(id, stage, labels)]
        self.canceled = []

    def list_jobs(self, labels, namespace):
        return [SimpleNamespace(id=i, status=SimpleNamespace(stage=stage), labels=lab)
                for i, stage, lab in self.jobs.get(namespace, [])
                if all(lab.get(k) == v for k, v in labels.items())]

    def cancel_job(self, job_id, namespace):
        if job_id == "stuck":
            raise RuntimeError("HF answered 500")
        self.canceled.append((namespace, job_id))


def test_a_runs_cleanup_stops_its_sandboxes_in_both_namespaces():
    run = {"arena-run": "oe-1"}
    api = FakeJobs({
        "sandboxes": [("t1", "RUNNING", {**run, "arena-purpose": TRAIN_PURPOSE}),
                      ("done", "COMPLETED", {**run, "arena-purpose": TRAIN_PURPOSE}),
                      ("other", "RUNNING", {"arena-run": "oe-2", "arena-purpose": TRAIN_PURPOSE})],
        "held-out": [("e1", "SCHEDULING", {**run, "arena-purpose": EVAL_PURPOSE}),
                     ("stuck", "RUNNING", {**run, "arena-purpose": EVAL_PURPOSE})],
    })
    places = (Sandboxes(api, "sandboxes", "hf_reader", "oe-1"),
              Sandboxes(api, "held-out", "hf_eval_reader", "oe-1", "ARENA_EVAL_TOKEN"))
    problems = cancel_all(places)
    assert api.canceled == [("sandboxes", "t1"), ("held-out", "e1")]
    assert problems == ["canceling sandbox stuck failed: HF answered 500"]
