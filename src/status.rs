//! `worldfs status MNT`: what a user wonders about after an edit, asked of the mount's
//! daemon. When an editor says only "Invalid argument", the file, line, column and reason
//! are here: writes waiting for their commit, texts held because their commit failed, the
//! latest errors with their paths, whether the mount is read-only, and the state of the
//! store where it is not the plain one (a database followed after it was replaced, or one
//! it cannot follow).
//!
//! The daemon answers on a Unix socket in the runtime folder, beside its pid file (mode
//! 0600 in a folder of the user's own), so asking never goes through the mount, whose
//! requests may be what is stuck. The answer's first line is `worldfs status N`, N the exit
//! status: 0 nothing held or failing, 1 texts held or the store failing.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::vfs::Vfs;

/// The first word of every answer (a socket that answers otherwise is not a daemon's).
const HEADER: &str = "worldfs status";

/// Exit status of `worldfs status` when it gets no answer (not a worldfs mount, or its
/// daemon is gone).
pub const NO_ANSWER: u8 = 2;

/// Serves `worldfs status` for the mount of `source` on `socket`, on a thread of its own,
/// for the daemon's life.
pub fn serve(vfs: Arc<Vfs>, socket: &Path, source: &Path) -> Result<()> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)
        .map_err(|e| Error::from(e).context(format!("status socket {}", socket.display())))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let source = source
        .canonicalize()
        .unwrap_or_else(|_| source.to_path_buf());
    std::thread::Builder::new()
        .name("status".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else {
                    // Out of descriptors, say: not a busy loop.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                // Each on its own thread: an answer waits for a commit in progress (its
                // queue's lock), and one stuck must not keep the next from being asked.
                let (vfs, source) = (vfs.clone(), source.clone());
                let _ = std::thread::Builder::new()
                    .name("status answer".into())
                    .spawn(move || {
                        let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                        let _ = stream.write_all(answer(&vfs, &source).as_bytes());
                    });
            }
        })?;
    Ok(())
}

/// The answer to `worldfs status`.
fn answer(vfs: &Vfs, source: &Path) -> String {
    let tree = vfs.tree();
    let held = vfs.failed_with_reasons();
    let waiting = tree.uncommitted();
    let notes = tree.notes();
    let failing = !held.is_empty() || notes.iter().any(|(fails, _)| *fails);
    let mut out = format!("{HEADER} {}\n", u8::from(failing));
    let mode = if tree.read_only() {
        format!("read-only ({})", tree.read_only_error().message())
    } else {
        "read-write".to_string()
    };
    let _ = writeln!(out, "world: {}", source.display());
    let _ = writeln!(out, "mount: {mode}, daemon pid {}", std::process::id());
    for (fails, note) in &notes {
        let _ = writeln!(out, "store{}: {note}", if *fails { " FAILING" } else { "" });
    }
    if waiting.is_empty() {
        let _ = writeln!(out, "writes waiting for their commit: none");
    } else {
        let _ = writeln!(out, "writes waiting for their commit: {}", waiting.len());
        for path in waiting.iter().take(20) {
            let _ = writeln!(out, "  {path}");
        }
    }
    if held.is_empty() {
        let _ = writeln!(out, "texts held because their commit failed: none");
    } else {
        let _ = writeln!(
            out,
            "texts held because their commit failed: {} (readable at their paths until a \
             corrected text is written there; saved in the state folder at unmount)",
            held.len()
        );
        for (path, reason) in &held {
            let why = reason
                .as_deref()
                .unwrap_or("the reason is in the daemon's log");
            let _ = writeln!(out, "  {path}\n    {why}");
        }
    }
    let errors = vfs.report().errors();
    if errors.is_empty() {
        let _ = writeln!(out, "latest errors: none");
    } else {
        let _ = writeln!(out, "latest errors (oldest first):");
        for (when, message) in errors {
            let _ = writeln!(out, "  {} {message}", ago(when));
        }
    }
    out
}

/// How long ago `when` was, for a person.
fn ago(when: SystemTime) -> String {
    let secs = SystemTime::now()
        .duration_since(when)
        .unwrap_or_default()
        .as_secs();
    match secs {
        0..=119 => format!("{secs:>4} s ago"),
        120..=7199 => format!("{:>4} min ago", secs / 60),
        _ => format!("{:>4} h ago", secs / 3600),
    }
}

/// `worldfs status MNT`: prints the daemon's answer; the exit status is its N (see the
/// module docs), or [`NO_ANSWER`].
pub fn status(socket: PathBuf, mountpoint: &Path) -> Result<ExitCode> {
    let no_answer = |why: String| {
        eprintln!("worldfs: {}: {why}", mountpoint.display());
        Ok(ExitCode::from(NO_ANSWER))
    };
    let mut stream = match UnixStream::connect(&socket) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return no_answer(
                "its daemon has ended (killed?): worldfs unmount detaches the mount".into(),
            )
        }
        Err(_) => {
            return no_answer("not a worldfs mount of this user (no daemon answers for it)".into())
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut text = String::new();
    if let Err(e) = stream.read_to_string(&mut text) {
        return no_answer(format!(
            "the daemon did not answer within 30 s ({e}): a commit may be stuck; see its log"
        ));
    }
    let Some((first, rest)) = text.split_once('\n') else {
        return no_answer("the daemon's answer was empty".into());
    };
    let code = first
        .strip_prefix(HEADER)
        .and_then(|n| n.trim().parse::<u8>().ok());
    let Some(code) = code else {
        return no_answer(format!("an answer that is not worldfs's: {first:?}"));
    };
    print!("{rest}");
    Ok(ExitCode::from(code))
}
