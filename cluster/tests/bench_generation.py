"""`dev/bench-trainer`'s first part: a step's five episodes on this CPU with the tiny model, their
turns generated in batches (the trainer's way) against one sequence at a time (what it did
before), in one run. The demo echo environment answers in this process (`echo.Echo`, no sandbox,
no arena), so what is measured is the episodes' own work: generation, the contract, the tokens.
Each episode is seeded, so both ways play exactly the same episodes and tokens (the tests check
that batching changes no draw). Prints episodes per minute, generated tokens per second, the
batches' sizes, and the steps a 14,400 s run would fit at that rate.

    cd cluster && PYTHONPATH=. python tests/bench_generation.py [STEPS [ROUNDS [ROUND_TRIP_MS]]]
"""

import sys
import threading
import time

from arena_cluster import contract, tiny_model
from arena_cluster.episodes import Policy, Template, episode
from echo import ACTIONS, TASK, Echo

# What a step costs beside its episodes' turns, for the estimate of steps per run: five sandboxes
# started (about 45 s for the demo echo image on this kind of machine) and the update.
SANDBOX_START_S = 45


def play_step(policy, step: int, round_trip_s: float) -> list:
    """Five seeded echo episodes at once, one thread each, as `Run.play_episodes` plays them."""
    played = [None] * contract.EPISODES_PER_STEP

    def one(i):
        with policy.live():
            played[i] = episode(policy, Echo(round_trip_s), TASK, ACTIONS, seed=1000 * step + i)

    with policy.step(len(played)):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(played))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return played


def measure(policy, step: int, round_trip_s: float) -> dict:
    """One step's five episodes: how long they took, their tokens, the batches they made."""
    policy.batcher.batches.clear()
    started, cpu = time.monotonic(), time.process_time()
    played = play_step(policy, step, round_trip_s)
    seconds = time.monotonic() - started
    return {"seconds": seconds, "cpu_s": time.process_time() - cpu, "tokens": sum(sum(p.mask) for p in played),
            "batches": list(policy.batcher.batches), "played": played}


def best(policies: dict, steps: int, rounds: int, round_trip_s: float) -> dict:
    """Each step played `rounds` times each way, the ways taking turns; a step's time is its best
    round's (the machine's other work only ever slows a round down)."""
    for policy in policies.values():
        play_step(policy, 99, round_trip_s)  # warm-up: the first call builds what generate caches
    out = {name: [] for name in policies}
    for step in range(steps):
        for _ in range(rounds):
            for name, policy in policies.items():
                m = measure(policy, step, round_trip_s)
                kept = [x for x in out[name] if x["step"] == step]
                if not kept or m["seconds"] < kept[0]["seconds"]:
                    out[name] = [x for x in out[name] if x["step"] != step] + [dict(m, step=step)]
    return {name: total(ms) for name, ms in out.items()}


def total(steps: list) -> dict:
    seconds = sum(m["seconds"] for m in steps)
    episodes = contract.EPISODES_PER_STEP * len(steps)
    tokens = sum(m["tokens"] for m in steps)
    return {"seconds": seconds, "cpu_s": sum(m["cpu_s"] for m in steps), "episodes": episodes, "tokens": tokens,
            "per_minute": 60 * episodes / seconds,
            "tokens_s": tokens / seconds, "batches": [b for m in steps for b in m["batches"]],
            "played": [p for m in steps for p in m["played"]]}


def report(name: str, m: dict, update_s: float) -> None:
    step_s = m["seconds"] / (m["episodes"] / contract.EPISODES_PER_STEP)
    per_run = int(contract.RUN_LIMIT_S // (SANDBOX_START_S + step_s + update_s))
    sizes = m["batches"]
    print(f"BENCH {name}: {m['per_minute']:.1f} episodes/min, {m['tokens_s']:.1f} generated tokens/s "
          f"({m['episodes']} episodes, {m['tokens']} tokens in {m['seconds']:.1f} s; {len(sizes)} generate calls, "
          f"{sum(sizes) / len(sizes):.2f} rows each); a step's episodes {step_s:.2f} s: about {per_run} steps per "
          f"{contract.RUN_LIMIT_S} s run with {SANDBOX_START_S} s of sandbox starts and {update_s:.0f} s of update")


def main(steps: int, rounds: int, round_trip_ms: float) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    path = tiny_model.build(tiny_model.default_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    # TRL's generation config for `use_vllm=False` at GRPOConfig's defaults (temperature 1.0).
    config = GenerationConfig(max_new_tokens=16_384, do_sample=True, pad_token_id=tok.pad_token_id,
                              eos_token_id=[tok.eos_token_id], temperature=1.0, top_p=1.0, top_k=0,
                              disable_compile=True)
    template = Template(tok)
    rt = round_trip_ms / 1000
    print(f"BENCH tiny model ({sum(p.numel() for p in model.parameters())} parameters) on the CPU, "
          f"{torch.get_num_threads()} threads; {steps} steps of five echo episodes each way, the best of {rounds} "
          f"rounds each; an environment round trip of {round_trip_ms:g} ms")
    m = best({"batched": Policy.of_model(model, template, config),
              "one at a time": Policy.of_model(model, template, config, max_rows=1)}, steps, rounds, rt)
    batched, single = m["batched"], m["one at a time"]
    same = all(a.completion_ids == b.completion_ids for a, b in zip(batched["played"], single["played"]))
    report("one at a time", single, update_s=2)
    report("batched", batched, update_s=2)
    print(f"BENCH batched / one at a time: {batched['per_minute'] / single['per_minute']:.2f}x episodes per "
          f"minute, {batched['tokens_s'] / single['tokens_s']:.2f}x tokens per second "
          f"({single['cpu_s'] / batched['cpu_s']:.2f}x in this process's CPU time, which the machine's other work "
          f"does not change); the same tokens: {same}")


if __name__ == "__main__":
    args = [float(a) for a in sys.argv[1:]] + [6, 3, 0.0][len(sys.argv) - 1:]
    main(int(args[0]), int(args[1]), args[2])
