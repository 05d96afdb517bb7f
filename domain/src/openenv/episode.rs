//! The episode contract of "How the model sees your environment", enforced by the side that plays
//! episodes (the stand-in's simulated trainer here; a real trainer adapter shares it): one
//! conversation per episode, replies read as exactly one JSON object, tool calls paced and counted,
//! the token budgets, how an episode that did not end by itself is scored, which episodes of an
//! optimizer step train the policy, and whether another step fits in the run's time. Pure: the
//! caller brings the clock, the token counts and the action schema's validator.

use serde_json::{json, Value};

use super::{is_reserved, TaskSpec};

/// Episodes an optimizer step plays of its task at once, each in a fresh sandbox.
pub const EPISODES_PER_STEP: usize = 5;
/// The first this many episodes that end with a valid reward train the policy.
pub const EPISODES_THAT_TRAIN: usize = 4;
/// Tool calls an episode may make at once before pacing applies.
pub const TOOL_CALL_BURST: u64 = 4;
/// A run's time on its H200, counted from the trainer's start on the GPU.
pub const RUN_LIMIT_S: u64 = 14_400;
/// Steps in a row that train nothing (fewer than four valid rewards) after which a run ends
/// `failed` (`RUN_NO_TRAINING_SIGNAL`): five steps, 25 episodes, is enough to tell an environment
/// whose episodes never end with a reward from bad luck (a step trains when four of five do), and
/// costs minutes, not the run's hours.
pub const NO_UPDATE_STEPS: usize = 5;
/// A run handed to the cluster whose trainer has not started on a GPU after this long fails
/// (`RUN_QUEUE_TIMEOUT`) without spending its time.
pub const QUEUE_TIMEOUT_S: i64 = 2 * 3600;

/// What one reply of the model asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An action valid under the schema (a wrapper `{"action": {…}}` already unwrapped).
    Action(Value),
    /// `{"finish": true}`: end the episode.
    Finish,
    /// Anything else ends the episode; the reason says what was wrong.
    Invalid(String),
}

/// Reads one reply: exactly one JSON object and nothing else, either `{"finish": true}`, an action
/// valid under the action schema (`valid`), or the wrapper shape around one.
pub fn read_reply(text: &str, valid: &dyn Fn(&Value) -> Result<(), crate::invalid::Invalid>) -> Reply {
    let value: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => return Reply::Invalid(format!("not exactly one JSON value: {e}")),
    };
    let Some(obj) = value.as_object() else {
        return Reply::Invalid("a JSON value that is not an object".into());
    };
    if is_reserved(&value) && obj.contains_key("finish") {
        return Reply::Finish;
    }
    let action = if is_reserved(&value) { obj["action"].clone() } else { value };
    match valid(&action) {
        Ok(()) => Reply::Action(action),
        Err(e) => Reply::Invalid(format!("the action does not match the action schema: {e}")),
    }
}

/// Why an episode ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The environment answered `done: true`, with this reward.
    Done(Option<f64>),
    /// The model replied `{"finish": true}`.
    Finished,
    /// A reply that was not one valid JSON action.
    InvalidReply(String),
    /// `tool_calls_total` used up.
    ToolCallsExhausted,
    /// A reply over the completion budget, or an observation that no longer fits a budget.
    OutOfTokens(&'static str),
}

impl End {
    /// Whether the episode ended by itself (the environment's `done`); any other end is scored
    /// through `finish_action`.
    pub fn by_itself(&self) -> bool {
        matches!(self, End::Done(_))
    }
}

/// A reward that can train: finite and within [0, 1].
pub fn valid_reward(reward: Option<f64>) -> Option<f64> {
    reward.filter(|r| r.is_finite() && (0.0..=1.0).contains(r))
}

/// The pacing of one episode's tool calls: a bucket of [`TOOL_CALL_BURST`] refilled at
/// `tool_calls_per_minute`, and `tool_calls_total` in all. Times are milliseconds on the caller's
/// clock.
#[derive(Debug, Clone)]
pub struct Pacer {
    per_minute: u64,
    left: u64,
    /// The bucket in whole integers: one call is [`CALL`] units, refilled `per_minute` units a ms.
    units: u64,
    at_ms: u64,
}

const CALL: u64 = 60_000;

impl Pacer {
    pub fn new(task: &TaskSpec, now_ms: u64) -> Pacer {
        Pacer {
            per_minute: task.tool_calls_per_minute.max(1),
            left: task.tool_calls_total,
            units: TOOL_CALL_BURST * CALL,
            at_ms: now_ms,
        }
    }

    /// Takes one call: when it may be sent (now or later), or `None` when the total is used up.
    pub fn take(&mut self, now_ms: u64) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        let now_ms = now_ms.max(self.at_ms);
        self.units = (self.units + (now_ms - self.at_ms) * self.per_minute).min(TOOL_CALL_BURST * CALL);
        self.at_ms = now_ms;
        self.left -= 1;
        if self.units >= CALL {
            self.units -= CALL;
            return Some(now_ms);
        }
        // The call waits for the bucket to hold one, and spends it.
        let wait = (CALL - self.units).div_ceil(self.per_minute);
        self.units = self.units + wait * self.per_minute - CALL;
        self.at_ms = now_ms + wait;
        Some(self.at_ms)
    }
}

/// The token budgets: `completion_tokens` covers the model's tokens and every observation after the
/// first, `context_tokens` the whole conversation.
#[derive(Debug, Clone)]
pub struct Budget {
    completion_left: u64,
    context_left: u64,
}

impl Budget {
    pub fn new(task: &TaskSpec) -> Budget {
        Budget { completion_left: task.completion_tokens, context_left: task.context_tokens }
    }

    fn spend(&mut self, tokens: u64, completion: bool, what: &'static str) -> Result<(), End> {
        if tokens > self.context_left || (completion && tokens > self.completion_left) {
            return Err(End::OutOfTokens(what));
        }
        self.context_left -= tokens;
        if completion {
            self.completion_left -= tokens;
        }
        Ok(())
    }
}

/// One message of the episode's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: &'static str,
    pub content: String,
}

/// The system message: what the model is told about the environment: its action schema and, for
/// a tools environment, its tools as its `tools/list` answered them (`super::admission::tool_list`:
/// name, description, input schema), since a `call_tool` action schema names none.
pub fn system_prompt(action_schema: &Value, tools: &[Value]) -> String {
    let mut text = format!(
        "You act in an environment. Reply with exactly one JSON object and nothing else: an action \
         valid under this JSON Schema, or {{\"finish\": true}} to end the episode.\nAction schema: {action_schema}"
    );
    if !tools.is_empty() {
        text.push_str(&format!(
            "\nTools, each called through the action schema: {}",
            Value::Array(tools.to_vec())
        ));
    }
    text
}

/// What to do after a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Send this action to the environment, not before `at_ms`.
    Call { action: Value, at_ms: u64 },
    /// The episode is over.
    End(End),
}

/// One episode as the rollout side plays it.
#[derive(Debug, Clone)]
pub struct Episode {
    pub messages: Vec<Message>,
    pacer: Pacer,
    budget: Budget,
    ended: Option<End>,
}

impl Episode {
    /// Starts the conversation: the system message with the schema (and tools), then the reset
    /// observation as the first user turn. `system_tokens` and `observation_tokens` are counted by
    /// the caller's tokenizer.
    pub fn start(
        task: &TaskSpec,
        action_schema: &Value,
        tools: &[Value],
        reset_observation: &Value,
        system_tokens: u64,
        observation_tokens: u64,
        now_ms: u64,
    ) -> Episode {
        let mut e = Episode {
            messages: vec![
                Message { role: "system", content: system_prompt(action_schema, tools) },
                Message { role: "user", content: reset_observation.to_string() },
            ],
            pacer: Pacer::new(task, now_ms),
            budget: Budget::new(task),
            ended: None,
        };
        let first = e
            .budget
            .spend(system_tokens, false, "the system message")
            .and_then(|()| e.budget.spend(observation_tokens, false, "the reset observation"));
        e.ended = first.err();
        e
    }

    pub fn ended(&self) -> Option<&End> {
        self.ended.as_ref()
    }

    fn end(&mut self, end: End) -> Turn {
        self.ended = Some(end.clone());
        Turn::End(end)
    }

    /// The model's reply (`tokens` long): the action to send and when, or the episode's end.
    pub fn reply(
        &mut self,
        text: &str,
        tokens: u64,
        valid: &dyn Fn(&Value) -> Result<(), crate::invalid::Invalid>,
        now_ms: u64,
    ) -> Turn {
        if let Some(end) = &self.ended {
            return Turn::End(end.clone());
        }
        if let Err(end) = self.budget.spend(tokens, true, "the reply") {
            return self.end(end);
        }
        self.messages.push(Message { role: "assistant", content: text.to_string() });
        match read_reply(text, valid) {
            Reply::Finish => self.end(End::Finished),
            Reply::Invalid(why) => self.end(End::InvalidReply(why)),
            Reply::Action(action) => match self.pacer.take(now_ms) {
                Some(at_ms) => Turn::Call { action, at_ms },
                None => self.end(End::ToolCallsExhausted),
            },
        }
    }

    /// The environment's answer to the last action: the episode ends on `done`, or when the
    /// observation (`tokens` long) no longer fits.
    pub fn observe(
        &mut self,
        observation: &Value,
        tokens: u64,
        reward: Option<f64>,
        done: bool,
    ) -> Option<End> {
        if self.ended.is_some() {
            return self.ended.clone();
        }
        if done {
            self.ended = Some(End::Done(reward));
        } else if let Err(end) = self.budget.spend(tokens, true, "an observation") {
            self.ended = Some(end);
        } else {
            self.messages.push(Message { role: "user", content: observation.to_string() });
        }
        self.ended.clone()
    }
}

/// How an ended episode is scored: the environment's own reward when it ended by itself, else
/// the reward of `finish_action` (`finish_reward`, what the environment answered to it; `None`
/// when the submission has none or it did not end the episode). Only a valid reward trains.
pub fn score(end: &End, finish_reward: Option<f64>) -> Option<f64> {
    match end {
        End::Done(r) => valid_reward(*r),
        _ => valid_reward(finish_reward),
    }
}

/// The rewards that train the policy for one step: the first [`EPISODES_THAT_TRAIN`] episodes, in
/// the order they ended, that have a valid reward; `None` when fewer did (the step trains nothing).
pub fn training_group(scores_in_end_order: &[Option<f64>]) -> Option<Vec<f64>> {
    let group: Vec<f64> = scores_in_end_order.iter().filter_map(|s| *s).take(EPISODES_THAT_TRAIN).collect();
    (group.len() == EPISODES_THAT_TRAIN).then_some(group)
}

/// Whether a step's training group can teach the policy anything: GRPO's advantage is each reward
/// minus the group's mean, so a group of equal rewards gives zero advantages and an update that
/// changes nothing, whatever the optimizer reports.
pub fn group_has_signal(group: &[f64]) -> bool {
    group.iter().any(|r| *r != group[0])
}

/// How a step counts toward [`no_signal`], from its episodes' rewards in the order they ended
/// (`None`: no valid reward) and those the platform lost (`lost`: their sandbox never served, even
/// replaced): `Some(true)` it had a training signal (four valid rewards that differ);
/// `Some(false)` it had none by its environment's doing (fewer than four valid rewards, or four
/// equal ones); `None` it trained nothing only because the platform lost sandboxes that might have
/// given the rewards it lacked, which is not the participant's and is not counted.
pub fn step_trained(scores_in_end_order: &[Option<f64>], lost: usize) -> Option<bool> {
    if let Some(group) = training_group(scores_in_end_order) {
        return Some(group_has_signal(&group));
    }
    let valid = scores_in_end_order.iter().flatten().count();
    if valid + lost >= EPISODES_THAT_TRAIN {
        None
    } else {
        Some(false)
    }
}

/// Whether a run whose steps trained or not (`trained`, oldest first, every step it played, as
/// [`step_trained`] counts them; `None`: not counted) has gone [`NO_UPDATE_STEPS`] counted steps in
/// a row without training: it ends then.
pub fn no_signal(trained: &[Option<bool>]) -> bool {
    let counted: Vec<bool> = trained.iter().flatten().copied().collect();
    counted.len() >= NO_UPDATE_STEPS && counted.iter().rev().take(NO_UPDATE_STEPS).all(|t| !t)
}

/// The training task of optimizer step `step` (0-based): the train tasks in turn.
pub fn step_task(tasks: &[TaskSpec], step: u64) -> Option<&TaskSpec> {
    let train: Vec<&TaskSpec> = tasks.iter().filter(|t| t.split == "train").collect();
    (!train.is_empty()).then(|| train[(step % train.len() as u64) as usize])
}

/// The longest a step of this task can take: its episodes' reset, rollout and verifier walls (the
/// five run at once), then the policy update.
pub fn step_allowance_s(task: &TaskSpec, update_s: u64) -> u64 {
    task.reset_wall_s + task.rollout_wall_s + task.verifier_wall_s + update_s
}

/// Whether another step of `task` fits in what is left of the run's time.
pub fn step_fits(elapsed_s: u64, task: &TaskSpec, update_s: u64, limit_s: u64) -> bool {
    elapsed_s + step_allowance_s(task, update_s) <= limit_s
}

/// A rough token count (about four characters a token) for a caller without the model's tokenizer
/// (the simulated trainer).
pub fn approx_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4).max(1)
}

/// The episode protocol's messages over the server's `/ws`: a reset with what chooses the task
/// (`reset_for`, or the task API's `{"split", "index"}` admission found).
pub fn ws_reset(reset: &Value) -> Value {
    json!({"type": "reset", "data": reset})
}

/// How a task is chosen at reset when the environment has no task API: by its id.
pub fn reset_for(task_id: &str) -> Value {
    json!({"task_id": task_id})
}

pub fn ws_step(action: &Value) -> Value {
    json!({"type": "step", "data": action})
}

/// An observation message's (observation, reward, done); `None` for anything else (an error).
/// The observation's `metadata` is not part of it: openenv 0.10 sends it (`{"step": 1}`, or an
/// importer's prompt and task spec, answer included) and the model never sees it.
pub fn ws_observation(message: &Value) -> Option<(Value, Option<f64>, bool)> {
    if message["type"] != "observation" {
        return None;
    }
    let data = &message["data"];
    let mut observation = data["observation"].clone();
    if let Some(fields) = observation.as_object_mut() {
        fields.remove("metadata");
    }
    Some((observation, data["reward"].as_f64(), data["done"].as_bool().unwrap_or(false)))
}

#[cfg(test)]
mod cases;

#[cfg(test)]
mod tests {
    use super::*;

    fn task(json: Value) -> TaskSpec {
        let mut base = json!({"task_id": "t", "split": "train"});
        base.as_object_mut().unwrap().extend(json.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    /// The echo schema: an object with a string `message` and nothing else.
    fn echo_valid(a: &Value) -> Result<(), crate::invalid::Invalid> {
        let ok =
            a.as_object().is_some_and(|o| o.len() == 1 && o.get("message").is_some_and(Value::is_string));
        ok.then_some(()).ok_or_else(|| "needs exactly a string `message`".into())
    }

    #[test]
    fn each_reply_shape_is_read_as_the_guide_says() {
        let read = |t: &str| read_reply(t, &echo_valid);
        assert_eq!(read(r#"{"message": "hi"}"#), Reply::Action(json!({"message": "hi"})));
        assert_eq!(read(" {\"message\": \"hi\"}\n"), Reply::Action(json!({"message": "hi"})));
        assert_eq!(read(r#"{"finish": true}"#), Reply::Finish);
        // The wrapper is unwrapped; its inner object must itself be a valid action.
        assert_eq!(read(r#"{"action": {"message": "hi"}}"#), Reply::Action(json!({"message": "hi"})));
        assert!(matches!(read(r#"{"action": {"text": "hi"}}"#), Reply::Invalid(_)));
        // Not a reserved shape: `finish` false, or `action` beside other fields, is an ordinary action.
        assert!(matches!(read(r#"{"finish": false}"#), Reply::Invalid(_)));
        assert!(matches!(read(r#"{"action": {"message": "hi"}, "why": 1}"#), Reply::Invalid(_)));
        for bad in
            ["", "hello", r#"{"message": "a"} {"message": "b"}"#, "[1]", "\"x\"", r#"Sure! {"message": "a"}"#]
        {
            assert!(matches!(read(bad), Reply::Invalid(_)), "{bad:?}");
        }
    }

    #[test]
    fn calls_are_paced_to_the_rate_with_a_burst_of_four_and_counted() {
        let mut p = Pacer::new(&task(json!({"tool_calls_per_minute": 60, "tool_calls_total": 7})), 0);
        // Four at once, then one a second.
        let at: Vec<u64> = (0..6).map(|_| p.take(0).unwrap()).collect();
        assert_eq!(at, [0, 0, 0, 0, 1000, 2000]);
        // Waiting refills the bucket (never beyond four).
        assert_eq!(p.take(60_000), Some(60_000));
        assert_eq!(p.take(60_000), None, "tool_calls_total is the limit");
        let mut slow = Pacer::new(&task(json!({"tool_calls_per_minute": 6})), 0);
        for _ in 0..4 {
            slow.take(0);
        }
        assert_eq!(slow.take(0), Some(10_000));
        assert_eq!(slow.take(10_000), Some(20_000));
    }

    fn episode(limits: Value) -> Episode {
        Episode::start(&task(limits), &json!({"type": "object"}), &[], &json!({"prompt": "echo"}), 50, 10, 0)
    }

    #[test]
    fn the_conversation_is_system_schema_then_observations_as_user_turns() {
        let mut e = episode(json!({}));
        assert_eq!(e.messages[0].role, "system");
        assert!(e.messages[0].content.contains(r#"{"type":"object"}"#));
        assert_eq!(e.messages[1], Message { role: "user", content: r#"{"prompt":"echo"}"#.into() });
        let turn = e.reply(r#"{"message": "a"}"#, 5, &echo_valid, 0);
        assert_eq!(turn, Turn::Call { action: json!({"message": "a"}), at_ms: 0 });
        assert_eq!(e.observe(&json!({"echoed": "a"}), 5, Some(0.0), false), None);
        assert_eq!(
            e.messages.iter().map(|m| m.role).collect::<Vec<_>>(),
            ["system", "user", "assistant", "user"]
        );
        assert_eq!(e.observe(&json!({}), 5, Some(0.7), true), Some(End::Done(Some(0.7))));
        assert!(e.ended().unwrap().by_itself());
    }

    #[test]
    fn an_invalid_reply_or_finish_ends_the_episode() {
        let mut e = episode(json!({}));
        assert!(matches!(e.reply("not json", 3, &echo_valid, 0), Turn::End(End::InvalidReply(_))));
        assert!(matches!(e.reply(r#"{"message": "a"}"#, 3, &echo_valid, 0), Turn::End(End::InvalidReply(_))));
        let mut f = episode(json!({}));
        assert_eq!(f.reply(r#"{"finish": true}"#, 3, &echo_valid, 0), Turn::End(End::Finished));
        assert!(!End::Finished.by_itself());
    }

    #[test]
    fn the_token_budgets_end_an_episode() {
        // completion_tokens covers the model's tokens and every observation after the first.
        let mut e = episode(json!({"completion_tokens": 100, "context_tokens": 16384}));
        assert!(matches!(e.reply(r#"{"message": "a"}"#, 60, &echo_valid, 0), Turn::Call { .. }));
        assert_eq!(e.observe(&json!({}), 41, None, false), Some(End::OutOfTokens("an observation")));
        let mut r = episode(json!({"completion_tokens": 100}));
        assert_eq!(
            r.reply(r#"{"message": "a"}"#, 101, &echo_valid, 0),
            Turn::End(End::OutOfTokens("the reply"))
        );
        // context_tokens covers the whole conversation, the first observation included.
        let big =
            Episode::start(&task(json!({"context_tokens": 100})), &json!({}), &[], &json!({}), 50, 51, 0);
        assert_eq!(big.ended(), Some(&End::OutOfTokens("the reset observation")));
        let mut c = episode(json!({"context_tokens": 100}));
        assert!(matches!(c.reply(r#"{"message": "a"}"#, 30, &echo_valid, 0), Turn::Call { .. }));
        assert_eq!(c.observe(&json!({}), 11, None, false), Some(End::OutOfTokens("an observation")));
    }

    #[test]
    fn tool_calls_total_ends_the_episode_and_pacing_delays_calls() {
        let mut e = episode(json!({"tool_calls_total": 5, "tool_calls_per_minute": 30}));
        let mut at = Vec::new();
        for _ in 0..5 {
            match e.reply(r#"{"message": "a"}"#, 1, &echo_valid, 0) {
                Turn::Call { at_ms, .. } => at.push(at_ms),
                t => panic!("{t:?}"),
            }
            e.observe(&json!({}), 1, None, false);
        }
        assert_eq!(at, [0, 0, 0, 0, 2000]);
        assert_eq!(e.reply(r#"{"message": "a"}"#, 1, &echo_valid, 0), Turn::End(End::ToolCallsExhausted));
    }

    #[test]
    fn an_episode_that_did_not_end_by_itself_is_scored_through_finish_action() {
        assert_eq!(score(&End::Done(Some(0.5)), Some(1.0)), Some(0.5), "its own reward when done");
        assert_eq!(score(&End::Done(Some(1.5)), None), None, "out of [0, 1]");
        assert_eq!(score(&End::Done(None), None), None);
        assert_eq!(score(&End::Finished, Some(0.25)), Some(0.25));
        assert_eq!(score(&End::InvalidReply("x".into()), Some(0.0)), Some(0.0));
        assert_eq!(score(&End::ToolCallsExhausted, None), None, "no finish_action: nothing to score");
        assert_eq!(score(&End::OutOfTokens("x"), Some(f64::NAN)), None);
    }

    #[test]
    fn the_first_four_episodes_with_a_valid_reward_train() {
        assert_eq!(
            training_group(&[Some(0.1), None, Some(0.2), Some(0.3), Some(0.4), Some(0.5)]),
            Some(vec![0.1, 0.2, 0.3, 0.4])
        );
        assert_eq!(training_group(&[Some(1.0), None, Some(0.0), Some(0.5), None]), None);
    }

    #[test]
    fn steps_take_the_train_tasks_in_turn_and_stop_when_the_next_does_not_fit() {
        let tasks = [
            task(json!({"task_id": "a"})),
            task(json!({"task_id": "e", "split": "eval"})),
            task(json!({"task_id": "b"})),
        ];
        let order: Vec<&str> = (0..4).map(|s| step_task(&tasks, s).unwrap().task_id.as_str()).collect();
        assert_eq!(order, ["a", "b", "a", "b"]);
        assert!(step_task(&tasks[1..2], 0).is_none());
        // Defaults: 180 + 1800 + 120 s of episodes and a 300 s update: 2,400 s a step, six in 14,400 s.
        let t = &tasks[0];
        assert_eq!(step_allowance_s(t, 300), 2400);
        let steps = (0..).take_while(|s| step_fits(s * 2400, t, 300, RUN_LIMIT_S)).count();
        assert_eq!(steps, 6);
        assert!(!step_fits(0, &task(json!({"rollout_wall_s": 3300})), 300, 3000), "not even one step");
    }

    #[test]
    fn the_ws_protocol_messages() {
        assert_eq!(ws_reset(&reset_for("echo-1")), json!({"type": "reset", "data": {"task_id": "echo-1"}}));
        let m =
            json!({"type": "observation", "data": {"observation": {"x": 1}, "reward": 0.5, "done": true}});
        assert_eq!(ws_observation(&m), Some((json!({"x": 1}), Some(0.5), true)));
        assert_eq!(ws_observation(&json!({"type": "error", "data": {}})), None);
        // openenv 0.10 sends the observation's metadata (an importer's answer among it): never shown.
        let leaky = json!({"type": "observation", "data": {"observation": {"metadata": {"prompt": "2+2?",
            "task_spec": {"answer": "4"}}, "x": 1}, "reward": null, "done": false, "metadata": {"answer": "4"}}});
        assert_eq!(ws_observation(&leaky), Some((json!({"x": 1}), None, false)));
        assert!(system_prompt(&json!({"type": "object"}), &[json!({"name": "echo"})])
            .ends_with(r#"[{"name":"echo"}]"#));
    }
}
