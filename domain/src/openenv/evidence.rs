//! What an admission refusal shows its submitter, bounded and theirs alone: where the image's
//! `/schema` differs from the submission's, what their server answered to the example and finish
//! actions (a transcript), and which of `openenv validate`'s checks failed. The participant's
//! local check (`scripts/openenv_check.py`) computes the same differences and replays the same
//! shared cases (`tests/fixtures/openenv-admission-cases.json`). Nothing the arena holds reaches a
//! refusal: every string passes through [`scrubbed`] with the arena's credentials first.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::ErrorCode;

/// Differences listed at most, and the characters of each value shown.
pub const MAX_DIFFERENCES: usize = 8;
pub const MAX_VALUE_CHARS: usize = 120;
/// Characters of one observation in a transcript, and bytes of a whole piece of evidence.
pub const MAX_OBSERVATION_CHARS: usize = 1024;
pub const MAX_EVIDENCE_BYTES: usize = 16 << 10;
/// A value one side of a difference does not have.
pub const ABSENT: &str = "(absent)";

/// One place where the served schema and the submitted one differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// RFC 6901, from the schema's root (`/action/properties/x/description`).
    pub pointer: String,
    pub served: String,
    pub submitted: String,
}

/// Where the served `action` and `observation` differ from the submitted ones: at most
/// [`MAX_DIFFERENCES`] (`action` first, keys in order), and how many more there are.
pub fn schema_differences(served: &Value, submitted: &Value) -> (Vec<Difference>, usize) {
    let mut all = Vec::new();
    for part in ["action", "observation"] {
        let (a, b) = (served.get(part), submitted.get(part));
        walk(&format!("/{part}"), a, b, &mut all);
    }
    let more = all.len().saturating_sub(MAX_DIFFERENCES);
    all.truncate(MAX_DIFFERENCES);
    (all, more)
}

fn walk(at: &str, served: Option<&Value>, submitted: Option<&Value>, out: &mut Vec<Difference>) {
    // Stop collecting well past what is listed: the count of the rest is a lower bound then.
    if out.len() > 10 * MAX_DIFFERENCES {
        return;
    }
    match (served, submitted) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                walk(&format!("{at}/{}", escape(k)), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                walk(&format!("{at}/{i}"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Difference { pointer: at.to_string(), served: shown(a), submitted: shown(b) }),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| ABSENT.to_string(), |v| cut(&v.to_string(), MAX_VALUE_CHARS))
}

/// `text` cut to `max` characters, with `…` when it was cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The evidence of `IMAGE_SCHEMA_MISMATCH`.
pub fn schema_evidence(served: &Value, submitted: &Value) -> Option<Value> {
    let (differences, more) = schema_differences(served, submitted);
    (!differences.is_empty()).then(|| json!({"differences": differences, "more": more}))
}

/// The sentence of `IMAGE_SCHEMA_MISMATCH`: the first difference named.
pub fn schema_message(served: &Value, submitted: &Value) -> Option<String> {
    let (differences, more) = schema_differences(served, submitted);
    let first = differences.first()?;
    let rest = differences.len() - 1 + more;
    let others = if rest > 0 { format!(" (and {rest} more place(s))") } else { String::new() };
    Some(format!(
        "the image's /schema differs from the submission's at `{}`: the image serves {}, the submission says {}{others}",
        first.pointer, first.served, first.submitted
    ))
}

/// One exchange of an episode as the participant's server answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// What the arena sent: the reset's data, or an action.
    pub sent: Value,
    /// The observation, as compact JSON text cut to [`MAX_OBSERVATION_CHARS`].
    pub observation: String,
    pub reward: Option<f64>,
    pub done: bool,
}

impl Exchange {
    pub fn new(sent: &Value, observation: &Value, reward: Option<f64>, done: bool) -> Exchange {
        Exchange {
            sent: sent.clone(),
            observation: cut(&observation.to_string(), MAX_OBSERVATION_CHARS),
            reward,
            done,
        }
    }
}

/// An episode's exchanges as evidence, within [`MAX_EVIDENCE_BYTES`]: the first ones kept, and
/// `truncated` when some were left out.
pub fn transcript(exchanges: &[Exchange]) -> Value {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for e in exchanges {
        let size = serde_json::to_string(e).map_or(0, |t| t.len());
        if bytes + size > MAX_EVIDENCE_BYTES {
            break;
        }
        bytes += size;
        kept.push(e);
    }
    json!({"transcript": kept, "truncated": kept.len() < exchanges.len()})
}

/// A first observation's fingerprint: SHA-256 of its compact JSON.
pub fn fingerprint(observation: &Value) -> String {
    crate::digest::sha256_hex(observation.to_string())
}

/// Tasks whose first observations may show an environment that ignores `task_id`: with two or
/// more tasks, when every reset of every task (`(task_id, fingerprints)`, resets with different
/// seeds among them) gave byte-identical first observations, every task; else none.
pub fn ignored_task_ids(tasks: &[(String, Vec<String>)]) -> Vec<String> {
    let mut all = tasks.iter().flat_map(|(_, f)| f.iter());
    let Some(first) = all.next() else { return Vec::new() };
    let same = all.all(|f| f == first);
    let every_task_seen = tasks.iter().all(|(_, f)| f.len() >= 2);
    if tasks.len() >= 2 && every_task_seen && same {
        tasks.iter().map(|(t, _)| t.clone()).collect()
    } else {
        Vec::new()
    }
}

/// The warning's words.
pub const RESET_IGNORES_TASK: &str = "every task's first observation is byte-identical, across resets with \
     different seeds: the environment may ignore `task_id` (check that its reset reads the task it is given; \
     openenv-core 0.2.x drops unknown reset keys)";

/// The warning's words when a submission has no `finish_action`.
pub const FINISH_ACTION_MISSING: &str = "the submission has no `finish_action`: an episode the model stops, \
     or ends with an invalid reply, then ends with no reward and trains nothing. A finish action that ends any \
     episode with its reward so far lets such episodes still count";

/// The warning's words when every reward the example episodes gave is the same.
pub fn reward_never_varies(value: f64, n: usize) -> String {
    format!(
        "all {n} rewards your example actions and finish actions gave were {value}: a reward that never depends on \
         the action gives the model nothing to learn from (a step whose four rewards are equal has no training \
         signal, and a run without one is never ranked)"
    )
}

/// `text` with every credential the arena holds replaced by `***`: what a participant's server
/// answered can hold the token the arena sent it (a server that echoes its request headers).
pub fn scrubbed(text: &str, secrets: &[&str]) -> String {
    secrets.iter().filter(|s| s.len() >= 8).fold(text.to_string(), |t, s| t.replace(s, "***"))
}

/// Every string in `value` scrubbed (keys too).
pub fn scrubbed_value(value: &Value, secrets: &[&str]) -> Value {
    match value {
        Value::String(s) => Value::String(scrubbed(s, secrets)),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrubbed_value(v, secrets)).collect()),
        Value::Object(map) => Value::Object(
            map.iter().map(|(k, v)| (scrubbed(k, secrets), scrubbed_value(v, secrets))).collect(),
        ),
        other => other.clone(),
    }
}

/// What to do next about a refusal, in the submitter's words.
pub fn fix_for(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::OpenenvEndpointInvalid => {
            "run `openenv validate --url http://localhost:8000` (or `python3 openenv_check.py`) against your \
             server and fix each failing check, then submit under a new submission_id"
        }
        ErrorCode::ImageSchemaMismatch => {
            "copy `action` and `observation` from your server's GET /schema into the submission's `schema` \
             exactly (the differences are listed), or rebuild the image, then submit under a new submission_id"
        }
        ErrorCode::AdmissionEpisodeFailed => {
            "play your example actions against your server (`python3 openenv_check.py submission.json --url …`): \
             they must end the episode with `done: true` and a reward between 0 and 1; the transcript shows what \
             it answered"
        }
        ErrorCode::FinishActionInvalid => {
            "make `finish_action` end the episode at any point (`done: true` with a reward between 0 and 1), \
             from a fresh reset and mid-episode; the transcript shows what your server answered. Leaving it out \
             is no way around this: without one, an episode the model stops or fills with invalid replies ends \
             with no reward and trains nothing"
        }
        ErrorCode::TaskNotListed => {
            "list the task under its task_id in your environment's task API, or submit the ids it lists"
        }
        ErrorCode::SandboxStartupFailed => {
            "nothing to do when the sandbox failed on our side (your slot is returned); if your server exited \
             at start (its last lines are quoted), make it start without network or credentials"
        }
        ErrorCode::AdmissionInfrastructureFailure => {
            "nothing to do: the arena could not check the task and your slot is returned; submit again later"
        }
        _ => "fix what the message says, then submit under a new submission_id",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_one_description_apart_is_named_where() {
        let submitted = json!({"action": {"type": "object", "properties": {"x": {"type": "string", "description": "the x"}}},
            "observation": {"type": "object"}});
        let mut served = submitted.clone();
        served["action"]["properties"]["x"]["description"] = json!("The x");
        served["state"] = json!({});
        let (d, more) = schema_differences(&served, &submitted);
        assert_eq!(more, 0);
        assert_eq!(
            d,
            [Difference {
                pointer: "/action/properties/x/description".into(),
                served: "\"The x\"".into(),
                submitted: "\"the x\"".into()
            }]
        );
        assert!(schema_message(&served, &submitted).unwrap().contains("`/action/properties/x/description`"));
        assert_eq!(schema_differences(&submitted, &submitted), (Vec::new(), 0));
        // A key on one side only; an integer and a float; a key with `/` in it.
        let (d, _) = schema_differences(
            &json!({"action": {"a/b": 1, "n": 1}, "observation": {}}),
            &json!({"action": {"n": 1.0}, "observation": {"extra": [1, 2]}}),
        );
        let pointers: Vec<&str> = d.iter().map(|d| d.pointer.as_str()).collect();
        assert_eq!(pointers, ["/action/a~1b", "/action/n", "/observation/extra"]);
        assert_eq!(d[0].submitted, ABSENT);
        // Many differences: eight listed, the rest counted; long values cut.
        let many: serde_json::Map<String, Value> =
            (0..20).map(|i| (format!("k{i:02}"), json!("x".repeat(300)))).collect();
        let (d, more) = schema_differences(
            &json!({"action": many, "observation": {}}),
            &json!({"action": {}, "observation": {}}),
        );
        assert_eq!((d.len(), more), (MAX_DIFFERENCES, 12));
        assert!(d[0].served.ends_with('…') && d[0].served.chars().count() == MAX_VALUE_CHARS + 1);
    }

    #[test]
    fn a_transcript_stays_within_its_bytes() {
        let big = json!({"text": "y".repeat(5_000)});
        let e = Exchange::new(&json!({"message": "hi"}), &big, Some(0.0), false);
        assert_eq!(e.observation.chars().count(), MAX_OBSERVATION_CHARS + 1);
        let t = transcript(&vec![e; 40]);
        assert!(t.to_string().len() <= MAX_EVIDENCE_BYTES + 64);
        assert_eq!(t["truncated"], true);
        let one = transcript(&[Exchange::new(&json!({}), &json!({"a": 1}), None, true)]);
        assert_eq!(one["truncated"], false);
    }

    #[test]
    fn identical_first_observations_everywhere_warn_every_task() {
        let f = |s: &str| fingerprint(&json!({"o": s}));
        let same = vec![("a".to_string(), vec![f("x"), f("x")]), ("b".to_string(), vec![f("x"), f("x")])];
        assert_eq!(ignored_task_ids(&same), ["a", "b"]);
        let differ = vec![("a".to_string(), vec![f("x"), f("x")]), ("b".to_string(), vec![f("y"), f("y")])];
        assert!(ignored_task_ids(&differ).is_empty());
        assert!(ignored_task_ids(&same[..1]).is_empty(), "one task: nothing to compare");
        let seeded = vec![("a".to_string(), vec![f("x"), f("z")]), ("b".to_string(), vec![f("x"), f("x")])];
        assert!(ignored_task_ids(&seeded).is_empty());
    }

    #[test]
    fn the_arenas_credentials_never_come_back() {
        let secrets = ["hf_sandbox_reader_token", "short"];
        let v =
            json!({"observation": "headers: Bearer hf_sandbox_reader_token", "hf_sandbox_reader_token": [1]});
        let s = scrubbed_value(&v, &secrets);
        assert!(!s.to_string().contains("hf_sandbox_reader_token"), "{s}");
        assert_eq!(
            scrubbed("a short word", &secrets),
            "a short word",
            "secrets under 8 characters are not ones"
        );
    }
}
