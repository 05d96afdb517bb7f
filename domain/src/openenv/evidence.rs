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

/// The most a stored refusal's message may be (characters), and its evidence (bytes of JSON):
/// what a participant's server answered is kept and shown in this bounded form.
pub const MAX_MESSAGE_CHARS: usize = 2048;
pub const MAX_STORED_EVIDENCE_BYTES: usize = 32 << 10;

/// A list a server sent, quoted in a sentence: its first items (each cut) within a bound, and
/// how many more were left out ("/a, /b and 17990 more paths").
pub fn listed(items: &[&str], noun: &str) -> String {
    const MAX_ITEMS: usize = 20;
    const MAX_ITEM_CHARS: usize = 120;
    const MAX_CHARS: usize = 1000;
    let mut shown: Vec<String> = Vec::new();
    let mut chars = 0;
    for item in items.iter().take(MAX_ITEMS) {
        let item = cut(item, MAX_ITEM_CHARS);
        chars += item.chars().count() + 2;
        if chars > MAX_CHARS {
            break;
        }
        shown.push(item);
    }
    let more = items.len() - shown.len();
    match more {
        0 => shown.join(", "),
        n => format!("{} and {n} more {noun}", shown.join(", ")),
    }
}

/// `value` within `max_bytes` of JSON: as it is when it fits; else its strings cut and its lists
/// shortened, less and less, until it fits, with `left_out` saying what was (an object's key; a
/// value that is no object is replaced by one that says so).
pub fn bounded(value: &Value, max_bytes: usize) -> Value {
    let size = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    if size(value) <= max_bytes {
        return value.clone();
    }
    for (chars, items) in [(2048, 64), (512, 32), (160, 16), (64, 8), (24, 4)] {
        let (mut strings, mut dropped) = (0usize, 0usize);
        let mut v = shrink(value, chars, items, &mut strings, &mut dropped);
        let note = format!("{strings} string(s) were cut and {dropped} list item(s) left out to keep it within {max_bytes} bytes");
        if let Value::Object(map) = &mut v {
            map.insert("left_out".into(), Value::String(note));
        }
        if v.is_object() && size(&v) <= max_bytes {
            return v;
        }
    }
    json!({"left_out": format!("the evidence was over {max_bytes} bytes and was not kept")})
}

fn shrink(v: &Value, chars: usize, items: usize, strings: &mut usize, dropped: &mut usize) -> Value {
    match v {
        Value::String(s) if s.chars().count() > chars => {
            *strings += 1;
            Value::String(cut(s, chars))
        }
        Value::Array(list) => {
            *dropped += list.len().saturating_sub(items);
            Value::Array(list.iter().take(items).map(|x| shrink(x, chars, items, strings, dropped)).collect())
        }
        Value::Object(map) => {
            *dropped += map.len().saturating_sub(items);
            Value::Object(
                map.iter()
                    .take(items)
                    .map(|(k, x)| {
                        let key = if k.chars().count() > chars {
                            *strings += 1;
                            cut(k, chars)
                        } else {
                            k.clone()
                        };
                        (key, shrink(x, chars, items, strings, dropped))
                    })
                    .collect(),
            )
        }
        other => other.clone(),
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
/// answered can hold the token the arena sent it (a server that echoes its request headers), and
/// not only as sent: cut in pieces, reversed, in base64 (as in a `Basic` header), URL-encoded or
/// in hex. Any run of [`MASKED_RUN`] or more characters of a credential in any of those forms is
/// masked; a secret shorter than that is none.
pub fn scrubbed(text: &str, secrets: &[&str]) -> String {
    Windows::of(secrets).scrub(text)
}

/// Every run of MASKED_RUN characters of every form of the credentials: a text's windows are
/// looked up in it, so masking costs one pass over the text whatever the number of forms.
struct Windows(std::collections::HashSet<Vec<u8>>);

impl Windows {
    fn of(secrets: &[&str]) -> Windows {
        let forms = secret_forms(secrets);
        Windows(forms.iter().flat_map(|f| f.as_bytes().windows(MASKED_RUN).map(<[u8]>::to_vec)).collect())
    }

    fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() || text.len() < MASKED_RUN {
            return text.to_string();
        }
        apply_marks(text, &self.marks(text))
    }

    /// Which bytes of `text` belong to a run of MASKED_RUN or more characters of a form.
    fn marks(&self, text: &str) -> Vec<bool> {
        let mut marked = vec![false; text.len()];
        if self.0.is_empty() {
            return marked;
        }
        for (at, window) in text.as_bytes().windows(MASKED_RUN).enumerate() {
            if self.0.contains(window) {
                marked[at..at + MASKED_RUN].iter_mut().for_each(|m| *m = true);
            }
        }
        marked
    }
}

/// `lines` scrubbed as one text: a credential a server printed over two lines is masked in both.
pub fn scrubbed_lines(lines: &[&str], secrets: &[&str]) -> Vec<String> {
    let windows = Windows::of(secrets);
    let joined: String = lines.concat();
    let marked = windows.marks(&joined);
    let mut at = 0;
    lines
        .iter()
        .map(|l| {
            let out = apply_marks(l, &marked[at..at + l.len()]);
            at += l.len();
            out
        })
        .collect()
}

/// The shortest run of a credential's characters that is masked.
pub const MASKED_RUN: usize = 8;

/// Each credential as sent, reversed, in hex, URL-encoded, and in base64 (standard and URL-safe)
/// at each of the three alignments it can take inside a longer encoded text (the characters its
/// neighbours share left out).
fn secret_forms(secrets: &[&str]) -> Vec<String> {
    use base64::Engine;
    let mut forms = Vec::new();
    for s in secrets.iter().filter(|s| s.len() >= MASKED_RUN) {
        forms.push(s.to_string());
        forms.push(s.chars().rev().collect());
        forms.push(hex::encode(s));
        forms.push(hex::encode_upper(s));
        let encoded: String = s
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        forms.push(encoded);
        for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE]
        {
            for pad in 0..3usize {
                let mut bytes = vec![0u8; pad];
                bytes.extend_from_slice(s.as_bytes());
                let text = engine.encode(&bytes);
                // The characters that hold a pad byte or the last partial group are the
                // neighbours' as much as the secret's.
                let skip = (pad * 4).div_ceil(3);
                let keep = (bytes.len() / 3) * 4;
                if keep > skip {
                    forms.push(text[skip..keep].to_string());
                }
            }
        }
    }
    forms.retain(|f| f.len() >= MASKED_RUN);
    forms.sort();
    forms.dedup();
    forms
}

/// `text` with each marked run replaced by `***`.
fn apply_marks(text: &str, marked: &[bool]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for (i, c) in text.char_indices() {
        if marked[i] {
            if !in_run {
                out.push_str("***");
            }
            in_run = true;
        } else {
            in_run = false;
            out.push(c);
        }
    }
    out
}

/// `text` with its C0 and C1 control characters (other than newline and tab) and DEL escaped as
/// `\u{1b}`: what a server sent is stored and served so, never raw to a terminal or a page.
pub fn printable(text: &str) -> String {
    if !text.chars().any(is_shown_escaped) {
        return text.to_string();
    }
    text.chars()
        .map(|c| if is_shown_escaped(c) { c.escape_unicode().to_string() } else { c.to_string() })
        .collect()
}

fn is_shown_escaped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// Every string in `value` scrubbed and made printable (keys too); the credentials' forms are
/// worked out once.
pub fn scrubbed_value(value: &Value, secrets: &[&str]) -> Value {
    scrub_value(value, &Windows::of(secrets))
}

fn scrub_value(value: &Value, windows: &Windows) -> Value {
    match value {
        Value::String(s) => Value::String(printable(&windows.scrub(s))),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrub_value(v, windows)).collect()),
        Value::Object(map) => Value::Object(
            map.iter().map(|(k, v)| (printable(&windows.scrub(k)), scrub_value(v, windows))).collect(),
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

    #[test]
    fn what_a_server_sent_is_kept_within_bounds_and_says_what_was_left_out() {
        let paths: Vec<String> = (0..18_000).map(|i| format!("/{}/{i}", "p".repeat(40))).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let said = listed(&refs, "paths");
        assert!(said.chars().count() <= 1100 && said.ends_with(" more paths"), "{said}");
        assert!(
            said.contains(&format!("and {} more paths", 18_000 - said.matches(", ").count() - 1)),
            "{said}"
        );
        assert_eq!(listed(&["/a", "/b"], "paths"), "/a, /b");
        let huge = json!({"differences": (0..3).map(|i| json!({"pointer": format!("/{i}{}", "k".repeat(300_000)),
            "served": "x", "submitted": "y"})).collect::<Vec<_>>(), "more": 0});
        let kept = bounded(&huge, MAX_STORED_EVIDENCE_BYTES);
        let bytes = serde_json::to_vec(&kept).unwrap().len();
        assert!(bytes <= MAX_STORED_EVIDENCE_BYTES, "{bytes}");
        assert_eq!(kept["differences"].as_array().unwrap().len(), 3, "the items kept, their strings cut");
        assert!(kept["left_out"].as_str().unwrap().contains("3 string(s) were cut"), "{}", kept["left_out"]);
        let small = json!({"transcript": [1, 2]});
        assert_eq!(bounded(&small, MAX_STORED_EVIDENCE_BYTES), small, "what fits is kept as it is");
        assert!(bounded(&json!("x".repeat(100_000)), 1024)["left_out"].is_string());
    }

    #[test]
    fn a_credential_is_masked_in_any_form_a_server_can_echo_it() {
        use base64::Engine;
        let token = "hf_sandbox_reader_token_5a5a";
        let b64 = base64::engine::general_purpose::STANDARD;
        let forms = [
            format!("split: {} | {}", &token[..12], &token[12..]),
            format!("reversed: {}", token.chars().rev().collect::<String>()),
            format!("basic: Basic {}", b64.encode(format!("user:{token}"))),
            format!("b64: {}", b64.encode(token)),
            format!("shifted: {}", b64.encode(format!("x{token}"))),
            format!("url-safe: {}", base64::engine::general_purpose::URL_SAFE.encode(format!("ab{token}"))),
            format!("hex: {}", hex::encode(token)),
            format!("HEX: {}", hex::encode_upper(token)),
            format!("inside: Bearer{token}!"),
        ];
        for text in &forms {
            let s = scrubbed(text, &[token]);
            assert!(s.contains("***"), "{text} -> {s}");
            for start in 0..=token.len() - MASKED_RUN {
                assert!(!s.contains(&token[start..start + MASKED_RUN]), "{text} -> {s}");
            }
        }
        // A credential printed over two lines of a log is masked in both.
        let lines = scrubbed_lines(&["starting with hf_sandbox_r", "eader_token_5a5a and more"], &[token]);
        assert!(lines.iter().all(|l| !l.contains("hf_sandbox") && !l.contains("token_5a5a")), "{lines:?}");
        assert_eq!(lines[0], "starting with ***");
        // What a server sent is stored printable: no raw escape reaches a terminal or a page.
        let v = scrubbed_value(
            &json!({"observation": "\u{1b}]0;pwned\u{7}\u{1b}[2J", "ok": "a\nb\tc"}),
            &[token],
        );
        assert_eq!(v["observation"], "\\u{1b}]0;pwned\\u{7}\\u{1b}[2J");
        assert_eq!(v["ok"], "a\nb\tc");
        // Text that merely shares short pieces with it is left alone.
        assert_eq!(scrubbed("a token for the reader", &[token]), "a token for the reader");
    }
}
