//! `environment.json`: what a participant asks the arena to validate or submit. Every field is
//! checked before anything is fetched, so a request can only name a repository on the two hosts
//! the arena reads, never an arbitrary address.

use serde::{Deserialize, Serialize};

use super::listing::unsafe_path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum RepoType {
    Dataset,
    Github,
}

impl RepoType {
    pub fn as_str(self) -> &'static str {
        match self {
            RepoType::Dataset => "dataset",
            RepoType::Github => "github",
        }
    }
}

/// The request body, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentRequest {
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 2, max_length = 48, pattern = r"^[a-z0-9][a-z0-9-]+$")
    )]
    pub agent_id: Option<String>,
    /// An open challenge, or the track `environments`.
    pub challenge_id: String,
    #[cfg_attr(feature = "openapi", schema(pattern = r"^(dataset|github)$"))]
    pub repo_type: String,
    /// `owner/name`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}/[A-Za-z0-9_-][A-Za-z0-9._-]{0,95}$")
    )]
    pub repo_id: String,
    /// A branch, tag or commit (the schema names a safe subset of what is accepted).
    #[serde(default = "default_revision")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 255, pattern = r"^[A-Za-z0-9_][A-Za-z0-9_-]*([./][A-Za-z0-9_-]+)*$")
    )]
    pub revision: String,
    /// The collection's directory in the repository; empty for its root.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^([A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*)?$")
    )]
    pub entry_path: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    pub title: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 4000))]
    pub notes: String,
}

fn default_revision() -> String {
    "main".into()
}

/// A request whose fields have been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub repo_type: RepoType,
    pub owner: String,
    pub name: String,
    pub revision: String,
    /// Without leading or trailing `/`; empty for the repository root.
    pub entry_path: String,
}

impl Source {
    pub fn repo_id(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// Where a person can browse the collection at a commit.
    pub fn browse_url(&self, commit: &str) -> String {
        let tail = if self.entry_path.is_empty() { String::new() } else { format!("/{}", self.entry_path) };
        match self.repo_type {
            RepoType::Dataset => {
                format!("https://huggingface.co/datasets/{}/tree/{commit}{tail}", self.repo_id())
            }
            RepoType::Github => format!("https://github.com/{}/tree/{commit}{tail}", self.repo_id()),
        }
    }
}

pub const MAX_TITLE: usize = 200;
pub const MAX_NOTES: usize = 4_000;

/// A name part of `owner/name`: letters, digits, `-`, `_`, `.`; not `.` or `..`.
pub fn repo_part(s: &str) -> bool {
    (1..=96).contains(&s.len())
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A git revision: a branch, tag or commit; no spaces, control characters, `..`, or leading `-`.
pub fn valid_revision(s: &str) -> bool {
    (1..=255).contains(&s.len())
        && !s.starts_with(['-', '/'])
        && !s.ends_with('/')
        && !s.contains("..")
        && !s.contains("//")
        && s.chars().all(|c| !c.is_control() && !c.is_whitespace() && !"~^:?*[\\".contains(c))
}

pub fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl EnvironmentRequest {
    /// Checks every field; `Err` lists every problem at once.
    pub fn source(&self) -> Result<Source, Vec<String>> {
        let mut problems = Vec::new();
        let repo_type = match self.repo_type.as_str() {
            "dataset" => Some(RepoType::Dataset),
            "github" => Some(RepoType::Github),
            other => {
                problems.push(format!("`repo_type` is `{other}`; use `dataset` (recommended) or `github`"));
                None
            }
        };
        let parts: Vec<&str> = self.repo_id.split('/').collect();
        if parts.len() != 2 || !parts.iter().all(|p| repo_part(p)) {
            problems.push(format!(
                "`repo_id` `{}` is not `owner/name`",
                self.repo_id.chars().take(200).collect::<String>()
            ));
        }
        if !valid_revision(&self.revision) {
            problems
                .push("`revision` must be a branch, tag or commit (no spaces, `..` or leading `-`)".into());
        }
        let entry = self.entry_path.trim_matches('/');
        if !entry.is_empty() && unsafe_path(entry).is_some() {
            problems.push("`entry_path` must be a relative directory inside the repository (no `..`)".into());
        }
        if self.title.chars().count() > MAX_TITLE {
            problems.push(format!("`title` is longer than {MAX_TITLE} characters"));
        }
        if self.notes.chars().count() > MAX_NOTES {
            problems.push(format!("`notes` is longer than {MAX_NOTES} characters"));
        }
        match (repo_type, problems.is_empty()) {
            (Some(repo_type), true) => Ok(Source {
                repo_type,
                owner: parts[0].to_string(),
                name: parts[1].to_string(),
                revision: self.revision.clone(),
                entry_path: entry.to_string(),
            }),
            _ => Err(problems),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(repo_type: &str, repo_id: &str, revision: &str, entry: &str) -> EnvironmentRequest {
        EnvironmentRequest {
            agent_id: None,
            challenge_id: "openenv-9b".into(),
            repo_type: repo_type.into(),
            repo_id: repo_id.into(),
            revision: revision.into(),
            entry_path: entry.into(),
            title: "t".into(),
            notes: String::new(),
        }
    }

    #[test]
    fn accepts_the_guides_examples() {
        let s = req(
            "github",
            "benchflow-ai/posttrainarena",
            "bcbaffb58a19829d05fa483662c358e6ed5ba353",
            "submissions/team-dogfood/",
        )
        .source()
        .unwrap();
        assert_eq!(s.entry_path, "submissions/team-dogfood");
        assert!(s
            .browse_url("abc")
            .starts_with("https://github.com/benchflow-ai/posttrainarena/tree/abc/submissions"));
        assert_eq!(
            req("dataset", "YOUR_NAME/environment-pack", "main", "").source().unwrap().repo_id(),
            "YOUR_NAME/environment-pack"
        );
    }

    #[test]
    fn refuses_what_could_reach_elsewhere() {
        for (t, id, rev, entry) in [
            ("url", "a/b", "main", ""),
            ("dataset", "https://evil.example/x", "main", ""),
            ("dataset", "a/../b", "main", ""),
            ("dataset", "a/b/c", "main", ""),
            ("dataset", "a/b", "--upload-pack=x", ""),
            ("dataset", "a/b", "main..x", ""),
            ("dataset", "a/b", "ma in", ""),
            ("github", "a/b", "main", "../etc"),
        ] {
            assert!(req(t, id, rev, entry).source().is_err(), "{t} {id} {rev} {entry}");
        }
        let all = req("url", "x", "", "..").source().unwrap_err();
        assert_eq!(all.len(), 4);
    }
}
