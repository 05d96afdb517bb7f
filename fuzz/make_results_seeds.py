"""Writes fuzz/seeds/results/: result files for the `results` target (an eval_task_outcomes.json,
a NUL line, a score.json) over the local-demo fixture's twelve held-out tasks and three trials,
computed by the stand-in's simulated pipeline (standin/sim), one consistent set per seed.
Usage: python3 fuzz/make_results_seeds.py"""

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "standin" / "sim"))
from posttrainarena_sim.score import outcomes, score_v2  # noqa: E402

TASKS = [f"local-heldout-{i:02d}" for i in range(1, 13)]
RUN = "run-fuzz"


def row(rng, task):
    r = rng.random()
    if r < 0.1:
        return {"task_id": task, "scored": False, "error": "sandbox setup failed", "reward": None}
    if r < 0.2:
        return {"task_id": task, "scored": True, "error": "Agent exceeded its wall-clock budget", "error_category": "timeout",
                "verifier_error": None, "valid_llm_trajectory": True, "reward": 0.0}
    return {"task_id": task, "scored": True, "error": None, "verifier_error": None, "valid_llm_trajectory": True,
            "reward": rng.choice([0.0, 0.5, 1.0])}


for seed in range(4):
    rng = random.Random(seed)
    arms = {"baseline": {"stage": "baseline_eval", "cells": []}, "final": {"stage": "posttrain_eval", "cells": []}}
    suite = {"name": "local-heldout", "dataset": {"repo_id": "arena-demo/local-heldout", "revision": "a87bdb3db93ba665b7cf63e38eddb72757027e88",
             "path": "tasks", "task_list": f"/tmp/w/job-inputs/{RUN}/task-lists/eval_suite-local-heldout.txt"}, "task_ids": TASKS}
    for arm, stage in (("baseline", "baseline_eval"), ("final", "posttrain_eval")):
        maps = []
        for trial in (1, 2, 3):
            o = outcomes([row(rng, t) for t in TASKS], TASKS)
            step = stage if trial == 1 else f"{stage}.local-heldout.t{trial:02d}"
            arms[arm]["cells"].append({"suite": "local-heldout", "trial": trial, "stage": step,
                                       "jobs_dir": f"/tmp/w/job-inputs/{RUN}/runs/{RUN}/jobs/{step}", "score": 0.0, "outcomes": o})
            maps.append(o)
        suite[arm] = maps
    v2 = score_v2([suite], 3, "baseline_eval", "posttrain_eval")
    files = json.dumps({"schema_version": 1, "pass_threshold": 1.0, "arms": arms}, sort_keys=True)
    report = json.dumps({"schema_version": 1, "run_name": RUN, "baseline_score": 0.0, "score_after_posttrain": 0.0,
                         "delta_score": 0.0, "score_v2": v2}, sort_keys=True)
    (ROOT / "fuzz" / "seeds" / "results" / f"run-{seed}").write_text(files + "\n\0\n" + report)
print("wrote", len(list((ROOT / "fuzz" / "seeds" / "results").iterdir())), "seeds")
