"""The local stand-in's simulation of the BenchFlow training pipeline and of the job image around
it: `posttrainarena-train`, `posttrainarena-vllm-serve`, BenchFlow's `bench` and the uv image's
`uv`. No model is served or trained; everything they print and write says it is a simulation.

They speak the real programs' contract as `reference/pipeline.md` quotes it: the CLI flags
(argparse: a missing or unknown flag exits 2 with argparse's message), the config loader's rules,
the step lines, the result files (the held-out branch's score_v2 and eval_task_outcomes.json) and
the publish commands' writes to the runs and leaderboard datasets. The stand-in's HF Jobs run a
job's command as a local process with `bin/` first on PATH, in place of the image's pip install.
"""

SIMULATION = "SIMULATED on the local stand-in"
