"""Plays one episode of the guide's contract with the policy being trained: a fresh sandbox, the
conversation in the model's chat template with thinking off, each reply read by `contract`, the
observations appended as user turns, and `finish_action` scoring an episode that did not end by
itself. The token sequence is built by concatenating ids (never by rendering the conversation
again, which would drop what the model saw) with a mask: only the model's own tokens train.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from . import contract
from .sandboxes import TRAIN_PURPOSE, CleanupError, Connection, SandboxError, Sandboxes

_MARK = "\u2063ARENA-OBSERVATION\u2063"
_REPLY = "\u2063ARENA-REPLY\u2063"


class Policy:
    """The model as it is now: generates one reply at a time (one at once: the five episodes share
    the model), and knows how the chat template wraps an observation as the next user turn."""

    def __init__(self, model, tokenizer, temperature: float = 1.0):
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.lock = threading.Lock()
        self.eos = tokenizer.eos_token_id
        self._suffix = self._observation_suffix()

    def encode(self, text: str) -> list:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _render(self, messages, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=generation_prompt, enable_thinking=False, tokenize=False
        )

    def prompt(self, messages) -> list:
        return self.encode(self._render(messages, True))

    def _observation_suffix(self) -> tuple:
        """What the template puts between the end of a reply (its end-of-turn token) and the next
        reply: the user turn around an observation, then the generation prompt. Taken from the
        template itself by rendering a conversation that ends at a user message."""
        base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": _REPLY}]
        text = self._render(base + [{"role": "user", "content": _MARK}], True)
        end = self.tokenizer.eos_token
        cut = text.index(_REPLY + end) + len(_REPLY + end)
        before, after = text[cut:].split(_MARK)
        return before, after

    def observation_ids(self, observation_text: str) -> list:
        before, after = self._suffix
        return self.encode(before + observation_text + after)

    def generate(self, ids: list, max_new_tokens: int, seed: int | None = None) -> list:
        """The next reply; with `seed`, the draw is that seed's whatever else runs (a held-out
        episode's turns are seeded, so the policy before and after training sees the same draws)."""
        import torch

        with self.lock, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            was_training = self.model.training
            self.model.eval()
            try:
                out = self.model.generate(
                    torch.tensor([ids], device=self.model.device),
                    attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=self.model.device),
                    max_new_tokens=max(1, max_new_tokens),
                    do_sample=True,
                    temperature=self.temperature,
                    top_k=0,
                    top_p=1.0,
                    eos_token_id=self.eos,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            finally:
                self.model.train(was_training)
        return out[0, len(ids):].tolist()


@dataclass
class Played:
    """One episode's outcome: its score (None: no valid reward), how it ended, and its tokens."""

    score: float | None
    end: str  # an End kind, or "timeout" / "sandbox"
    why: str | None = None
    prompt_ids: list = field(default_factory=list)
    completion_ids: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    ended_at: float = 0.0
    cleanup_error: str | None = None


class _OutOfTime(Exception):
    pass


def play(policy: Policy, sandboxes: Sandboxes, task: dict, submission: dict, validator, seed: int | None = None,
         purpose: str = TRAIN_PURPOSE) -> Played:
    """Plays one episode in a fresh sandbox, which is canceled at the end whatever happens; with
    `seed`, each turn's draw is seeded from it."""
    t = contract.task_limits(task)
    wall = t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"]
    started = time.monotonic()
    result = Played(score=None, end="sandbox")
    try:
        with sandboxes.sandbox(task, wall, purpose) as job:
            url = sandboxes.wait_serving(job.id, int(task["port"]), started + t["reset_wall_s"])
            conn = Connection(url, sandboxes.reader, float(t["tool_wall_s"]))
            try:
                result = _episode(policy, conn, task, submission, validator, started, t, seed)
            finally:
                conn.close()
    except SandboxError as e:
        result = Played(score=None, end="sandbox", why=str(e))
    except CleanupError as e:
        result.cleanup_error = str(e)
    except _OutOfTime:
        result = Played(score=None, end="timeout", why=f"the episode took longer than its {wall} s of walls")
    except OSError as e:
        result = Played(score=None, end="sandbox", why=f"the sandbox's connection failed: {e}")
    result.ended_at = time.monotonic()
    return result


def _episode(policy: Policy, conn: Connection, task, submission, validator, started, t, seed) -> Played:
    reset_deadline = started + t["reset_wall_s"]
    rollout_deadline = reset_deadline + t["rollout_wall_s"]
    final_deadline = rollout_deadline + t["verifier_wall_s"]
    observation = conn.exchange(contract.ws_reset(task["task_id"])).observation
    schema = submission["schema"]["action"]
    system = contract.system_prompt(schema)
    obs_text = contract.json_text(observation)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": obs_text}]
    prompt_ids = policy.prompt(messages)
    n_obs = len(policy.encode(obs_text))
    clock = time.monotonic()

    def now_ms() -> int:
        return int((time.monotonic() - clock) * 1000)

    e = contract.Episode.start(task, schema, observation, len(prompt_ids) - n_obs, n_obs, now_ms())
    completion, mask = [], []
    while e.ended is None:
        if time.monotonic() > rollout_deadline:
            raise _OutOfTime()
        room = min(e.budget.completion_left, e.budget.context_left)
        # One token past the budget: a reply that would not fit is seen to be too long.
        turn_seed = None if seed is None else seed * 1000 + len(mask)
        new = policy.generate(prompt_ids + completion, room + 1, turn_seed)
        completion += new
        mask += [1] * len(new)
        text = policy.tokenizer.decode([i for i in new if i != policy.eos], skip_special_tokens=False)
        turn = e.reply(text, len(new), validator, now_ms())
        if not isinstance(turn, contract.Call):
            break
        wait = (turn.at_ms - now_ms()) / 1000
        if wait > 0:
            time.sleep(wait)
        if time.monotonic() > rollout_deadline:
            raise _OutOfTime()
        seen = conn.exchange(contract.ws_step(turn.action))
        appended = [] if seen.done else policy.observation_ids(contract.json_text(seen.observation))
        if e.observe(seen.observation, len(appended), seen.reward, seen.done) is None:
            completion += appended
            mask += [0] * len(appended)
    end = e.ended
    finish_reward = None
    finish = submission.get("finish_action")
    if not end.by_itself() and finish is not None:
        if time.monotonic() > final_deadline:
            raise _OutOfTime()
        seen = conn.exchange(contract.ws_step(finish))
        finish_reward = seen.reward if seen.done else None
    return Played(
        score=contract.score(end, finish_reward),
        end=end.kind,
        why=end.why,
        prompt_ids=prompt_ids,
        completion_ids=completion,
        mask=mask,
    )
