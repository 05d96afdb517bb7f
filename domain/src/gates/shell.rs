//! Shell scripts read as text, never run: `oracle/solve.sh` (does it do anything? does it download
//! from other hosts?) and `verifier/test.sh` (can it write any reward but 1? does it download when
//! the task has no network?).

/// The script's commands: comments, blank lines and the shebang dropped.
fn commands(script: &str) -> impl Iterator<Item = &str> {
    script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// A script that does nothing: only `set`, `exit 0`, `true`, `:`, `cd` or `echo` lines.
pub fn is_noop(script: &str) -> bool {
    commands(script).flat_map(|l| l.split(['&', ';', '|'])).map(str::trim).filter(|l| !l.is_empty()).all(
        |l| {
            let first = l.split_whitespace().next().unwrap_or("");
            matches!(first, "set" | "true" | ":" | "echo" | "cd" | "exit" | "printf")
                && !l.contains('>')
                && (first != "exit" || l.split_whitespace().nth(1).is_none_or(|c| c == "0"))
        },
    )
}

const FETCH: &[&str] = &[
    "curl",
    "wget",
    "git clone",
    "pip install",
    "pip3 install",
    "uv pip install",
    "uv add",
    "npm install",
    "apt-get install",
    "apt install",
    "huggingface-cli download",
    "hf download",
];

/// The script fetches from the network (a download tool or an `http(s)://` address).
pub fn downloads(script: &str) -> bool {
    commands(script).any(|l| {
        l.contains("http://") || l.contains("https://") || FETCH.iter().any(|f| contains_command(l, f))
    })
}

fn contains_command(line: &str, cmd: &str) -> bool {
    line.match_indices(cmd).any(|(i, _)| {
        let before = line[..i].chars().last();
        let after = line[i + cmd.len()..].chars().next();
        before.is_none_or(|c| c.is_whitespace() || ";&|($`".contains(c))
            && after.is_none_or(char::is_whitespace)
    })
}

/// `test.sh` writes the reward, and every value it can write is 1.
pub fn reward_always_one(script: &str) -> bool {
    let mut writes = 0;
    let segments = commands(script).flat_map(|l| l.split([';', '&', '|'])).filter(|s| s.contains("reward"));
    for seg in segments {
        let Some((value, _)) = seg.split_once('>') else { continue };
        writes += 1;
        let one = value.split_whitespace().any(|w| {
            let w = w.trim_matches(|c| c == '"' || c == '\'' || c == '{' || c == '}' || c == ',');
            w == "1" || w == "1.0" || w.ends_with(":1") || w.ends_with(":1.0")
        });
        if !one || value.contains('$') {
            return false;
        }
    }
    writes > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_noop_solutions() {
        assert!(is_noop("#!/bin/bash\nexit 0\n"));
        assert!(is_noop("#!/bin/sh\nset -e\ntrue\n"));
        assert!(is_noop(""));
        assert!(!is_noop("#!/bin/bash\npython3 /app/solve.py\n"));
        assert!(!is_noop("echo 42 > /app/out.txt\n"));
        assert!(!is_noop("exit 1\n"));
        assert!(!is_noop("cd /app && python3 solve.py\n"));
        assert!(!is_noop("echo 42 | tee /app/out.txt\n"));
    }

    #[test]
    fn tells_downloads() {
        assert!(downloads("curl -sSL https://example.com/a.txt -o /app/a.txt"));
        assert!(downloads("set -e; pip install requests"));
        assert!(!downloads("python3 -c 'print(1)'\n# curl https://example.com\n"));
        assert!(!downloads("echo curling > /tmp/x"));
    }

    #[test]
    fn tells_rewards_that_can_only_be_one() {
        assert!(reward_always_one("pytest /tests || true\necho 1 > /logs/verifier/reward.txt\n"));
        assert!(!reward_always_one(
            "if pytest /tests; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
        ));
        assert!(!reward_always_one("echo $R > /logs/verifier/reward.txt\n"));
        assert!(!reward_always_one("pytest /tests\n"));
    }
}
