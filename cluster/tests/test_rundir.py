"""A run's folder keeps what a killed agent or trainer must not lose."""

from arena_cluster.rundir import REPLY_CHARS, RunDir


def test_events_continue_their_sequence_and_a_cut_last_line_is_dropped(tmp_path):
    rd = RunDir(tmp_path / "oe-1")
    rd.write_assignment({"run_id": "oe-1"})
    rd.write_assignment({"run_id": "another"})
    assert rd.assignment == {"run_id": "oe-1"}, "an assignment resent is the one first kept"
    assert rd.emit("loading", 0, "up")["seq"] == 1
    assert rd.emit("rolling", 0, "step 1", alert=None)["seq"] == 2
    with open(rd.path / "events.jsonl", "a") as f:
        f.write('{"seq": 3, "state": "upd')  # killed mid-write
    assert [e["seq"] for e in rd.events()] == [1, 2]
    assert "alert" not in rd.events()[1], "an absent part is left out, not null"
    assert rd.emit("updating", 1, "step 1 trained")["seq"] == 3, "written after the cut line is dropped"
    assert [e["seq"] for e in rd.events()] == [1, 2, 3]
    rd.ack(1)
    assert [e["seq"] for e in rd.unacked()] == [2, 3]
    assert not rd.ended()


def test_a_run_ends_with_its_terminal_event_and_keeps_its_failure(tmp_path):
    rd = RunDir(tmp_path / "oe-2")
    rd.write_assignment({})
    rd.emit("failed", 0, "RUN_TRAINER_FAILED: x")
    assert rd.ended()
    rd.write_failure("RUN_TRAINER_FAILED: because")
    assert rd.failure() == "RUN_TRAINER_FAILED: because"
    assert rd.last_checkpoint() is None
    (rd.checkpoints / "checkpoint-2").mkdir(parents=True)
    (rd.checkpoints / "checkpoint-10").mkdir()
    assert rd.last_checkpoint().name == "checkpoint-10"


def test_a_conversation_is_kept_as_the_model_saw_it_with_its_replies_cut(tmp_path):
    rd = RunDir(tmp_path / "oe-3")
    rd.write_assignment({})
    long_reply = "x" * (REPLY_CHARS + 50)
    big_observation = '{"text":"' + "y" * 5000 + '"}'
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": big_observation},
                {"role": "assistant", "content": long_reply}]
    rd.write_conversation("train", "t-1", messages, step=1, end="invalid_reply", score=None)
    rd.write_conversation("eval-before", "t-2", messages[:2])
    first, second = rd.conversations()
    assert first == {"purpose": "train", "task_label": "t-1", "step": 1, "end": "invalid_reply",
                     "messages": messages[:2] + [{"role": "assistant", "content": "x" * REPLY_CHARS + "…"}]}
    assert second["purpose"] == "eval-before" and second["messages"] == messages[:2]
