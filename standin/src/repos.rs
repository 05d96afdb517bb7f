//! Local git repositories served as HF datasets and GitHub repositories: `{root}/datasets/{owner}/{name}`
//! and `{root}/github/{owner}/{repo}`, each a work tree or a bare repository. Branches, tags and commits
//! are the revisions. Everything is read through the `git` CLI, one bounded process per call.
//!
//! Names, paths and revisions are parsed before they reach the filesystem or git: a value of these
//! types is safe to use.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::process::Command;
use tokio::sync::OnceCell;

/// The `.gitattributes` of a new repository (HF's sends large binary files to LFS; the stand-in
/// commits everything inline, so this only keeps the first commit's shape).
/// What the Hub puts in a new dataset's first commit: binary formats, archives, images, audio
/// and video go to LFS (not `*.sqlite`, `*.db` or `*.xlsx`).
pub const GITATTRIBUTES: &str = concat!(
    "*.7z filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n",
    "*.bin filter=lfs diff=lfs merge=lfs -text\n*.bz2 filter=lfs diff=lfs merge=lfs -text\n",
    "*.ckpt filter=lfs diff=lfs merge=lfs -text\n*.ftz filter=lfs diff=lfs merge=lfs -text\n",
    "*.gz filter=lfs diff=lfs merge=lfs -text\n*.h5 filter=lfs diff=lfs merge=lfs -text\n",
    "*.joblib filter=lfs diff=lfs merge=lfs -text\n*.lfs.* filter=lfs diff=lfs merge=lfs -text\n",
    "*.lz4 filter=lfs diff=lfs merge=lfs -text\n*.mds filter=lfs diff=lfs merge=lfs -text\n",
    "*.mlmodel filter=lfs diff=lfs merge=lfs -text\n*.model filter=lfs diff=lfs merge=lfs -text\n",
    "*.msgpack filter=lfs diff=lfs merge=lfs -text\n*.npy filter=lfs diff=lfs merge=lfs -text\n",
    "*.npz filter=lfs diff=lfs merge=lfs -text\n*.onnx filter=lfs diff=lfs merge=lfs -text\n",
    "*.ot filter=lfs diff=lfs merge=lfs -text\n*.parquet filter=lfs diff=lfs merge=lfs -text\n",
    "*.pb filter=lfs diff=lfs merge=lfs -text\n*.pickle filter=lfs diff=lfs merge=lfs -text\n",
    "*.pkl filter=lfs diff=lfs merge=lfs -text\n*.pt filter=lfs diff=lfs merge=lfs -text\n",
    "*.pth filter=lfs diff=lfs merge=lfs -text\n*.rar filter=lfs diff=lfs merge=lfs -text\n",
    "*.safetensors filter=lfs diff=lfs merge=lfs -text\nsaved_model/**/* filter=lfs diff=lfs merge=lfs -text\n",
    "*.tar.* filter=lfs diff=lfs merge=lfs -text\n*.tar filter=lfs diff=lfs merge=lfs -text\n",
    "*.tflite filter=lfs diff=lfs merge=lfs -text\n*.tgz filter=lfs diff=lfs merge=lfs -text\n",
    "*.wasm filter=lfs diff=lfs merge=lfs -text\n*.xz filter=lfs diff=lfs merge=lfs -text\n",
    "*.zip filter=lfs diff=lfs merge=lfs -text\n*.zst filter=lfs diff=lfs merge=lfs -text\n",
    "*tfevents* filter=lfs diff=lfs merge=lfs -text\n",
    "# Audio files - uncompressed\n*.pcm filter=lfs diff=lfs merge=lfs -text\n*.sam filter=lfs diff=lfs merge=lfs -text\n",
    "*.raw filter=lfs diff=lfs merge=lfs -text\n",
    "# Audio files - compressed\n*.aac filter=lfs diff=lfs merge=lfs -text\n*.flac filter=lfs diff=lfs merge=lfs -text\n",
    "*.mp3 filter=lfs diff=lfs merge=lfs -text\n*.ogg filter=lfs diff=lfs merge=lfs -text\n",
    "*.wav filter=lfs diff=lfs merge=lfs -text\n",
    "# Image files - uncompressed\n*.bmp filter=lfs diff=lfs merge=lfs -text\n*.gif filter=lfs diff=lfs merge=lfs -text\n",
    "*.png filter=lfs diff=lfs merge=lfs -text\n*.tiff filter=lfs diff=lfs merge=lfs -text\n",
    "# Image files - compressed\n*.jpg filter=lfs diff=lfs merge=lfs -text\n*.jpeg filter=lfs diff=lfs merge=lfs -text\n",
    "*.webp filter=lfs diff=lfs merge=lfs -text\n",
    "# Video files - compressed\n*.mp4 filter=lfs diff=lfs merge=lfs -text\n*.webm filter=lfs diff=lfs merge=lfs -text\n",
);

/// No git call may take longer than this; the process is killed when it does.
// Long enough for a loaded machine (a fresh one builds and tests side by side): a timeout is a
// 500, which fails the run that committed.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Cached trees beyond this many are dropped all at once (the stand-in serves few repositories).
const MAX_CACHED_TREES: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("could not run git: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("git {0} took longer than {GIT_TIMEOUT:?}")]
    Timeout(String),
    #[error("git {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
    #[error("unexpected output from git {0}")]
    Parse(String),
}

/// Where a repository lives under the root.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Dataset,
    Github,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Dataset => "datasets",
            Kind::Github => "github",
        }
    }
}

/// `owner/name`, each `[A-Za-z0-9._-]+` and neither `.` nor `..`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoName {
    owner: String,
    name: String,
}

impl RepoName {
    pub fn parse(owner: &str, name: &str) -> Option<Self> {
        fn ok(s: &str) -> bool {
            !s.is_empty()
                && s.len() <= 96
                && s != "."
                && s != ".."
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        }
        (ok(owner) && ok(name)).then(|| RepoName { owner: owner.into(), name: name.into() })
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn id(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

/// A relative path inside a repository: `/`-separated components, none empty, `.`, `..` or holding NUL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoPath(String);

impl RepoPath {
    pub fn parse(path: &str) -> Option<Self> {
        let ok = !path.is_empty()
            && path.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        ok.then(|| RepoPath(path.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A branch, tag or commit id as a client names it. Git's revision syntax beyond names (`~`, `^`,
/// `:`, `@{..}`) is refused, and so is anything git could read as an option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rev(String);

impl Rev {
    pub fn parse(rev: &str) -> Option<Self> {
        let ok = !rev.is_empty()
            && rev.len() <= 255
            && !rev.starts_with(['-', '/', '.'])
            && !rev.ends_with(['/', '.'])
            && !rev.contains("..")
            && !rev.contains("//")
            && rev.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/+-".contains(&b));
        ok.then(|| Rev(rev.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn is_full_sha(&self) -> bool {
        self.0.len() == 40 && self.0.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

/// Set per repository with `git config standin.visibility private|gated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Public,
    Private,
    Gated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Blob,
    Tree,
    /// A submodule.
    Commit,
}

#[derive(Debug, Clone)]
pub struct Entry {
    /// Git's mode as `ls-tree` prints it: `100644`, `100755`, `120000`, `040000`, `160000`.
    pub mode: String,
    pub kind: ObjectKind,
    pub oid: String,
    /// Blobs only.
    pub size: Option<u64>,
    pub path: String,
    /// A git-lfs pointer's object (SHA-256, size): the file the Hub keeps in LFS.
    pub lfs: Option<(String, u64)>,
}

/// Every entry of a tree, recursively, in git's order (a directory before its contents).
#[derive(Debug, Default)]
pub struct Tree {
    pub entries: Vec<Entry>,
    by_path: HashMap<String, usize>,
}

impl Tree {
    fn parse(out: &[u8]) -> Result<Tree, GitError> {
        let bad = || GitError::Parse("ls-tree".into());
        let mut entries = Vec::new();
        for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let tab = record.iter().position(|&b| b == b'\t').ok_or_else(bad)?;
            let meta = std::str::from_utf8(&record[..tab]).map_err(|_| bad())?;
            // Git allows any bytes in names; a path that is not UTF-8 cannot be named in a URL here.
            let Ok(path) = std::str::from_utf8(&record[tab + 1..]) else { continue };
            let mut fields = meta.split_whitespace();
            let (Some(mode), Some(kind), Some(oid), Some(size)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(bad());
            };
            let kind = match kind {
                "blob" => ObjectKind::Blob,
                "tree" => ObjectKind::Tree,
                "commit" => ObjectKind::Commit,
                _ => return Err(bad()),
            };
            entries.push(Entry {
                mode: mode.into(),
                kind,
                oid: oid.into(),
                size: size.parse().ok(),
                path: path.into(),
                lfs: None,
            });
        }
        let by_path = entries.iter().enumerate().map(|(i, e)| (e.path.clone(), i)).collect();
        Ok(Tree { entries, by_path })
    }

    pub fn get(&self, path: &RepoPath) -> Option<&Entry> {
        self.by_path.get(path.as_str()).map(|&i| &self.entries[i])
    }

    /// The entries under `dir` (the root when `None`): its direct children, or all descendants.
    pub fn under<'a>(&'a self, dir: Option<&RepoPath>, recursive: bool) -> impl Iterator<Item = &'a Entry> {
        let prefix = dir.map(|d| format!("{}/", d.as_str())).unwrap_or_default();
        self.entries.iter().filter(move |e| match e.path.strip_prefix(prefix.as_str()) {
            Some(rest) => recursive || !rest.contains('/'),
            None => false,
        })
    }
}

/// What the stand-in needs of a commit.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub sha: String,
    pub tree: String,
    pub parents: Vec<String>,
    pub author: Signature,
    pub committer: Signature,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Signature {
    pub name: String,
    pub email: String,
    /// UTC, `2026-01-01T00:00:00Z`.
    pub date: String,
}

type TreeCell = Arc<OnceCell<Arc<Tree>>>;

pub struct Repos {
    root: PathBuf,
    /// Trees by (git dir, commit or tree id): immutable, so cached without expiry.
    trees: Mutex<HashMap<(PathBuf, String), TreeCell>>,
    /// Full commit ids already verified in a repository, so fetching by commit id skips `rev-parse`.
    commits: Mutex<HashSet<(PathBuf, String)>>,
    /// Visibility by git dir, valid while the config file's modification time and length stay the same.
    visibility: Mutex<HashMap<PathBuf, (SystemTime, u64, Visibility)>>,
    /// Commits to one repository happen one at a time.
    writing: tokio::sync::Mutex<()>,
}

impl Repos {
    pub fn new(root: PathBuf) -> Self {
        Repos {
            root,
            trees: Mutex::default(),
            commits: Mutex::default(),
            visibility: Mutex::default(),
            writing: tokio::sync::Mutex::new(()),
        }
    }

    /// Creates a bare repository with a `main` branch; `false` when one exists already.
    pub async fn create(&self, kind: Kind, name: &RepoName, private: bool) -> Result<bool, GitError> {
        let _one = self.writing.lock().await;
        if self.open(kind, name).await?.is_some() {
            return Ok(false);
        }
        let dir = self.root.join(kind.dir()).join(&name.owner).join(&name.name);
        std::fs::create_dir_all(&dir)?;
        let repo = Repo { repos: self, git_dir: dir, visibility: Visibility::Public };
        repo.git_ok(&["init", "--quiet", "--bare", "--initial-branch=main"]).await?;
        if private {
            repo.git_ok(&["config", "--local", "standin.visibility", "private"]).await?;
        }
        // HF makes a repository with a first commit holding `.gitattributes`: `main` always exists.
        drop(_one);
        let attributes = RepoPath::parse(".gitattributes").expect("a plain path");
        repo.write_on(None, "initial commit", &[(attributes, Some(GITATTRIBUTES.as_bytes().to_vec()))])
            .await?;
        Ok(true)
    }

    /// Makes a repository from a folder's files unless one exists, committed by a fixed author at
    /// a fixed date, so that its commit id is the same on every machine; answers that commit.
    pub fn seed(
        &self,
        kind: Kind,
        name: &RepoName,
        src: &std::path::Path,
        message: &str,
    ) -> anyhow::Result<String> {
        let dir = self.root.join(kind.dir()).join(&name.owner).join(&name.name);
        let git = |args: &[&str]| -> anyhow::Result<String> {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args([
                    "-c",
                    "user.name=arena-demo",
                    "-c",
                    "user.email=demo@localhost",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
                .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
                .output()?;
            anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        if !dir.join(".git").is_dir() {
            let partial = dir.with_extension("partial");
            let _ = std::fs::remove_dir_all(&partial);
            copy_files(src, &partial)?;
            std::fs::create_dir_all(dir.parent().expect("a repository has an owner folder"))?;
            std::fs::rename(&partial, &dir)?;
            git(&["init", "-q", "-b", "main"])?;
            git(&["add", "-A"])?;
            git(&["commit", "-q", "-m", message])?;
        }
        git(&["rev-parse", "HEAD"])
    }

    /// The repository, if one exists under that name.
    pub async fn open(&self, kind: Kind, name: &RepoName) -> Result<Option<Repo<'_>>, GitError> {
        let dir = self.root.join(kind.dir()).join(&name.owner).join(&name.name);
        // An explicit git dir keeps git from walking up into an enclosing repository.
        let git_dir = if dir.join(".git").exists() {
            dir.join(".git")
        } else if dir.join("HEAD").is_file() && dir.join("objects").is_dir() {
            dir
        } else {
            return Ok(None);
        };
        let mut repo = Repo { repos: self, git_dir, visibility: Visibility::Public };
        repo.visibility = repo.read_visibility().await?;
        Ok(Some(repo))
    }
}

/// Copies a folder's files (their bytes and permissions), skipping caches.
fn copy_files(src: &std::path::Path, dest: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "__pycache__" || name == ".pytest_cache" {
            continue;
        }
        let to = dest.join(&name);
        if entry.file_type()?.is_dir() {
            copy_files(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}

pub struct Repo<'a> {
    repos: &'a Repos,
    git_dir: PathBuf,
    pub visibility: Visibility,
}

impl Repo<'_> {
    async fn git(&self, args: &[&str]) -> Result<Output, GitError> {
        let mut git_dir = OsString::from("--git-dir=");
        git_dir.push(&self.git_dir);
        let mut cmd = Command::new("git");
        cmd.args(["-c", "safe.directory=*"])
            .arg(git_dir)
            .args(args)
            .env("TZ", "UTC")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn()?;
        match tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output()).await {
            Ok(out) => Ok(out?),
            Err(_) => Err(GitError::Timeout(args.join(" "))),
        }
    }

    /// Commits `files` on top of `main` (a new branch when the repository is empty) in one
    /// `git fast-import`, when `main` is still at `expected` (HF's `parentCommit`, when given);
    /// answers the new commit, or `None` when `main` moved on.
    pub async fn write_on(
        &self,
        expected: Option<&str>,
        summary: &str,
        files: &[(RepoPath, Option<Vec<u8>>)],
    ) -> Result<Option<String>, GitError> {
        let _one = self.repos.writing.lock().await;
        let parent = self.rev_parse("refs/heads/main^{commit}").await?;
        if expected.is_some_and(|e| parent.as_deref() != Some(e)) {
            return Ok(None);
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut stream = Vec::new();
        stream.extend(
            format!("commit refs/heads/main\ncommitter Arena stand-in <standin@localhost> {now} +0000\n")
                .bytes(),
        );
        stream.extend(format!("data {}\n{summary}\n", summary.len()).bytes());
        if let Some(parent) = &parent {
            stream.extend(format!("from {parent}\n").bytes());
        }
        for (path, bytes) in files {
            let Some(bytes) = bytes else {
                stream.extend(format!("D {}\n", path.as_str()).bytes());
                continue;
            };
            stream.extend(format!("M 100644 inline {}\ndata {}\n", path.as_str(), bytes.len()).bytes());
            stream.extend(bytes);
            stream.push(b'\n');
        }
        stream.extend(b"done\n");
        let out = self.git_input(&["fast-import", "--quiet", "--done"], stream).await?;
        if !out.status.success() {
            return Err(GitError::Failed {
                args: "fast-import".into(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        self.rev_parse("refs/heads/main^{commit}")
            .await?
            .ok_or_else(|| GitError::Parse("fast-import".into()))
            .map(Some)
    }

    async fn git_input(&self, args: &[&str], input: Vec<u8>) -> Result<Output, GitError> {
        use tokio::io::AsyncWriteExt;
        let mut git_dir = OsString::from("--git-dir=");
        git_dir.push(&self.git_dir);
        let mut child = Command::new("git")
            .args(["-c", "safe.directory=*"])
            .arg(git_dir)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let feed = async move {
            stdin.write_all(&input).await?;
            stdin.shutdown().await
        };
        let run = async {
            let (fed, out) = tokio::join!(feed, child.wait_with_output());
            fed?;
            out
        };
        match tokio::time::timeout(GIT_TIMEOUT, run).await {
            Ok(out) => Ok(out?),
            Err(_) => Err(GitError::Timeout(args.join(" "))),
        }
    }

    async fn git_ok(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = self.git(args).await?;
        if !out.status.success() {
            return Err(GitError::Failed {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// Makes the repository private or public (a gated one stays gated when made private).
    pub async fn set_private(&self, private: bool) -> Result<(), GitError> {
        if private {
            self.git_ok(&["config", "--local", "standin.visibility", "private"]).await?;
        } else {
            // Unsetting a value that is not set exits 5: public either way.
            let _ = self.git(&["config", "--local", "--unset", "standin.visibility"]).await?;
        }
        Ok(())
    }

    async fn read_visibility(&self) -> Result<Visibility, GitError> {
        let stamp = std::fs::metadata(self.git_dir.join("config"))
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        if let Some((mtime, len)) = stamp {
            let cache = self.repos.visibility.lock().unwrap();
            if let Some(&(m, l, v)) = cache.get(&self.git_dir) {
                if m == mtime && l == len {
                    return Ok(v);
                }
            }
        }
        let out = self.git(&["config", "--local", "--get", "standin.visibility"]).await?;
        let visibility = match String::from_utf8_lossy(&out.stdout).trim() {
            "private" => Visibility::Private,
            "gated" => Visibility::Gated,
            _ => Visibility::Public,
        };
        if let Some((mtime, len)) = stamp {
            self.repos.visibility.lock().unwrap().insert(self.git_dir.clone(), (mtime, len, visibility));
        }
        Ok(visibility)
    }

    async fn rev_parse(&self, spec: &str) -> Result<Option<String>, GitError> {
        let out = self.git(&["rev-parse", "--verify", "--quiet", "--end-of-options", spec]).await?;
        if !out.status.success() {
            return Ok(None);
        }
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if sha.len() != 40 {
            return Err(GitError::Parse("rev-parse".into()));
        }
        Ok(Some(sha))
    }

    /// The commit a revision names, if any.
    pub async fn commit(&self, rev: &Rev) -> Result<Option<String>, GitError> {
        let key = (self.git_dir.clone(), rev.as_str().to_string());
        if rev.is_full_sha() && self.repos.commits.lock().unwrap().contains(&key) {
            return Ok(Some(key.1));
        }
        let sha = self.rev_parse(&format!("{}^{{commit}}", rev.as_str())).await?;
        if let Some(sha) = &sha {
            self.repos.commits.lock().unwrap().insert((self.git_dir.clone(), sha.clone()));
        }
        Ok(sha)
    }

    /// The tree a revision names (a tree id, or a commit's root tree), if any.
    pub async fn tree_id(&self, rev: &Rev) -> Result<Option<String>, GitError> {
        self.rev_parse(&format!("{}^{{tree}}", rev.as_str())).await
    }

    /// The recursive listing of a commit or tree (a verified object id), cached.
    pub async fn tree(&self, oid: &str) -> Result<Arc<Tree>, GitError> {
        let cell = {
            let mut trees = self.repos.trees.lock().unwrap();
            if trees.len() >= MAX_CACHED_TREES {
                trees.clear();
            }
            trees.entry((self.git_dir.clone(), oid.to_string())).or_default().clone()
        };
        // Concurrent first requests for one tree share a single `ls-tree`.
        let tree = cell
            .get_or_try_init(|| async {
                let out = self.git_ok(&["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", oid]).await?;
                let mut tree = Tree::parse(&out)?;
                self.read_pointers(&mut tree).await?;
                Ok::<_, GitError>(Arc::new(tree))
            })
            .await?;
        Ok(tree.clone())
    }

    /// Marks the blobs that are git-lfs pointers with their object, reading every blob of a
    /// pointer's size in one `cat-file --batch`.
    async fn read_pointers(&self, tree: &mut Tree) -> Result<(), GitError> {
        let candidates: Vec<usize> = (0..tree.entries.len())
            .filter(|&i| {
                let e = &tree.entries[i];
                e.kind == ObjectKind::Blob && e.size.is_some_and(|n| (100..=200).contains(&n))
            })
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let input: String = candidates.iter().map(|&i| format!("{}\n", tree.entries[i].oid)).collect();
        let out = self.git_input(&["cat-file", "--batch"], input.into_bytes()).await?;
        let mut rest = out.stdout.as_slice();
        for &i in &candidates {
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else { break };
            let size: usize = std::str::from_utf8(&rest[..nl])
                .ok()
                .and_then(|head| head.rsplit(' ').next()?.parse().ok())
                .ok_or_else(|| GitError::Parse("cat-file --batch".into()))?;
            let body =
                rest.get(nl + 1..nl + 1 + size).ok_or_else(|| GitError::Parse("cat-file --batch".into()))?;
            tree.entries[i].lfs = crate::lfs_pointer::read_pointer(body);
            rest = rest.get(nl + 2 + size..).unwrap_or_default();
        }
        Ok(())
    }

    /// A blob's bytes by its id.
    pub async fn blob(&self, oid: &str) -> Result<Vec<u8>, GitError> {
        self.git_ok(&["cat-file", "blob", oid]).await
    }

    /// The history of a verified commit, newest first: `count` commits after skipping `skip`, each
    /// (sha, author, date, full message).
    pub async fn log(&self, sha: &str, skip: usize, count: usize) -> Result<Vec<[String; 4]>, GitError> {
        let (skip, count) = (format!("--skip={skip}"), format!("--max-count={count}"));
        let out = self
            .git_ok(&[
                "log",
                &skip,
                &count,
                "--date=format-local:%Y-%m-%dT%H:%M:%S.000Z",
                "--format=%H%x00%an%x00%ad%x00%B%x1e",
                sha,
                "--",
            ])
            .await?;
        String::from_utf8_lossy(&out)
            .split('\x1e')
            .map(|c| c.trim_start_matches('\n'))
            .filter(|c| !c.is_empty())
            .map(|c| match c.splitn(4, '\0').collect::<Vec<_>>()[..] {
                [sha, author, date, message] => {
                    Ok([sha.into(), author.into(), date.into(), message.trim_end().to_string()])
                }
                _ => Err(GitError::Parse("log".into())),
            })
            .collect()
    }

    /// A verified commit's metadata.
    pub async fn commit_info(&self, sha: &str) -> Result<CommitInfo, GitError> {
        let out = self
            .git_ok(&[
                "show",
                "-s",
                "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
                "--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B",
                sha,
                "--",
            ])
            .await?;
        let text = String::from_utf8_lossy(&out);
        let f: Vec<&str> = text.splitn(10, '\0').collect();
        let [sha, tree, parents, an, ae, ad, cn, ce, cd, message] = f[..] else {
            return Err(GitError::Parse("show".into()));
        };
        let sig = |name: &str, email: &str, date: &str| Signature {
            name: name.into(),
            email: email.into(),
            date: date.into(),
        };
        Ok(CommitInfo {
            sha: sha.into(),
            tree: tree.into(),
            parents: parents.split_whitespace().map(String::from).collect(),
            author: sig(an, ae, ad),
            committer: sig(cn, ce, cd),
            message: message.trim_end_matches('\n').to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_names() {
        assert!(RepoName::parse("demo", "expense-tasks").is_some());
        assert!(RepoName::parse("a.b_c-1", "X").is_some());
        for (o, n) in
            [("..", "x"), ("x", "."), ("", "x"), ("a/b", "x"), ("x", "a b"), ("x", "a\0b"), ("x", "é")]
        {
            assert!(RepoName::parse(o, n).is_none(), "{o:?}/{n:?}");
        }
    }

    #[test]
    fn repo_paths() {
        assert!(RepoPath::parse("a/b.txt").is_some());
        assert!(RepoPath::parse(".hidden/x").is_some());
        for p in ["", "/etc/passwd", "a//b", "a/../b", "..", "a/./b", "a/", "a\0b"] {
            assert!(RepoPath::parse(p).is_none(), "{p:?}");
        }
    }

    #[test]
    fn revisions() {
        for r in ["main", "v1.0", "feature/x", "0123456789abcdef0123456789abcdef01234567", "HEAD"] {
            assert!(Rev::parse(r).is_some(), "{r:?}");
        }
        for r in ["", "-n", "--output=x", "main~1", "main^", ":/msg", "HEAD@{1}", "a..b", "a b", "/x", "x/"] {
            assert!(Rev::parse(r).is_none(), "{r:?}");
        }
    }

    #[test]
    fn ls_tree_output() {
        let out = [
            "040000 tree aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa       -\tdir",
            "100644 blob bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb      12\tdir/a b.txt",
            "120000 blob cccccccccccccccccccccccccccccccccccccccc       5\tlink",
        ]
        .join("\0");
        let tree = Tree::parse(out.as_bytes()).unwrap();
        assert_eq!(tree.entries.len(), 3);
        let file = tree.get(&RepoPath::parse("dir/a b.txt").unwrap()).unwrap();
        assert_eq!((file.kind, file.size, file.mode.as_str()), (ObjectKind::Blob, Some(12), "100644"));
        assert_eq!(tree.entries[0].size, None);
        let top: Vec<_> = tree.under(None, false).map(|e| e.path.as_str()).collect();
        assert_eq!(top, ["dir", "link"]);
        let dir = RepoPath::parse("dir").unwrap();
        assert_eq!(tree.under(Some(&dir), true).count(), 1);
    }
}
