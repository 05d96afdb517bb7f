//! A Dockerfile read as instructions, never built: line continuations joined, comments dropped,
//! `COPY`/`ADD` sources and destinations split (shell or JSON form, flags skipped), and the files
//! `RUN` commands write with shell redirections.

/// One instruction: the keyword upper-cased and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub keyword: String,
    pub args: String,
    /// 1-based line where the instruction starts.
    pub line: usize,
}

/// A `COPY` or `ADD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub add: bool,
    /// `--from=` copies come from another stage or image, not the build context.
    pub from_stage: bool,
    pub sources: Vec<String>,
    pub dest: String,
    pub line: usize,
}

/// At most this many instructions are read.
const MAX_INSTRUCTIONS: usize = 2_000;

pub fn instructions(text: &str) -> Vec<Instruction> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut current = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        if current.is_empty() {
            start = i + 1;
        } else if line.starts_with('#') {
            continue;
        }
        if let Some(body) = line.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        push(&mut out, &current, start);
        current.clear();
        if out.len() >= MAX_INSTRUCTIONS {
            return out;
        }
    }
    if !current.is_empty() {
        push(&mut out, &current, start);
    }
    out
}

fn push(out: &mut Vec<Instruction>, text: &str, line: usize) {
    let text = text.trim();
    let (kw, args) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    out.push(Instruction { keyword: kw.to_ascii_uppercase(), args: args.trim().to_string(), line });
}

/// The first instruction is `FROM` (an `ARG` may precede it, as Docker allows).
pub fn starts_with_from(text: &str) -> bool {
    instructions(text).iter().find(|i| i.keyword != "ARG").is_some_and(|i| i.keyword == "FROM")
}

pub fn copies(ins: &[Instruction]) -> Vec<Copy> {
    let mut out = Vec::new();
    for i in ins.iter().filter(|i| i.keyword == "COPY" || i.keyword == "ADD") {
        let mut from_stage = false;
        let mut rest = i.args.as_str();
        while let Some(flag) = rest.strip_prefix("--") {
            let (f, r) = flag.split_once(char::is_whitespace).unwrap_or((flag, ""));
            from_stage |= f.starts_with("from=");
            rest = r.trim_start();
        }
        let parts: Vec<String> = if rest.starts_with('[') {
            serde_json::from_str::<Vec<String>>(rest).unwrap_or_default()
        } else {
            rest.split_whitespace().map(str::to_string).collect()
        };
        if parts.len() < 2 {
            continue;
        }
        let (dest, sources) = parts.split_last().expect("two parts");
        out.push(Copy {
            add: i.keyword == "ADD",
            from_stage,
            sources: sources.to_vec(),
            dest: dest.clone(),
            line: i.line,
        });
    }
    out
}

/// Files a `RUN` writes by redirection (`> path`, `>> path`, `tee path`), with the command text
/// (which holds what it writes when it is an `echo` or a here-document).
pub fn written_files(ins: &[Instruction]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in ins.iter().filter(|i| i.keyword == "RUN") {
        let toks: Vec<&str> = i.args.split_whitespace().collect();
        for (n, t) in toks.iter().enumerate() {
            let target = if let Some(rest) = t.strip_prefix(">>").or_else(|| t.strip_prefix('>')) {
                if rest.is_empty() {
                    toks.get(n + 1).copied()
                } else {
                    Some(rest)
                }
            } else if *t == "tee" {
                toks.get(n + 1).copied().filter(|a| !a.starts_with('-'))
            } else {
                None
            };
            if let Some(target) = target {
                let target = target.trim_matches(|c| c == '"' || c == '\'' || c == ';' || c == ')');
                let file_like = target.contains('/') || target.contains('.');
                if file_like && !target.starts_with("/dev/") && !target.starts_with('&') {
                    out.push((target.to_string(), i.args.clone()));
                }
            }
        }
    }
    out
}

/// A remote `ADD` (a URL or a git address as a source).
pub fn remote_adds(copies: &[Copy]) -> Vec<&Copy> {
    copies
        .iter()
        .filter(|c| {
            c.add
                && c.sources.iter().any(|s| {
                    s.starts_with("http://")
                        || s.starts_with("https://")
                        || s.starts_with("git@")
                        || s.ends_with(".git")
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "# syntax=docker/dockerfile:1\nARG BASE=python:3.11\nFROM ${BASE}\nRUN pip install \\\n  pytest==8.3.3\nCOPY --chown=1000 data/ /app/data/\nCOPY [\"oracle/solve.sh\", \"/opt/\"]\nCOPY --from=builder /x /y\nADD https://example.com/t.tgz /opt/\nRUN echo '{\"total\": 5}' > /app/expected.json && cat a | tee /tmp/log.txt\n";

    #[test]
    fn reads_instructions_copies_and_writes() {
        assert!(starts_with_from(D));
        assert!(!starts_with_from("RUN true\nFROM x\n"));
        assert!(!starts_with_from(""));
        let ins = instructions(D);
        assert_eq!(ins[2].keyword, "RUN");
        assert!(ins[2].args.contains("pytest"));
        let c = copies(&ins);
        assert_eq!(c[0].sources, ["data/"]);
        assert_eq!(c[1].sources, ["oracle/solve.sh"]);
        assert!(c[2].from_stage);
        assert_eq!(remote_adds(&c).len(), 1);
        let w = written_files(&ins);
        assert_eq!(
            w.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["/app/expected.json", "/tmp/log.txt"]
        );
        assert!(w[0].1.contains("\"total\": 5"));
    }
}
