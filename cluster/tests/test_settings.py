"""The node's settings are read once and a bad one is refused by its name."""

import pytest

from arena_cluster.settings import Settings, SettingError

GOOD = {"HF_TOKEN": "hf_bot", "ARENA_SANDBOX_TOKEN": "hf_reader", "ARENA_SANDBOX_NAMESPACE": "sandboxes",
        "ARENA_EVAL_TOKEN": "hf_eval_reader", "ARENA_EVAL_NAMESPACE": "held-out", "ARENA_TRAINER_MODEL": "tiny"}


def test_the_settings_are_read_with_their_defaults():
    s = Settings.read(dict(GOOD, ARENA_TRAINER_MAX_STEPS="3", ARENA_AGENT_CPU_SLOTS="1"))
    assert (s.hf_token, s.sandbox_namespace, s.trainer_max_steps, s.agent_cpu_slots) == ("hf_bot", "sandboxes", 3, 1)
    assert (s.eval_namespace, s.eval_token) == ("held-out", "hf_eval_reader")
    assert s.tiny and s.agent_gpus is None and s.hf_endpoint is None
    assert s.trainer_prefetch and s.sandbox_start_s == 120, "prefetching on, the guide's 120 s to serve"
    off = Settings.read(dict(GOOD, ARENA_TRAINER_PREFETCH="0", ARENA_SANDBOX_START_S="30"))
    assert (off.trainer_prefetch, off.sandbox_start_s) == (False, 30)
    assert not [t for t in ("hf_bot", "hf_reader", "hf_eval_reader") if t in repr(s)], "a token never prints"


@pytest.mark.parametrize("name, value, words", [
    ("HF_TOKEN", "", "HF_TOKEN is not set"),
    ("ARENA_SANDBOX_NAMESPACE", "  ", "ARENA_SANDBOX_NAMESPACE is not set"),
    ("ARENA_EVAL_NAMESPACE", "", "ARENA_EVAL_NAMESPACE is not set"),
    ("ARENA_EVAL_TOKEN", "", "ARENA_EVAL_TOKEN is not set"),
    ("ARENA_TRAINER_MAX_STEPS", "three", "ARENA_TRAINER_MAX_STEPS is `three`, not a whole number"),
    ("ARENA_TRAINER_MAX_STEPS", "0", "ARENA_TRAINER_MAX_STEPS is 0; it must be at least 1"),
    ("ARENA_AGENT_GPUS", "-1", "ARENA_AGENT_GPUS is -1; it must be at least 0"),
    ("ARENA_TRAINER_PREFETCH", "yes", "ARENA_TRAINER_PREFETCH is `yes`: 1 .on. or 0 .off."),
    ("ARENA_SANDBOX_START_S", "0", "ARENA_SANDBOX_START_S is 0; it must be at least 1"),
])
def test_a_bad_setting_is_refused_by_name(name, value, words):
    with pytest.raises(SettingError, match=words.replace("`", ".")):
        Settings.read(dict(GOOD, **{name: value}))
