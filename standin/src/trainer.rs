//! The simulated trainer of the local training cluster (a simulation: no model, no GPU). It takes
//! an assignment and plays real episodes against the submission's images, each in a fresh local
//! sandbox (`crate::sandbox`), through the servers' WebSocket protocol, under the episode contract
//! of `domain::openenv::episode`. Its policy is scripted: the example actions, with a chance (that
//! falls as the policy "learns") of seeded random actions valid under the schema or a malformed
//! reply instead. The run's time is simulated: each optimizer step is charged its task's declared
//! walls plus an update, so a demo run takes minutes yet ends as a 14,400 s run would.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::openenv::assignment::Played;
use domain::openenv::episode::{
    self, approx_tokens, score, step_fits, step_task, training_group, Episode, Turn, EPISODES_PER_STEP,
};
use domain::openenv::TaskSpec;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::cluster_state::Shared;
use crate::registry::Repository;

/// Simulated seconds the trainer charges for loading the model and for one policy update.
pub const LOAD_S: u64 = 120;
pub const UPDATE_S: u64 = 300;

#[derive(Clone)]
pub struct Trainer {
    /// The images the stand-in serves (what the sandboxes run).
    pub images: Arc<BTreeMap<String, Repository>>,
    /// Real time between the run's stage changes, so that a follower sees each.
    pub stage: Duration,
}

/// A small deterministic generator (the policy is seeded by run, step and episode).
struct Rng(u64);

impl Rng {
    fn new(seed: &str) -> Rng {
        Rng(seed.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
            | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
}

/// A random value valid under a simple JSON Schema (object, string, integer, number, boolean, enum).
fn random_value(schema: &Value, rng: &mut Rng) -> Value {
    if let Some(options) = schema["enum"].as_array().filter(|o| !o.is_empty()) {
        return options[(rng.next() % options.len() as u64) as usize].clone();
    }
    match schema["type"].as_str() {
        Some("object") => {
            let required: Vec<&str> =
                schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let mut out = serde_json::Map::new();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                if required.contains(&name.as_str()) {
                    out.insert(name.clone(), random_value(property, rng));
                }
            }
            Value::Object(out)
        }
        Some("integer") => json!(rng.next() % 100),
        Some("number") => json!((rng.next() % 1000) as f64 / 10.0),
        Some("boolean") => json!(rng.next().is_multiple_of(2)),
        _ => json!(["echo", "hello", "try", "again", "maybe"][(rng.next() % 5) as usize]),
    }
}

/// The event the run reports, with its sequence.
struct Reporter {
    shared: Shared,
    run_id: String,
    seq: i64,
}

impl Reporter {
    fn emit(&mut self, state: &str, policy_version: i64, rewards: Option<Vec<Option<f64>>>, message: String) {
        self.emit_with(state, policy_version, rewards, message, json!({}));
    }

    fn emit_with(
        &mut self,
        state: &str,
        policy_version: i64,
        rewards: Option<Vec<Option<f64>>>,
        message: String,
        extra: Value,
    ) {
        self.seq += 1;
        let at = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut event = json!({"seq": self.seq, "state": state, "policy_version": policy_version, "at": at,
            "message": message});
        if let Some(rewards) = rewards {
            event["rewards"] = json!(rewards);
        }
        if let (Some(e), Some(extra)) = (event.as_object_mut(), extra.as_object()) {
            e.extend(extra.clone());
        }
        self.shared.emit(&self.run_id, event);
    }
}

impl Trainer {
    /// Trains one assignment to its end, reporting each stage.
    pub async fn train(self, shared: Shared, run_id: String, assignment: Value) {
        let mut report = Reporter { shared, run_id: run_id.clone(), seq: 0 };
        let submission = &assignment["submission"];
        let limit_s = assignment["time_limit_s"].as_u64().unwrap_or(episode::RUN_LIMIT_S);
        let mut played: BTreeMap<String, Played> = BTreeMap::new();
        let tasks: Vec<(TaskSpec, String)> = submission["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let image = t["image"].as_str()?.to_string();
                let mut spec = t.clone();
                let o = spec.as_object_mut()?;
                // What the real trainer starts its sandboxes with; the simulation plays the
                // image locally (`crate::sandbox::LocalSandbox`).
                for key in ["port", "command", "env", "task_label"] {
                    o.remove(key);
                }
                // How admission played the task: its reset and its environment's tools.
                let tools =
                    o.remove("tools").and_then(|t| serde_json::from_value(t).ok()).unwrap_or_default();
                let how = Played { reset: o.remove("reset"), tools };
                o.insert("image".into(), Value::String(image.clone()));
                let spec: TaskSpec = serde_json::from_value(spec).ok()?;
                played.insert(spec.task_id.clone(), how);
                Some((spec, image))
            })
            .collect();
        let specs: Vec<TaskSpec> = tasks.iter().map(|(t, _)| t.clone()).collect();
        report.emit(
            "loading",
            0,
            None,
            "the trainer started on the GPU (simulation: no model is loaded)".into(),
        );
        tokio::time::sleep(self.stage).await;
        let benchmark = &assignment["benchmark"];
        if benchmark.is_object() {
            self.evaluate(&mut report, benchmark, "before", 0).await;
        }
        let mut elapsed = LOAD_S;
        let mut version = 0i64;
        let mut step = 0u64;
        while let Some(task) = step_task(&specs, step) {
            if !step_fits(elapsed, task, UPDATE_S, limit_s) {
                break;
            }
            report.emit(
                "rolling",
                version,
                None,
                format!("step {}: five episodes of `{}`", step + 1, task.task_id),
            );
            let how = played.get(&task.task_id).cloned().unwrap_or_default();
            let scores = self.play_step(submission, task, &how, &run_id, step, version).await;
            let group = training_group(&scores);
            let message = format!("episodes' rewards in the order they ended: {}", show(&scores));
            match group {
                Some(group) => {
                    // The version after the update: `policy_version` counts the steps taken.
                    tokio::time::sleep(self.stage).await;
                    version += 1;
                    report.emit("updating", version, Some(group.into_iter().map(Some).collect()), message);
                }
                None => report.emit(
                    "updating",
                    version,
                    Some(Vec::new()),
                    format!("{message}; fewer than four ended with a valid reward: the step trains nothing"),
                ),
            }
            elapsed += episode::step_allowance_s(task, UPDATE_S);
            step += 1;
        }
        if step == 0 {
            let why = match step_task(&specs, 0) {
                None => "RUN_STEP_DOES_NOT_FIT: the submission has no train task".to_string(),
                Some(t) => format!(
                    "RUN_STEP_DOES_NOT_FIT: one step of `{}` needs {} s and the run has {} s",
                    t.task_id,
                    episode::step_allowance_s(t, UPDATE_S),
                    limit_s - elapsed.min(limit_s)
                ),
            };
            report.emit("failed", version, None, why);
            return;
        }
        if benchmark.is_object() {
            self.evaluate(&mut report, benchmark, "after", version).await;
        }
        report.emit("cleanup", version, None, format!("{step} steps in {elapsed} simulated seconds"));
        tokio::time::sleep(self.stage).await;
        report.emit("completed", version, None, format!("{version} optimizer steps taken"));
    }

    /// One evaluation phase (simulated: the scripted policy at `version`): every held-out task
    /// `trials` times, five episodes at once, each in a fresh sandbox and seeded by its task and
    /// trial alone, so that before and after see the same draws; an episode with no reward is
    /// played once more, then left out. Reports the phase's start and its records at its end.
    async fn evaluate(&self, report: &mut Reporter, benchmark: &Value, phase: &str, version: i64) {
        let trials = benchmark["trials"].as_u64().unwrap_or(1) as u32;
        let id = benchmark["id"].as_str().unwrap_or_default();
        let mut cells: Vec<(Value, TaskSpec, u32)> = Vec::new();
        for env in benchmark["environments"].as_array().into_iter().flatten() {
            let submission = json!({"schema": env["schema"], "schema_draft": env["schema_draft"],
                "example_actions": [], "finish_action": env["finish_action"]});
            for t in env["tasks"].as_array().into_iter().flatten() {
                let mut spec = t.clone();
                if let Some(o) = spec.as_object_mut() {
                    o.remove("task_label");
                    o.insert("image".into(), env["image"].clone());
                }
                let Ok(task) = serde_json::from_value::<TaskSpec>(spec) else { continue };
                cells.extend((0..trials).map(|k| (submission.clone(), task.clone(), k)));
            }
        }
        let planned = cells.len() as u32;
        let progress = |done: u32, records: Vec<Value>, incomplete: Option<&str>| {
            let mut e = json!({"phase": phase, "done": done, "planned": planned, "simulated": true});
            if !records.is_empty() {
                e["records"] = json!(records);
            }
            if let Some(why) = incomplete {
                e["incomplete"] = json!(why);
            }
            json!({"evaluation": e})
        };
        if cells.is_empty() {
            let why = "the benchmark's environments are not on this arena (a private benchmark without its overlay)";
            report.emit_with(
                "evaluating",
                version,
                None,
                format!("{phase} training: {why}"),
                progress(0, vec![], Some(why)),
            );
            return;
        }
        report.emit_with(
            "evaluating",
            version,
            None,
            format!("{planned} held-out episodes {phase} training (simulated policy)"),
            progress(0, vec![], None),
        );
        let mut records = Vec::new();
        for chunk in cells.chunks(EPISODES_PER_STEP) {
            let played =
                futures_util::future::join_all(chunk.iter().map(|(submission, task, trial)| async move {
                    let seed = format!("{id}/{}/{trial}", task.task_id);
                    let mut replays = 0;
                    let how = Played::default();
                    // Every held-out episode explores as much as the version's policy does: the
                    // base explores always, a trained policy less (its Δ is what it learned).
                    let mut reward =
                        self.play_episode(submission, task, &how, seed.clone(), version, true).await;
                    if reward.is_none() {
                        replays = 1;
                        reward = self.play_episode(submission, task, &how, seed, version, true).await;
                    }
                    json!({"task_id": task.task_id, "trial": trial, "reward": reward, "replays": replays})
                }))
                .await;
            records.extend(played);
        }
        let lost = records.iter().filter(|r| r["reward"].is_null()).count();
        report.emit_with(
            "evaluating",
            version,
            None,
            format!("{planned} held-out episodes {phase} training played; {lost} lost to the platform (simulated policy)"),
            progress(planned, records, None),
        );
    }

    /// Five episodes at once, each in a fresh sandbox; their scores in the order they ended.
    async fn play_step(
        &self,
        submission: &Value,
        task: &TaskSpec,
        how: &Played,
        run_id: &str,
        step: u64,
        version: i64,
    ) -> Vec<Option<f64>> {
        let mut running = futures_util::stream::FuturesUnordered::new();
        for n in 0..EPISODES_PER_STEP {
            let seed = format!("{run_id}/{step}/{n}");
            // Odd episodes explore, the others play the examples (`Self::episode`).
            running.push(self.play_episode(submission, task, how, seed, version, n % 2 == 1));
        }
        let mut scores = Vec::new();
        while let Some(s) = running.next().await {
            scores.push(s);
        }
        scores
    }

    async fn play_episode(
        &self,
        submission: &Value,
        task: &TaskSpec,
        how: &Played,
        seed: String,
        version: i64,
        explores: bool,
    ) -> Option<f64> {
        let image = task.image.as_deref()?;
        let image = crate::sandbox::image_of(&self.images, image)?;
        let sandbox = crate::sandbox::LocalSandbox::start(&image).await.ok()?;
        let port = sandbox.port;
        let result = tokio::time::timeout(
            Duration::from_secs(task.reset_wall_s + task.rollout_wall_s + task.verifier_wall_s),
            self.episode(submission, task, how, port, seed, version, explores),
        )
        .await
        .ok()
        .flatten();
        drop(sandbox);
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn episode(
        &self,
        submission: &Value,
        task: &TaskSpec,
        how: &Played,
        port: u16,
        seed: String,
        version: i64,
        explores: bool,
    ) -> Option<f64> {
        let started = Instant::now();
        while !healthy(port).await {
            if started.elapsed() > Duration::from_secs(task.reset_wall_s) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{port}/ws")).await.ok()?;
        let schema = &submission["schema"]["action"];
        // The draft the assignment names, as the real trainer compiles it.
        let draft =
            submission["schema_draft"].as_str().and_then(domain::openenv::schema::SchemaDraft::parse)?;
        let validator = domain::openenv::schema::validator(schema, draft).ok()?;
        let valid = |a: &Value| validator.validate(a).map_err(|e| domain::invalid::Invalid(e.to_string()));
        let reset = how.reset.clone().unwrap_or_else(|| episode::reset_for(&task.task_id));
        ws.send(Message::Text(episode::ws_reset(&reset).to_string().into())).await.ok()?;
        let (observation, _, _) = read_observation(&mut ws).await?;
        let system = episode::system_prompt(schema, &how.tools);
        let clock = Instant::now();
        let mut e = Episode::start(
            task,
            schema,
            &how.tools,
            &observation,
            approx_tokens(&system),
            approx_tokens(&observation.to_string()),
            0,
        );
        let mut rng = Rng::new(&seed);
        let examples = submission["example_actions"].as_array().cloned().unwrap_or_default();
        // The scripted policy: the even episodes of a step play the example actions (the episode
        // admission saw end with a reward); the odd ones explore, playing values drawn from the
        // schema, and "learn": at each version an explorer is less likely to explore at all, and
        // a trained one now and then replies with no action. The first step thus has three
        // example episodes and two explorers, so any four of them hold both kinds and its rewards
        // differ wherever exploring scores otherwise than the examples: a simulated run has a
        // training signal, as GRPO needs.
        let explore = explores && rng.chance(1.0 / (1.0 + version as f64));
        let mut turn = 0usize;
        let end = loop {
            if let Some(end) = e.ended() {
                break end.clone();
            }
            let reply = if explore && version > 0 && rng.chance(0.15) {
                "Let me think about the echo first.".to_string()
            } else if turn < examples.len() && !explore {
                examples[turn].to_string()
            } else {
                random_value(schema, &mut rng).to_string()
            };
            turn += 1;
            let now = clock.elapsed().as_millis() as u64;
            match e.reply(&reply, approx_tokens(&reply), &valid, now) {
                Turn::End(end) => break end,
                Turn::Call { action, at_ms } => {
                    tokio::time::sleep(Duration::from_millis(at_ms.saturating_sub(now))).await;
                    ws.send(Message::Text(episode::ws_step(&action).to_string().into())).await.ok()?;
                    let (obs, reward, done) = read_observation(&mut ws).await?;
                    e.observe(&obs, approx_tokens(&obs.to_string()), reward, done);
                }
            }
        };
        let finish_reward = match (&end, submission.get("finish_action").filter(|f| !f.is_null())) {
            (end, Some(finish)) if !end.by_itself() => {
                ws.send(Message::Text(episode::ws_step(finish).to_string().into())).await.ok()?;
                read_observation(&mut ws).await.and_then(|(_, r, done)| r.filter(|_| done))
            }
            _ => None,
        };
        let _ = ws.send(Message::Text(json!({"type": "close"}).to_string().into())).await;
        score(&end, finish_reward)
    }
}

/// Whether the server answers `GET /health` with 200 (a bare HTTP/1.0 request: the stand-in has
/// no HTTP client of its own).
async fn healthy(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else { return false };
    if stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    matches!(tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut head)).await, Ok(Ok(_)))
        && head.ends_with(b" 200")
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn read_observation(ws: &mut Ws) -> Option<(Value, Option<f64>, bool)> {
    loop {
        match ws.next().await? {
            Ok(Message::Text(t)) => return episode::ws_observation(&serde_json::from_str(&t).ok()?),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

fn show(scores: &[Option<f64>]) -> String {
    let parts: Vec<String> = scores.iter().map(|s| s.map_or("none".into(), |r| format!("{r}"))).collect();
    format!("[{}]", parts.join(", "))
}
