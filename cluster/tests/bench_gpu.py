"""`dev/bench-trainer-gpu`: the trainer on one H200 with no internet, for Qwen3.5-9B's
configuration: a randomly initialised model of it (`Qwen3_5TextConfig`'s defaults, 8.95 B text
parameters; nothing is downloaded), bf16, LoRA from the recipe, TRL's GRPOTrainer.

1. Generation as the trainer does it (`Policy.of_trainer`: TRL's generation config under
   `unwrap_model_for_generation`): one turn of a step's five episodes, PROMPT_TOKENS of history
   each and REPLY_TOKENS of reply (a random model almost never ends a reply: each runs to its
   budget), batched against one sequence at a time. Prints episodes per minute for episodes of
   TURNS turns and generated tokens per second, each way.
2. Optimizer steps: a `rollout_func` that generates the four completions with the batched policy
   and rewards them at random (no sandboxes). Prints each step's seconds and the peak memory.
3. The estimate of steps per 14,400 s run: SANDBOX_S of sandbox starts (45 s for the demo echo
   image here; HF's image pulls may take longer), TURNS turns of generation and the update.

Not run here (this machine has no GPU). `BENCH_GPU_SMOKE=1` runs the same code on this CPU with
the tiny model, to check it before a GPU is lent."""

import os
import random
import sys
import threading
import time

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
SANDBOX_S = 45
RUN_S = 14_400
SMOKE = os.environ.get("BENCH_GPU_SMOKE") == "1"


def one_turn(policy, prompts: list, reply_tokens: int) -> list:
    """Each prompt's reply, the episodes asking at once in threads as a step's do."""
    replies = [None] * len(prompts)

    def ask(i):
        with policy.live():
            replies[i] = policy.generate(prompts[i], reply_tokens, seed=i)  # the same draws each way

    with policy.step(len(prompts)):
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return replies


def timed_turn(policy, prompts, reply_tokens, sync) -> tuple:
    """The best of three turns' seconds, and the tokens one turn generates."""
    one_turn(policy, prompts, reply_tokens)  # warm-up
    best, tokens = float("inf"), 0
    for _ in range(3):
        sync()
        started = time.monotonic()
        replies = one_turn(policy, prompts, reply_tokens)
        sync()
        best, tokens = min(best, time.monotonic() - started), sum(len(r) for r in replies)
    return best, tokens


def build(device):
    """The model (the 9B configuration, or the tiny one for the smoke run) and the tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from arena_cluster import tiny_model

    path = tiny_model.build(tiny_model.default_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    if SMOKE:
        return AutoModelForCausalLM.from_pretrained(path, dtype="float32"), tokenizer
    config = Qwen3_5TextConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device(device):
        return Qwen3_5ForCausalLM(config).to(torch.bfloat16), tokenizer


def trainer_of(model, tokenizer, steps, device, rollout, clock):
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from arena_cluster.trainer import recipe_arguments

    recipe = {"learning_rate": 1e-5, "lora_r": 32, "lora_alpha": 64, "lora_dropout": 0.0, "max_steps": steps}
    grpo, lora = recipe_arguments(recipe, steps)
    grpo.update(report_to=[], save_strategy="no")
    gpu = device == "cuda"
    args = GRPOConfig(output_dir="/tmp/bench-gpu", bf16=gpu, use_cpu=not gpu, gradient_checkpointing=gpu, **grpo)
    return GRPOTrainer(model=model, processing_class=tokenizer,
                       reward_funcs=lambda completions, env_reward, **k: env_reward, args=args,
                       train_dataset=Dataset.from_list([{"prompt": "x"}] * steps), rollout_func=rollout,
                       peft_config=LoraConfig(**lora), callbacks=[clock])


def main(steps: int, prompt_tokens: int, reply_tokens: int, turns: int) -> None:
    import torch
    from transformers import TrainerCallback

    from arena_cluster.episodes import Policy, Template

    device = "cpu" if SMOKE else "cuda"
    assert SMOKE or torch.cuda.is_available(), "dev/bench-trainer-gpu needs a GPU (or BENCH_GPU_SMOKE=1)"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    model, tokenizer = build(device)
    params = sum(p.numel() for p in model.parameters())
    rng = random.Random(0)
    vocab = len(tokenizer)
    prompts = [[rng.randrange(3, vocab) for _ in range(prompt_tokens - 17 * i)] for i in range(5)]
    holder = {}

    def rollout(batch_prompts, trainer):
        replies = one_turn(holder["policy"], prompts[:len(batch_prompts)], reply_tokens)
        return {"prompt_ids": prompts[:len(batch_prompts)], "completion_ids": replies, "logprobs": None,
                "env_reward": [rng.random() for _ in batch_prompts]}

    times = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t = time.monotonic()

        def on_step_end(self, *a, **k):
            times.append(time.monotonic() - self.t)

    trainer = trainer_of(model, tokenizer, steps, device, rollout, Clock())
    template = Template(tokenizer)
    holder["policy"] = Policy.of_trainer(trainer, template)
    ways = {"batched": holder["policy"], "one at a time": Policy.of_trainer(trainer, template, max_rows=1)}
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    turn = {name: timed_turn(policy, prompts, reply_tokens, sync) for name, policy in ways.items()}
    trainer.train()
    name = "CPU (smoke run, tiny model)" if SMOKE else torch.cuda.get_device_name()
    print(f"BENCH {name}: {params / 1e9:.2f} B parameters, LoRA r=32; five episodes' turns of {prompt_tokens} "
          f"tokens of history and {reply_tokens} of reply; episodes of {turns} turns")
    update_s = sorted(times)[len(times) // 2]
    for way, (seconds, tokens) in turn.items():
        step_s = SANDBOX_S + turns * seconds + update_s
        print(f"BENCH {way}: a turn of five episodes {seconds:.2f} s, {tokens / seconds:.0f} generated tokens/s, "
              f"{5 * 60 / (turns * seconds):.1f} episodes/min; a step {step_s:.0f} s ({SANDBOX_S} s of sandbox "
              f"starts, {turns} turns, {update_s:.0f} s of update): about {int(RUN_S // step_s)} steps per {RUN_S} s")
    print(f"BENCH optimizer step seconds (four completions generated batched, then the update): "
          f"{', '.join(f'{t:.1f}' for t in times)}")
    if device == "cuda":
        print(f"BENCH peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    a = [int(x) for x in sys.argv[1:]]
    main(*(a + [3, 1024, 256, 4][len(a):]))
