"""Batched generation on the tiny CPU model: each turn, the episodes waiting for the model are
generated together, and each keeps its own draws, budget and tokens, as if it had been alone."""

import threading
import time

import pytest
import torch

from arena_cluster import tiny_model
from arena_cluster.episodes import Policy, Template, episode
from arena_cluster.generation import Batcher, Request, generate_rows
from echo import ACTIONS, TASK, Echo


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tiny_model.build(tiny_model.default_path())
    model = AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()
    return model, AutoTokenizer.from_pretrained(path)


def trl_config(tokenizer, **sampling):
    """The generation config TRL builds for `use_vllm=False` (`GRPOTrainer.__init__`)."""
    from transformers import GenerationConfig

    args = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": None, **sampling}
    return GenerationConfig(max_new_tokens=16_384, do_sample=True, pad_token_id=tokenizer.pad_token_id,
                            bos_token_id=None, eos_token_id=[tokenizer.eos_token_id], repetition_penalty=1.0,
                            cache_implementation=None, disable_compile=True, **args)


def prompts(template):
    from arena_cluster import contract

    first = template.prompt([{"role": "system", "content": contract.system_prompt(ACTIONS.schema)},
                             {"role": "user", "content": '{"echoed_message":"hi","message_length":2}'}])
    later = first + template.encode('{"message": "hello"}') + [template.tokenizer.eos_token_id]
    later += template.observation_ids('{"echoed_message":"hello","message_length":5}')
    return first, later


def test_a_batched_turn_gives_each_episode_what_it_gets_alone(tiny):
    """Three episodes of different lengths (left-padded in one batch), each with its own seed and
    budget: each gets exactly the reply it gets alone, cut at its own budget."""
    model, tok = tiny
    first, later = prompts(Template(tok))
    config = trl_config(tok)

    def requests():
        return [Request(first, 40, seed=11), Request(later, 30, seed=12), Request(first[:40], 2, seed=13)]

    with torch.no_grad():
        batched = generate_rows(model, requests(), config)
        alone = [generate_rows(model, [r], config)[0] for r in requests()]
    assert batched == alone
    assert len(batched[2]) <= 2, "a row stops at its own budget while the others go on"
    assert all(r for r in batched)
    for reply in batched[:2]:
        assert tok.eos_token_id not in reply[:-1], "a reply ends at its first end-of-turn token"
    again = generate_rows(model, [Request(first, 40, seed=11)], config)
    assert again[0] == batched[0], "a seeded row draws the same whatever else is in its batch"


def test_the_turns_of_episodes_that_run_at_once_are_generated_together(tiny):
    """Five seeded echo episodes in threads, as a step plays them: their turns go in batches, and
    each episode (its tokens, mask and score) is the one it is when played one at a time."""
    model, tok = tiny
    template = Template(tok)

    def play_five(policy):
        out = [None] * 5

        def one(i):
            with policy.live():
                out[i] = episode(policy, Echo(), TASK, ACTIONS, seed=100 + i)

        with policy.step(5):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return out

    # A batch goes once every live episode has asked: the wait for a late one is long enough that a
    # loaded machine's slow thread start never sends a batch without it (0.25 s did, in CI).
    batched = Policy.of_model(model, template, trl_config(tok), wait_s=10)
    single = Policy.of_model(model, template, trl_config(tok), max_rows=1, wait_s=10)
    together, apart = play_five(batched), play_five(single)
    for a, b in zip(together, apart):
        assert (a.completion_ids, a.mask, a.score, a.end) == (b.completion_ids, b.mask, b.score, b.end)
    assert batched.batcher.batches[0] == 5, batched.batcher.batches
    assert max(single.batcher.batches) == 1 and sum(single.batcher.batches) == sum(batched.batcher.batches)
    assert len(batched.batcher.batches) < len(single.batcher.batches) / 2
    assert len({len(p.completion_ids) for p in together}) > 1, "the episodes have different lengths"


def test_a_batch_waits_for_the_live_episodes_only_so_long():
    """An episode that is away (its sandbox's round trip, its pacing) holds the others back for
    `wait_s` at most; one that has ended is not waited for."""
    # Both ask at once (the barrier), and wait_s is long enough that a loaded machine's scheduling
    # cannot put b's request in a batch of its own.
    batcher = Batcher(lambda batch: [[len(r.ids)] for r in batch], wait_s=2.0)
    replies = {}
    both_seated = threading.Barrier(2)

    def turn(name, ids):
        with batcher.episode():
            both_seated.wait()
            replies[name] = (batcher.generate(Request(ids, 1)), time.monotonic())

    with batcher.episode():  # a live episode that never asks
        started = time.monotonic()
        threads = [threading.Thread(target=turn, args=(n, [0] * k)) for n, k in (("a", 1), ("b", 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert replies["a"][0] == [1] and replies["b"][0] == [2]
    # Not before wait_s (the requests are younger than `started`), and not much later: the upper
    # bound leaves a loaded machine seconds to wake the thread.
    assert 2.0 <= replies["a"][1] - started < 2.0 + 5, "the batch went once the oldest had waited wait_s"
    assert batcher.batches == [2]
    alone = Batcher(lambda batch: [[7] for _ in batch], wait_s=5)
    started = time.monotonic()
    with alone.episode():
        assert alone.generate(Request([1], 1)) == [7]
    # Any wait would last wait_s at least.
    assert time.monotonic() - started < alone.wait_s, "every live episode waiting: no wait"


def test_an_error_reaches_every_episode_of_its_batch():
    def fail(batch):
        raise RuntimeError("CUDA out of memory")

    batcher = Batcher(fail, wait_s=0.05)
    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.generate(Request([1], 1))


def test_the_sampling_settings_are_trls(tiny, tmp_path):
    """The policy generates with the trainer's own generation config: `args.temperature` (here
    almost 0: every draw is the most likely token, whatever the seed) and TRL's other settings."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    model, tok = tiny
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], temperature=1e-4, top_p=0.9,
                      num_generations=4, per_device_train_batch_size=4, max_steps=1, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=lambda completions, **k: [0.0] * 4,
                          args=args, train_dataset=Dataset.from_list([{"prompt": "x"}]),
                          rollout_func=lambda prompts, trainer: {}, peft_config=LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    policy = Policy.of_trainer(trainer, Template(tok))
    assert (policy.config.temperature, policy.config.top_p) == (1e-4, 0.9)
    first, _ = prompts(Template(tok))
    with torch.no_grad():
        greedy = trainer.model.generate(torch.tensor([first]), max_new_tokens=12, do_sample=False,
                                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    want = greedy[0, len(first):].tolist()
    assert [policy.generate(first, 12, seed=s) for s in (1, 2)] == [want, want]
