"""A tiny model of the Qwen3.5 architecture, built here with no download, for training on a CPU:
`dev/run` with `ARENA_CLUSTER=real` and `dev/test` train it in place of Qwen/Qwen3.5-9B.

- A byte-level BPE tokenizer trained with `tokenizers` on reply-shaped JSON and the chat
  template's own pieces, with the special tokens Qwen3.5 uses, and the real Qwen3.5 chat template
  (TRL's copy, `trl/chat_templates/qwen3_5_think.jinja`, the one the 9B ships).
- `Qwen3_5ForCausalLM` with one `linear_attention` (Gated DeltaNet) and one `full_attention` layer.
- A short supervised warm-up on conversations like the demo echo environment's and like a board
  game's (the Four in a Row test shape, `{"column": c}` moves on a board), so that some of its
  replies are valid JSON actions and some are not: the rewards of a step then differ and GRPO has
  something to learn from, on a schema other than the echo's too.

Built once into a folder (`build(path)`), then loaded from it like any local checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path

from . import contract

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
WORDS = ["hello", "done", "echo", "again", "world", "finish", "ready", "arena", "message", "step", "yes", "no"]
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string"}},
    "required": ["message"],
    "additionalProperties": False,
}
# The demo echo environment's own action schema (dev/demo/openenv/submission.json, what its
# `/schema` answers): the system message the model sees when it trains on the demo.
DEMO_SCHEMA = {
    "additionalProperties": False,
    "description": "Action for the Arena Echo environment - just a message to echo.",
    "properties": {
        "metadata": {"additionalProperties": True, "description": "Additional metadata for the action",
                     "title": "Metadata", "type": "object"},
        "message": {"description": "Message to echo back", "title": "Message", "type": "string"},
    },
    "required": ["message"],
    "title": "ArenaEchoAction",
    "type": "object",
}
# The Four in a Row test shape's action schema (dev/demo/openenv/four_in_row/submission.json): a
# second shape the warm-up teaches, so that a local run on a game trains too.
GAME_SCHEMA = {
    "additionalProperties": False,
    "description": "Drop a disc of the player to move into a column.",
    "properties": {
        "metadata": {"additionalProperties": True, "description": "Additional metadata for the action",
                     "title": "Metadata", "type": "object"},
        "column": {"description": "The column to drop a disc into, 0 to 6", "title": "Column", "type": "integer"},
    },
    "required": ["column"],
    "title": "FourInRowAction",
    "type": "object",
}
# The version of the recipe below: a folder built by another version is built again.
VERSION = "tiny-qwen3_5-v3"


def chat_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen3_5_think.jinja").read_text()


def _observations(rng: random.Random) -> list:
    out = [{"echoed_message": "Arena Echo environment ready!", "message_length": 0, "task_id": t}
           for t in ("echo-1", "echo-2")]
    for _ in range(20):
        w = rng.choice(WORDS)
        out.append({"echoed_message": w, "message_length": len(w), "task_id": rng.choice(["echo-1", "echo-2"])})
    return out


def _replies(rng: random.Random) -> list:
    good = [json.dumps({"message": w}) for w in WORDS]
    bad = ['{"message": ', "hello", '{"text": "hi"}', "Sure.", '{"message": "a"} x']
    return good * 3 + bad + [json.dumps({"message": rng.choice(WORDS) + rng.choice(WORDS)}) for _ in range(10)]


def _boards(rng: random.Random) -> list:
    """Four in a Row observations (what the model sees of them: no metadata) after a few random
    moves."""
    out = []
    for _ in range(20):
        board = [[0] * 7 for _ in range(6)]
        to_play = 1
        for _ in range(rng.randrange(12)):
            free = [c for c in range(7) if board[0][c] == 0]
            column = rng.choice(free)
            row = max(r for r in range(6) if board[r][column] == 0)
            board[row][column] = to_play
            to_play = 3 - to_play
        out.append({"board": board, "legal_actions": [c for c in range(7) if board[0][c] == 0], "to_play": to_play})
    return out


def _moves() -> list:
    # Moves, one in five into column 7, which does not exist: the game then ends at once with 0.0, so
    # that a game ends in a few moves (one reply in a game that is no move ends it without a reward).
    return [json.dumps({"column": c}) for c in range(7)] * 4 + [json.dumps({"column": 7})] * 7 + ['{"column": ']


def _tokenizer(rng: random.Random):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    template = chat_template()
    corpus = [contract.system_prompt(ECHO_SCHEMA), contract.system_prompt(DEMO_SCHEMA), template]
    corpus += [contract.json_text(o) for o in _observations(rng)] + _replies(rng)
    corpus += [contract.system_prompt(GAME_SCHEMA)] + [contract.json_text(b) for b in _boards(rng)] + _moves()
    corpus += ["user", "assistant", "system", "\n\n", '{"finish": true}', '{"action": {"message": "done"}}']
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=640, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=template,
        model_max_length=32768,
    )


def _model(tokenizer):
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    config = Qwen3_5TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        layer_types=["linear_attention", "full_attention"],
        max_position_embeddings=32768,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return Qwen3_5ForCausalLM(config)


def _warm_up(model, tokenizer, rng: random.Random, steps: int) -> float:
    """Teaches reply-shaped JSON on conversations like the echo environment's (two of three) and
    the board game's; the loss falls on the replies only. Returns the last loss."""
    import torch

    echo = ([contract.system_prompt(ECHO_SCHEMA), contract.system_prompt(DEMO_SCHEMA)], _replies(rng),
            _observations(rng))
    game = ([contract.system_prompt(GAME_SCHEMA)], _moves(), _boards(rng))
    # Built as the trainer builds an episode's tokens (`episodes.Template`): the prompt, then
    # earlier replies and observations concatenated, then the reply to learn.
    from .episodes import Template

    shape = Template(tokenizer)
    examples = []
    for i in range(144):
        systems, replies, observations = game if i % 3 == 2 else echo
        messages = [{"role": "system", "content": rng.choice(systems)},
                    {"role": "user", "content": contract.json_text(rng.choice(observations))}]
        p = shape.prompt(messages)
        for _ in range(rng.randrange(3)):
            p += tokenizer(rng.choice(replies), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            p += shape.observation_ids(contract.json_text(rng.choice(observations)))
        r = tokenizer(rng.choice(replies), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        examples.append((p, r))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss = float("nan")
    for step in range(steps):
        batch = rng.sample(examples, 8)
        width = max(len(p) + len(r) for p, r in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (p, r) in enumerate(batch):
            seq = p + r
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(p) : len(seq)] = torch.tensor(r)
            mask[i, : len(seq)] = 1
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss = out.loss.item()
    model.eval()
    return loss


def build(path: Path, warm_up_steps: int = 300) -> Path:
    """Builds the tiny model into `path` (atomically: a half-built folder is never used)."""
    path = Path(path)
    marker = path / "arena-tiny-model.json"
    if marker.exists() and json.loads(marker.read_text()).get("version") == VERSION:
        return path
    rng = random.Random(0)
    tokenizer = _tokenizer(rng)
    model = _model(tokenizer)
    loss = _warm_up(model, tokenizer, rng, warm_up_steps)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    params = sum(p.numel() for p in model.parameters())
    (partial / "arena-tiny-model.json").write_text(
        json.dumps({"version": VERSION, "parameters": params, "warm_up_steps": warm_up_steps,
                    "warm_up_loss": loss, "note": "randomly initialised, warmed up on echo replies and board-game moves"})
    )
    shutil.rmtree(path, ignore_errors=True)
    os.replace(partial, path)
    return path


def default_path() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "arena-tiny-qwen3_5"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default_path()
    print(build(target))
