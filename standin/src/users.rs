//! The stand-in's users, tokens and organization roles, from the JSON file `ARENA_HUB_USERS`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HubUser {
    /// HF's stable account id; `user-{name}` when the file gives none.
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    pub token: String,
    pub fullname: String,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub orgs: Vec<OrgMembership>,
    /// What the user's token may do, as whoami says it (`read`, `write`, `fineGrained`): a
    /// `read` token reads what the user may read and writes nothing. `write` when not given.
    #[serde(default)]
    pub token_role: Option<String>,
}

impl HubUser {
    pub fn id(&self) -> String {
        self.id.clone().unwrap_or_else(|| format!("user-{}", self.name))
    }

    /// Whether the user may read the private repositories of a namespace: their own, or an
    /// organization they belong to.
    pub fn may_read(&self, namespace: &str) -> bool {
        self.name == namespace || self.orgs.iter().any(|o| o.name == namespace)
    }

    /// Whether the user may write in a namespace (and launch jobs there): their own, or an
    /// organization where they have the write or admin role.
    pub fn may_write(&self, namespace: &str) -> bool {
        self.role() != "read"
            && (self.name == namespace
                || self
                    .orgs
                    .iter()
                    .any(|o| o.name == namespace && matches!(o.role.as_str(), "write" | "admin")))
    }

    /// The token's role whoami answers.
    pub fn role(&self) -> &str {
        self.token_role.as_deref().unwrap_or("write")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrgMembership {
    pub name: String,
    /// `read`, `contributor`, `write` or `admin`.
    pub role: String,
}

pub fn parse(json: &str) -> anyhow::Result<Vec<HubUser>> {
    let users: Vec<HubUser> = serde_json::from_str(json)?;
    for (i, u) in users.iter().enumerate() {
        anyhow::ensure!(!u.name.is_empty() && !u.token.is_empty(), "user {i} needs a name and a token");
        anyhow::ensure!(
            users.iter().filter(|o| o.token == u.token).count() == 1,
            "user {} shares its token with another user",
            u.name
        );
    }
    Ok(users)
}

/// The organization participants' sandboxes run in: it holds nothing else.
pub const SANDBOX_ORG: &str = "benchflow-sandboxes";
/// The organization held-out evaluation episodes run in, apart from participants' sandboxes.
pub const EVAL_ORG: &str = "benchflow-eval";

/// A small demo set: two participants, one editor of `benchflow`, the arena's own account (it
/// launches jobs and writes the runs dataset in `benchflow`, and starts sandboxes in
/// [`SANDBOX_ORG`] and [`EVAL_ORG`]), the sandbox reader (a read token whose only organization is
/// [`SANDBOX_ORG`]) and the evaluation reader (the same for [`EVAL_ORG`]). The tokens are
/// local-only.
pub fn demo() -> Vec<HubUser> {
    let user = |name: &str, fullname: &str, orgs: Vec<OrgMembership>| HubUser {
        id: None,
        name: name.into(),
        token: format!("hf_local_demo_{name}_token"),
        fullname: fullname.into(),
        email: None,
        orgs,
        token_role: None,
    };
    vec![
        user("alice", "Alice (local demo)", vec![]),
        user("bob", "Bob (local demo)", vec![]),
        user(
            "eve-editor",
            "Eve, BenchFlow editor (local demo)",
            vec![OrgMembership { name: "benchflow".into(), role: "write".into() }],
        ),
        user(
            "arena",
            "The arena's own account (local demo)",
            vec![
                OrgMembership { name: "benchflow".into(), role: "write".into() },
                OrgMembership { name: SANDBOX_ORG.into(), role: "write".into() },
                OrgMembership { name: EVAL_ORG.into(), role: "write".into() },
            ],
        ),
        HubUser {
            token_role: Some("read".into()),
            ..user(
                "arena-sandbox",
                "The arena's sandbox reader: a read token, only in the sandbox organization (local demo)",
                vec![OrgMembership { name: SANDBOX_ORG.into(), role: "read".into() }],
            )
        },
        HubUser {
            token_role: Some("read".into()),
            ..user(
                "arena-eval",
                "The cluster's held-out evaluation reader: a read token, only in the evaluation organization (local demo)",
                vec![OrgMembership { name: EVAL_ORG.into(), role: "read".into() }],
            )
        },
    ]
}
