"""`dev/bench-trainer-gpu`: the trainer's optimizer step on one H200 with no internet: a randomly
initialised model of Qwen3.5-9B's configuration (`Qwen3_5TextConfig`'s defaults, 8.95 B text
parameters; nothing is downloaded), bf16, LoRA from the recipe, and TRL's GRPOTrainer with a
`rollout_func` that generates four completions with transformers as the trainer does and
rewards them at random (no sandboxes). Prints the peak GPU memory and each step's seconds.

Not run here (this machine has no GPU). vLLM's colocate mode is not built into the trainer yet,
so the generation measured is transformers'."""

import os
import random
import sys
import time

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main(steps: int, prompt_tokens: int, reply_tokens: int) -> None:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from arena_cluster import tiny_model
    from arena_cluster.trainer import recipe_arguments

    assert torch.cuda.is_available(), "dev/bench-trainer-gpu needs a GPU"
    tokenizer_dir = tiny_model.build(tiny_model.default_path())
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = Qwen3_5TextConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3_5ForCausalLM(config).to(torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    rng = random.Random(0)

    def rollout(prompts, trainer):
        prompt = [rng.randrange(1, len(tokenizer)) for _ in range(prompt_tokens)]
        completions = []
        with torch.no_grad():
            for _ in prompts:
                out = trainer.model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=reply_tokens,
                                             min_new_tokens=reply_tokens, do_sample=True, pad_token_id=0)
                completions.append(out[0, len(prompt):].tolist())
        return {"prompt_ids": [prompt] * len(prompts), "completion_ids": completions, "logprobs": None,
                "env_reward": [rng.random() for _ in prompts]}

    times = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t = time.monotonic()

        def on_step_end(self, *a, **k):
            times.append(time.monotonic() - self.t)

    recipe = {"learning_rate": 1e-5, "lora_r": 32, "lora_alpha": 64, "lora_dropout": 0.0, "max_steps": steps}
    grpo, lora = recipe_arguments(recipe, steps)
    grpo.update(report_to=[], save_strategy="no")
    args = GRPOConfig(output_dir="/tmp/bench-gpu", bf16=True, gradient_checkpointing=True, **grpo)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=lambda completions, env_reward, **k: env_reward,
                          args=args, train_dataset=Dataset.from_list([{"prompt": "x"}] * steps),
                          rollout_func=rollout, peft_config=LoraConfig(**lora), callbacks=[Clock()])
    torch.cuda.reset_peak_memory_stats()
    trainer.train()
    print(f"BENCH GPU {torch.cuda.get_device_name()}: {params / 1e9:.2f} B parameters, bf16, LoRA r=32")
    print(f"BENCH prompt {prompt_tokens} tokens, four replies of {reply_tokens} tokens a step")
    print(f"BENCH step seconds: {', '.join(f'{t:.1f}' for t in times)}")
    print(f"BENCH peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    a = [int(x) for x in sys.argv[1:]]
    main(*(a + [3, 1024, 256][len(a):]))
