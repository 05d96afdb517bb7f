"""Batched generation for the episodes of a step: each turn, the episodes waiting for the model are
generated together, left-padded, in one `generate` call, and each keeps what is its own:

- its draws: every row samples from its own `torch.Generator` (`RowSampler`), so a held-out
  episode's turn seeded with `seed` draws the same tokens whatever other rows share its batch; a
  row without a seed gets a generator seeded from torch's global RNG (which the trainer seeds);
- its budget: a row stops at an end-of-turn token or at its own `max_new_tokens` (`RowLimits`);
- its tokens: the reply is cut at its own limit and its first end-of-turn token, nothing of the
  padding or of the other rows.

The sampling settings are TRL's (`GRPOTrainer.generation_config`: `args.temperature`, `top_k`,
`top_p`, `min_p`, `repetition_penalty`, the end-of-turn ids). `generate` applies the processors
that do not sample (the repetition penalty) itself, then `RowSampler`, which applies temperature,
top-k, top-p and min-p with transformers' own warpers, in transformers' order, and draws each
row's token. It returns scores where only the drawn token is finite, and `generate` runs with
`do_sample=False`, so it takes that token (its argmax) and applies no warper a second time.

`Batcher` gathers the requests of the episode threads: see its docstring for the rule.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

# How long the first waiting request waits for the other live episodes of its step before its
# batch starts anyway. A turn of the 9B takes seconds; the WebSocket round trip and the pacing of
# an episode between its turns are what may keep it away, and a paced episode (one call a second
# after its burst) would hold the others back for up to a second: it joins the next batch instead.
GATHER_WAIT_S = 0.25


@dataclass
class Request:
    """One episode's turn: its token ids so far, the most tokens it may get, its seed (None:
    unseeded) and, once generated, its reply's ids."""

    ids: list
    max_new_tokens: int
    seed: int | None = None
    asked_at: float = field(default_factory=time.monotonic)
    reply: list | None = None
    error: BaseException | None = None


def warpers(config):
    """transformers' own sampling warpers for TRL's generation settings, in the order and under
    the conditions `GenerationMixin._get_logits_processor` applies them when it samples."""
    out = LogitsProcessorList()
    if config.temperature is not None and config.temperature != 1.0:
        out.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k is not None and config.top_k != 0:
        out.append(TopKLogitsWarper(top_k=config.top_k, min_tokens_to_keep=1))
    if config.top_p is not None and config.top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=config.top_p, min_tokens_to_keep=1))
    if config.min_p is not None:
        out.append(MinPLogitsWarper(min_p=config.min_p, min_tokens_to_keep=1))
    return out


def row_generator(seed: int | None):
    """A row's own source of draws: its seed's, or one seeded from torch's global RNG."""
    if seed is None:
        seed = int(torch.randint(0, 2**62, ()).item())
    return torch.Generator().manual_seed(seed)


class RowSampler(LogitsProcessor):
    """Applies the sampling warpers, then draws each row's next token from its own uniform draws
    (inverse CDF; row i's t-th token takes its t-th draw, drawn up front from its generator: the
    token depends on that row's scores and generator only). Returns scores that are -inf except
    at the drawn token, which `generate` then takes (`do_sample=False`: its argmax)."""

    def __init__(self, warp, generators: list, limits: list, prompt_width: int):
        self.warp = warp
        self.prompt_width = prompt_width
        most = max(limits)
        self.draws = torch.stack([torch.nn.functional.pad(torch.rand(n, generator=g), (0, most - n))
                                  for g, n in zip(generators, limits)])

    def __call__(self, input_ids, scores):
        t = min(input_ids.shape[1] - self.prompt_width, self.draws.shape[1] - 1)
        scores = self.warp(input_ids, scores)
        cdf = torch.softmax(scores.float(), dim=-1).cumsum(dim=-1)
        u = self.draws[:, t].to(cdf.device)
        drawn = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).clamp(max=cdf.shape[1] - 1)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, drawn, 0.0)


class RowLimits(StoppingCriteria):
    """A row is done once it has its own `max_new_tokens` (the others go on)."""

    def __init__(self, prompt_width: int, limits: list):
        self.prompt_width = prompt_width
        self.limits = limits

    def __call__(self, input_ids, scores, **kwargs):
        made = input_ids.shape[1] - self.prompt_width
        return torch.tensor([made >= n for n in self.limits], device=input_ids.device)


def eos_ids(config) -> list:
    eos = config.eos_token_id
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]


def cut(new: list, limit: int, eos: list) -> list:
    """A row's reply: at most `limit` tokens, ending at its first end-of-turn token."""
    new = new[:limit]
    for i, t in enumerate(new):
        if t in eos:
            return new[: i + 1]
    return new


def generate_rows(model, requests: list, config) -> list:
    """One `generate` call for every request, left-padded; each request's reply ids."""
    width = max(len(r.ids) for r in requests)
    eos = eos_ids(config)
    # Padding is masked out: any id does, the end-of-turn one when the config names no pad.
    pad = config.pad_token_id if config.pad_token_id is not None else eos[0]
    ids = torch.tensor([[pad] * (width - len(r.ids)) + list(r.ids) for r in requests], device=model.device)
    mask = torch.tensor([[0] * (width - len(r.ids)) + [1] * len(r.ids) for r in requests], device=model.device)
    limits = [max(1, r.max_new_tokens) for r in requests]
    call = copy.deepcopy(config)
    call.max_new_tokens = max(limits)
    # The draw is RowSampler's: `generate` takes the one token it leaves (its argmax).
    call.do_sample = False
    sampler = RowSampler(warpers(config), [row_generator(r.seed) for r in requests], limits, width)
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=call,
                         logits_processor=LogitsProcessorList([sampler]),
                         stopping_criteria=StoppingCriteriaList([RowLimits(width, limits)]))
    return [cut(row[width:].tolist(), n, eos) for row, n in zip(out, limits)]


class Batcher:
    """Gathers the turns of the episodes that run at once into batches, one batch at a time.

    Each episode holds a seat while it plays (`episode()`, from before its sandbox starts until its
    last turn: `leave()`); a step reserves its episodes' seats before it starts them
    (`reserved(n)`), so that none of them is missed while its thread is still starting. The
    waiting requests go as one batch once every seated episode is waiting (the others have left),
    or once the oldest has waited `wait_s`; the thread whose request leads runs the batch and
    hands each waiting thread its reply. Requests that arrive while a batch runs form the next
    one. `max_rows=1` generates one sequence at a time (what the trainer did before; the bench's
    baseline)."""

    def __init__(self, run_batch, wait_s: float = GATHER_WAIT_S, max_rows: int | None = None):
        self.run_batch = run_batch
        self.wait_s = wait_s
        self.max_rows = max_rows
        self._cond = threading.Condition()
        self._seated = 0
        self._reserved = 0
        self._local = threading.local()
        self._pending: list = []
        self._busy = False
        self.batches: list = []  # the size of each batch run (for tests and the bench)

    @contextlib.contextmanager
    def reserved(self, n: int):
        """Seats for the `n` episodes about to start; those not taken are given back at the end."""
        with self._cond:
            self._reserved += n
            self._seated += n
        try:
            yield
        finally:
            with self._cond:
                self._seated -= self._reserved
                self._reserved = 0
                self._cond.notify_all()

    @contextlib.contextmanager
    def episode(self):
        """This thread's episode holds a seat (a reserved one, if any is left) until it ends."""
        with self._cond:
            if self._reserved:
                self._reserved -= 1
            else:
                self._seated += 1
        self._local.seated = True
        try:
            yield
        finally:
            self.leave()

    def leave(self) -> None:
        """This thread's episode asks for no more turns (its last one is done): it is not waited
        for any more."""
        if getattr(self._local, "seated", False):
            self._local.seated = False
            with self._cond:
                self._seated -= 1
                self._cond.notify_all()

    def generate(self, request: Request) -> list:
        with self._cond:
            self._pending.append(request)
            self._cond.notify_all()
        while True:
            with self._cond:
                while not self._done(request) and not self._ready():
                    self._cond.wait(self._wait_left())
                if self._done(request):
                    break
                batch = self._take()
            self._run(batch)
        if request.error is not None:
            raise request.error
        return request.reply

    @staticmethod
    def _done(request: Request) -> bool:
        return request.reply is not None or request.error is not None

    def _ready(self) -> bool:
        if self._busy or not self._pending:
            return False
        if self.max_rows is not None and len(self._pending) >= self.max_rows:
            return True
        waited = time.monotonic() - self._pending[0].asked_at
        return len(self._pending) >= self._seated or waited >= self.wait_s

    def _wait_left(self) -> float | None:
        if self._busy or not self._pending:
            return None
        return max(0.001, self._pending[0].asked_at + self.wait_s - time.monotonic())

    def _take(self) -> list:
        n = self.max_rows or len(self._pending)
        batch, self._pending = self._pending[:n], self._pending[n:]
        self._busy = True
        self.batches.append(len(batch))
        return batch

    def _run(self, batch: list) -> None:
        try:
            replies = self.run_batch(batch)
            for r, reply in zip(batch, replies):
                r.reply = reply
        except BaseException as e:  # noqa: BLE001 - every thread of the batch raises it
            for r in batch:
                r.error = e
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
