//! Who is calling: a Hugging Face account as HF's whoami (or OAuth userinfo) describes it.

use serde::{Deserialize, Serialize};

/// A membership as HF reports it: the organization and the caller's role in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgRole {
    pub org: String,
    /// `read`, `contributor`, `write` or `admin`; absent when HF does not say.
    pub role: Option<String>,
}

/// A Hugging Face account, as the arena learned it from HF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubAccount {
    /// HF's stable id for the account. Names can change hands; this cannot.
    pub id: String,
    pub name: String,
    pub fullname: String,
    pub orgs: Vec<OrgRole>,
    /// What the token itself may do (`auth.accessToken.role`: `read`, `write` or `fineGrained`),
    /// when HF said.
    #[serde(default)]
    pub token_role: Option<String>,
}

impl HubAccount {
    /// Editors are members of the editor organization with the write or admin role.
    pub fn is_editor(&self, editor_org: &str) -> bool {
        self.orgs.iter().any(|o| o.org == editor_org && matches!(o.role.as_deref(), Some("write" | "admin")))
    }
}

/// Why `reader` may not be the credential the arena sends to participants' sandboxes: it must
/// be a read token of an account whose one organization is the sandbox namespace, so that a
/// participant who receives it can read nothing but that namespace (which holds only sandboxes)
/// and write nothing. `protected` names the namespaces of the arena's datasets and jobs. `None`:
/// it may.
pub fn sandbox_reader_refusal(
    reader: &HubAccount,
    sandbox_namespace: &str,
    protected: &[&str],
) -> Option<String> {
    let who = &reader.name;
    match reader.token_role.as_deref() {
        Some("read") => {}
        Some("fineGrained") => {
            return Some(format!(
                "{who}'s token is fine-grained: the arena cannot tell what it may write; give it a read token"
            ))
        }
        Some(role) => {
            return Some(format!("{who}'s token is a {role} token, which can write; give it a read token"))
        }
        None => return Some(format!("HF did not say what {who}'s token may do; give it a read token")),
    }
    if protected.iter().any(|p| p == who) {
        return Some(format!("the token is {who}'s, the namespace of the arena's own datasets or jobs"));
    }
    if let Some(other) = reader.orgs.iter().find(|o| o.org != sandbox_namespace) {
        let also = if protected.contains(&other.org.as_str()) {
            ", which holds the arena's datasets or jobs"
        } else {
            ""
        };
        return Some(format!(
            "{who} is a member of {}{also}: a participant given the token could read its private repositories; use an account whose only organization is {sandbox_namespace}",
            other.org
        ));
    }
    if !reader.orgs.iter().any(|o| o.org == sandbox_namespace) {
        return Some(format!(
            "{who} is not a member of {sandbox_namespace}: HF would refuse it at every sandbox; add it with the read role"
        ));
    }
    None
}

/// Why the namespaces of participants' sandboxes (`sandbox`) and of held-out evaluation
/// (`eval`) are not apart enough: the sandbox namespace may hold none of the arena's datasets or
/// jobs (`protected`, which includes the private overlay's owner), and the evaluation namespace
/// is neither the sandbox namespace nor one of those. `None`: they are apart.
pub fn namespace_refusal(sandbox: &str, eval: Option<&str>, protected: &[&str]) -> Option<String> {
    if protected.contains(&sandbox) {
        return Some(format!(
            "ARENA_SANDBOX_NAMESPACE is {sandbox}, which holds the arena's datasets or jobs: sandboxes run in an \
             organization of their own"
        ));
    }
    match eval {
        Some(e) if e == sandbox => Some(format!(
            "ARENA_EVAL_NAMESPACE is {e}, the participants' sandbox namespace: held-out episodes would run where \
             every participant's reader reaches them"
        )),
        Some(e) if protected.contains(&e) => Some(format!(
            "ARENA_EVAL_NAMESPACE is {e}, which holds the arena's datasets or jobs: held-out sandboxes run in an \
             organization of their own"
        )),
        _ => None,
    }
}

/// Why HF could not say who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// HF answered that the credential is not valid.
    #[error("Hugging Face does not accept this token")]
    InvalidToken,
    /// HF was unreachable, slow, failing or rate-limiting: nothing can be decided now.
    #[error("Hugging Face is unavailable: {reason}")]
    Unavailable { reason: String, retry_after_s: Option<u64> },
    /// The arena would not ask HF now: too many tokens it has not seen, from this client or in all.
    #[error("too many unknown tokens: {reason}")]
    Throttled { reason: String, retry_after_s: u64 },
}

/// Whether `name` can be a Hugging Face username: 1 to 96 of `[A-Za-z0-9._-]`, starting with a
/// letter or digit.
pub fn is_hf_username(name: &str) -> bool {
    (1..=96).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The arena's own accounts, which are never callers: its bot (`HF_TOKEN`), the readers it gives
/// sandboxes, and any an organizer lists, by HF's account id; and any member of the namespaces
/// sandboxes run in (those organizations hold nothing but the arena's sandboxes, so only the
/// arena's accounts belong to them). A participant's server receives a reader by design: with it,
/// a participant must not be able to act as anyone, least of all hold a second daily slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAccounts {
    ids: std::collections::BTreeSet<String>,
    namespaces: Vec<String>,
}

impl ServiceAccounts {
    pub fn new(ids: impl IntoIterator<Item = String>, namespaces: impl IntoIterator<Item = String>) -> Self {
        ServiceAccounts {
            ids: ids.into_iter().filter(|i| !i.trim().is_empty()).map(|i| i.trim().to_string()).collect(),
            namespaces: namespaces.into_iter().filter(|n| !n.is_empty()).collect(),
        }
    }

    /// Adds an account found at start (the bot's, a reader's).
    pub fn add(&mut self, id: &str) {
        self.ids.insert(id.to_string());
    }

    /// Whether `account` is one of the arena's own.
    pub fn holds(&self, account: &HubAccount) -> bool {
        self.holds_id(&account.id) || account.orgs.iter().any(|o| self.namespaces.contains(&o.org))
    }

    /// Whether the account with HF id `id` is one of the arena's own (a session knows only its id
    /// and its editor role).
    pub fn holds_id(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Whether a session's account is one of the arena's own: by its id, or by an organization
    /// HF last named for it.
    pub fn holds_member(&self, id: &str, orgs: &[String]) -> bool {
        self.holds_id(id) || orgs.iter().any(|o| self.namespaces.contains(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(orgs: &[(&str, Option<&str>)]) -> HubAccount {
        HubAccount {
            id: "user-a".into(),
            name: "a".into(),
            fullname: "A".into(),
            orgs: orgs
                .iter()
                .map(|(o, r)| OrgRole { org: o.to_string(), role: r.map(String::from) })
                .collect(),
            token_role: Some("read".into()),
        }
    }

    #[test]
    fn held_out_sandboxes_run_apart_from_participants_and_the_arenas_data() {
        let protected = ["benchflow", "benchflow-private"];
        assert_eq!(namespace_refusal("arena-sandboxes", Some("arena-eval"), &protected), None);
        assert_eq!(namespace_refusal("arena-sandboxes", None, &protected), None);
        assert!(namespace_refusal("benchflow-private", Some("arena-eval"), &protected).is_some());
        assert!(namespace_refusal("arena-sandboxes", Some("arena-sandboxes"), &protected).is_some());
        assert!(namespace_refusal("arena-sandboxes", Some("benchflow"), &protected).is_some());
        // A reader that reads the evaluation namespace reaches held-out sandboxes: refused.
        let reader = account(&[("arena-sandboxes", Some("read")), ("arena-eval", Some("read"))]);
        assert!(sandbox_reader_refusal(&reader, "arena-sandboxes", &["arena-eval"]).is_some());
    }

    #[test]
    fn the_arenas_own_accounts_are_known_by_id_and_by_the_sandbox_namespaces() {
        let mut service = ServiceAccounts::new(
            ["listed-1".to_string(), " ".to_string()],
            ["arena-sandboxes".to_string(), "arena-eval".to_string(), String::new()],
        );
        service.add("bot-id");
        assert!(service.holds_id("listed-1") && service.holds_id("bot-id") && !service.holds_id("user-a"));
        assert!(!service.holds_id(" ") && !service.holds_id(""));
        assert!(!service.holds(&account(&[("benchflow", Some("write"))])));
        assert!(service.holds(&account(&[("arena-sandboxes", Some("read"))])));
        assert!(service.holds(&account(&[("other", None), ("arena-eval", Some("read"))])));
        assert!(service.holds(&HubAccount { id: "bot-id".into(), ..account(&[]) }));
        assert!(service.holds_member("bot-id", &[]));
        assert!(service.holds_member("user-a", &["other".into(), "arena-eval".into()]));
        assert!(!service.holds_member("user-a", &["other".into(), "benchflow".into()]));
    }

    #[test]
    fn editors_hold_write_or_admin_in_the_editor_org() {
        assert!(account(&[("benchflow", Some("write"))]).is_editor("benchflow"));
        assert!(account(&[("benchflow", Some("admin"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", Some("read"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", Some("contributor"))]).is_editor("benchflow"));
        assert!(!account(&[("benchflow", None)]).is_editor("benchflow"));
        assert!(!account(&[("other", Some("admin"))]).is_editor("benchflow"));
        assert!(!account(&[]).is_editor("benchflow"));
    }

    #[test]
    fn a_sandbox_reader_reads_the_sandbox_namespace_and_nothing_else() {
        let ok = account(&[("arena-sandboxes", Some("read"))]);
        let refusal = |a: &HubAccount| sandbox_reader_refusal(a, "arena-sandboxes", &["benchflow"]);
        assert_eq!(refusal(&ok), None);
        let mut write = ok.clone();
        write.token_role = Some("write".into());
        assert!(refusal(&write).unwrap().contains("write token"));
        let mut fine = ok.clone();
        fine.token_role = Some("fineGrained".into());
        assert!(refusal(&fine).unwrap().contains("fine-grained"));
        let mut unsaid = ok.clone();
        unsaid.token_role = None;
        assert!(refusal(&unsaid).is_some());
        let datasets = account(&[("arena-sandboxes", Some("read")), ("benchflow", Some("read"))]);
        assert!(refusal(&datasets).unwrap().contains("holds the arena's datasets"));
        let elsewhere = account(&[("arena-sandboxes", Some("read")), ("acme", Some("read"))]);
        assert!(refusal(&elsewhere).unwrap().contains("member of acme"));
        assert!(refusal(&account(&[])).unwrap().contains("not a member of arena-sandboxes"));
        let mut own = ok.clone();
        own.name = "benchflow".into();
        assert!(refusal(&own).unwrap().contains("the arena's own"));
    }
}
