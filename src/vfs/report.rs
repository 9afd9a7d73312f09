//! What `worldfs status` tells of a mount beyond its tree: why each held text's commit
//! failed, and the errors operations met lately. A user whose editor said only "Invalid
//! argument" finds the file, line, column and reason here instead of in the log. The core
//! notes a commit's failure (and its later success) as it happens; the adapter notes every
//! error it answers that is not a plain answer about the tree (`ENOENT`, `EEXIST`,
//! `ENOTEMPTY`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::SystemTime;

/// How many recent errors are kept.
const KEPT: usize = 20;

/// The notes of one mount (one lock, a leaf: nothing is called under it).
#[derive(Default)]
pub struct Report {
    notes: Mutex<Notes>,
}

#[derive(Default)]
struct Notes {
    /// The latest failed commit's reason, by the path shown.
    failures: BTreeMap<String, String>,
    /// The latest errors, oldest first, each with when it happened.
    errors: VecDeque<(SystemTime, String)>,
}

impl Report {
    /// The commit of the text at `path` failed with `reason` (its file, line and column).
    pub fn failed(&self, path: &str, reason: &str) {
        if let Ok(mut n) = self.notes.lock() {
            n.failures.insert(path.to_string(), reason.to_string());
        }
    }

    /// The text at `path` was committed, or the text held there went: no failure stands.
    pub fn cleared(&self, path: &str) {
        if let Ok(mut n) = self.notes.lock() {
            n.failures.remove(path);
        }
    }

    /// An operation answered `message` as an error.
    pub fn error(&self, message: String) {
        if let Ok(mut n) = self.notes.lock() {
            if n.errors.len() == KEPT {
                n.errors.pop_front();
            }
            n.errors.push_back((SystemTime::now(), message));
        }
    }

    /// Why the commit of the text at `path` failed, if that was noted.
    pub fn reason(&self, path: &str) -> Option<String> {
        self.notes.lock().ok()?.failures.get(path).cloned()
    }

    /// The latest errors, oldest first.
    pub fn errors(&self) -> Vec<(SystemTime, String)> {
        self.notes
            .lock()
            .map(|n| n.errors.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_stands_until_cleared_and_errors_keep_the_latest() {
        let r = Report::default();
        r.failed(
            "blocks/0,0,0/nodes.cubeset",
            "line 3, column 4: unknown character 'Q'",
        );
        assert!(r
            .reason("blocks/0,0,0/nodes.cubeset")
            .is_some_and(|m| m.contains("line 3, column 4")));
        r.cleared("blocks/0,0,0/nodes.cubeset");
        assert_eq!(r.reason("blocks/0,0,0/nodes.cubeset"), None);
        for i in 0..KEPT + 5 {
            r.error(format!("error {i}"));
        }
        let errors = r.errors();
        assert_eq!(errors.len(), KEPT);
        assert_eq!(errors[0].1, "error 5");
        assert_eq!(errors[KEPT - 1].1, format!("error {}", KEPT + 4));
    }
}
