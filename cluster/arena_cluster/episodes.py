"""Plays one episode of the guide's contract with the policy being trained: a fresh sandbox from
the run's pool (`pool`; one the platform lost is replaced once: `play_in`), the reset the task
asks for (the assignment's `reset`: the task's id, or the task API's split and index), the
conversation in the model's chat template with thinking off (the system message lists the
environment's tools when it has some), each reply read by `contract`, the observations (without
openenv 0.10's `metadata`) appended as user turns, and `finish_action` scoring an episode that
did not end by itself. The episode's walls count from when its sandbox serves. The token sequence
is built by concatenating ids (never by rendering the conversation again, which would drop what
the model saw) with a mask: only the model's own tokens train. The conversation's texts are kept
on the outcome (`Played.messages`) for the run's record (`rundir.RunDir.write_conversation`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from . import contract
from .generation import GATHER_WAIT_S, Batcher, Request, eos_ids, generate_rows
from .runstate import Actions
from .pool import Lease, Pool
from .sandboxes import SandboxError

_MARK = "\u2063ARENA-OBSERVATION\u2063"
_REPLY = "\u2063ARENA-REPLY\u2063"


class Template:
    """How the model's chat template wraps the conversation: the first prompt (thinking off), and
    an observation as the next user turn after a reply."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
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


class Policy:
    """The model as it is now, shared by the episodes that run at once: their turns are
    generated in batches (`generation.Batcher`) with TRL's sampling settings (`config`, a
    `GenerationConfig`). `generating()` is a context manager that yields the model to call
    `generate` on (for the trainer: TRL's `unwrap_model_for_generation`)."""

    def __init__(self, template: Template, generating, config, wait_s: float = GATHER_WAIT_S,
                 max_rows: int | None = None):
        self.template = template
        self.tokenizer = template.tokenizer
        self.config = config
        self.eos_ids = eos_ids(config)
        self.eos = self.tokenizer.eos_token_id
        self._generating = generating
        self.batcher = Batcher(self._run, wait_s, max_rows)

    @staticmethod
    def of_trainer(trainer, template: Template, **kw) -> "Policy":
        """Generation as TRL's own (`GRPOTrainer._generate_single_turn`, transformers path): the
        model unwrapped by `unwrap_model_for_generation` with the trainer's generation kwargs and
        `trainer.generation_config` (`args.temperature`, `top_p`, `top_k`, `min_p`, …)."""
        from trl.models.utils import unwrap_model_for_generation

        args = trainer.args

        def generating():
            return unwrap_model_for_generation(
                trainer.model_wrapped, trainer.accelerator,
                gather_deepspeed3_params=args.ds3_gather_for_generation,
                generation_kwargs=trainer.generation_kwargs,
                gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
            )

        return Policy(template, generating, trainer.generation_config, **kw)

    @staticmethod
    def of_model(model, template: Template, config, **kw) -> "Policy":
        """A model used as it is (tests and the bench)."""
        return Policy(template, lambda: contextlib.nullcontext(model), config, **kw)

    def _run(self, batch: list) -> list:
        with self._generating() as model, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                return generate_rows(model, batch, self.config)
            finally:
                model.train(was_training)

    def step(self, n: int):
        """Around the start of `n` episodes at once: their seats are kept for them."""
        return self.batcher.reserved(n)

    def live(self):
        """Held while an episode plays: its turns are waited for when a batch gathers."""
        return self.batcher.episode()

    def turns_over(self) -> None:
        """This thread's episode will ask for no more turns."""
        self.batcher.leave()

    def generate(self, ids: list, max_new_tokens: int, seed: int | None = None) -> list:
        """The next reply's ids; with `seed`, the draws are that seed's whatever else runs (a
        held-out episode's turns are seeded, so the policy before and after training sees the
        same draws)."""
        return self.batcher.generate(Request(list(ids), max_new_tokens, seed))

    def text(self, reply_ids: list) -> str:
        return self.tokenizer.decode([i for i in reply_ids if i not in self.eos_ids], skip_special_tokens=False)


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
    # Seconds the episode waited for its sandboxes to serve (a replacement's wait included), and
    # how many of them the platform lost and were replaced (0 or 1).
    sandbox_wait_s: float = 0.0
    retries: int = 0
    # The conversation as the model saw it (`{role, content}` texts), as far as it got: empty when
    # the sandbox never answered the reset.
    messages: list = field(default_factory=list)


class _OutOfTime(Exception):
    pass


@dataclass
class _Deadlines:
    """An episode's walls, from the moment its sandbox serves (its start is not the
    participant's: it has an allowance of its own, `pool`)."""

    reset: float
    rollout: float
    final: float

    @staticmethod
    def of(started: float, limits: dict) -> "_Deadlines":
        reset = started + limits["reset_wall_s"]
        rollout = reset + limits["rollout_wall_s"]
        return _Deadlines(reset, rollout, rollout + limits["verifier_wall_s"])

    @staticmethod
    def check(deadline: float) -> None:
        if time.monotonic() > deadline:
            raise _OutOfTime()


@dataclass
class _Tokens:
    """The episode's token sequence: the first prompt, then everything appended after it, with
    the loss mask (1: the model's own token)."""

    prompt: list
    completion: list = field(default_factory=list)
    mask: list = field(default_factory=list)

    def add(self, ids: list, trained: int) -> None:
        self.completion += ids
        self.mask += [trained] * len(ids)


def play_in(pool: Pool, lease: Lease, policy: Policy, task: dict, actions: Actions, seed: int | None = None,
            on_lost=None) -> Played:
    """Plays one episode in `lease`'s sandbox, released when the episode ends. An episode the
    platform lost (its sandbox did not serve within its start allowance, its server exited, its
    connection failed) is played again once in a fresh sandbox of the pool, which starts before
    any other waiting; `on_lost(played, again)` hears of each loss (`again`: it is played again).
    With `seed`, each turn's draw is seeded from it."""
    waited, problems = 0.0, []
    for retries in range(2):
        again = None
        try:
            p = play(policy, lease, task, actions, seed)
            if p.end == "sandbox" and not retries:
                # Asked for before the lost one's place is given back, so that the place goes to
                # the replacement, not to the next sandbox waiting in the pool.
                again = pool.request(lease.place, task, lease.purpose, first=True)
        finally:
            problems.append(pool.release(lease))
        waited += p.sandbox_wait_s
        if again is None:
            break
        if on_lost is not None:
            on_lost(p, True)
        lease = again
    if p.end == "sandbox" and on_lost is not None:
        on_lost(p, False)
    p.sandbox_wait_s, p.retries = waited, retries
    p.cleanup_error = "; ".join(x for x in problems if x) or None
    return p


def play(policy: Policy, lease: Lease, task: dict, actions: Actions, seed: int | None = None) -> Played:
    """Plays one episode in `lease`'s sandbox, waited for here (`Played.sandbox_wait_s`); the
    caller releases it."""
    t = contract.task_limits(task)
    wall = t["reset_wall_s"] + t["rollout_wall_s"] + t["verifier_wall_s"]
    asked, waited = time.monotonic(), 0.0
    result = Played(score=None, end="sandbox")
    # Filled as the episode goes: what it got to, whatever ends it.
    conversation: list = []
    try:
        with policy.live():
            try:
                url = lease.wait()
            finally:
                waited = time.monotonic() - asked
            conn = lease.place.connect(url, float(t["tool_wall_s"]))
            try:
                result = episode(policy, conn, task, actions, seed, time.monotonic(), conversation)
            finally:
                conn.close()
    except SandboxError as e:
        result = Played(score=None, end="sandbox", why=str(e))
    except _OutOfTime:
        result = Played(score=None, end="timeout", why=f"the episode took longer than its {wall} s of walls")
    except OSError as e:
        result = Played(score=None, end="sandbox", why=f"the sandbox's connection failed: {e}")
    result.ended_at = time.monotonic()
    result.messages = conversation
    result.sandbox_wait_s = waited
    return result


def episode(policy: Policy, conn, task: dict, actions: Actions, seed: int | None = None,
            started: float | None = None, conversation: list | None = None) -> Played:
    """Plays one episode over an open connection to its environment (`conn.exchange(message)`
    answers a `contract.Observed`): reset, the turns, then `finish_action` when it did not end by
    itself. Raises `_OutOfTime` past a wall. The caller holds the episode's seat at the policy
    (`policy.live()`); it is left after the last turn. `conversation` (a list) is kept up to date
    with the conversation's messages as they come, whatever ends the episode."""
    d = _Deadlines.of(time.monotonic() if started is None else started, contract.task_limits(task))
    observation = conn.exchange(contract.ws_reset(contract.task_reset(task))).observation
    schema, tools = actions.schema, contract.task_tools(task)
    obs_text = contract.json_text(observation)
    messages = [{"role": "system", "content": contract.system_prompt(schema, tools)},
                {"role": "user", "content": obs_text}]
    tokens = _Tokens(policy.template.prompt(messages))
    n_obs = len(policy.template.encode(obs_text))
    clock = time.monotonic()

    def now_ms() -> int:
        return int((time.monotonic() - clock) * 1000)

    e = contract.Episode.start(task, schema, tools, observation, len(tokens.prompt) - n_obs, n_obs, now_ms())
    if conversation is not None:
        conversation[:] = e.messages
        e.messages = conversation
    _turns(policy, conn, e, tokens, actions.valid, d.rollout, seed, now_ms)
    policy.turns_over()
    end = e.ended
    finish_reward = None
    finish = actions.finish_action
    if not end.by_itself() and finish is not None:
        d.check(d.final)
        seen = conn.exchange(contract.ws_step(finish))
        finish_reward = seen.reward if seen.done else None
    return Played(score=contract.score(end, finish_reward), end=end.kind, why=end.why, prompt_ids=tokens.prompt,
                  completion_ids=tokens.completion, mask=tokens.mask, messages=e.messages)


def _turns(policy: Policy, conn, e: contract.Episode, tokens: _Tokens, validator, rollout_deadline: float,
           seed: int | None, now_ms) -> None:
    """The model's replies and the environment's observations until the episode ends."""
    while e.ended is None:
        _Deadlines.check(rollout_deadline)
        room = min(e.budget.completion_left, e.budget.context_left)
        # One token past the budget: a reply that would not fit is seen to be too long.
        turn_seed = None if seed is None else seed * 1000 + len(tokens.mask)
        new = policy.generate(tokens.prompt + tokens.completion, room + 1, turn_seed)
        tokens.add(new, 1)
        turn = e.reply(policy.text(new), len(new), validator, now_ms())
        if not isinstance(turn, contract.Call):
            return
        wait = (turn.at_ms - now_ms()) / 1000
        if wait > 0:
            time.sleep(wait)
        _Deadlines.check(rollout_deadline)
        seen = conn.exchange(contract.ws_step(turn.action))
        appended = [] if seen.done else policy.template.observation_ids(contract.json_text(seen.observation))
        if e.observe(seen.observation, len(appended), seen.reward, seen.done) is None:
            tokens.add(appended, 0)
