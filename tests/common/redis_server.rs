//! Redis servers for the tests: Debian's `redis-server`, never a system-wide one. The
//! instance `scripts/test` started (`WORLDFS_REDIS_SOCKET`) when there is one, else one of
//! this test's own on a Unix socket in a temporary folder, stopped when dropped. A missing
//! `redis-server` fails the test: it never passes silently without a server.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A running server.
pub struct Redis {
    pub socket: PathBuf,
    own: Option<(Child, tempfile::TempDir)>,
}

impl Redis {
    /// The shared server of `scripts/test`, or one of our own.
    pub fn shared() -> Redis {
        match std::env::var_os("WORLDFS_REDIS_SOCKET").filter(|s| !s.is_empty()) {
            Some(s) => {
                let socket = PathBuf::from(s);
                assert!(
                    socket.exists(),
                    "WORLDFS_REDIS_SOCKET={} does not exist",
                    socket.display()
                );
                Redis { socket, own: None }
            }
            None => Redis::own(),
        }
    }

    /// A server of this test's own (it may be stopped and started again).
    pub fn own() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("redis.sock");
        let child = start(&socket);
        Redis {
            socket,
            own: Some((child, dir)),
        }
    }

    /// Stops our own server (it must be one of ours).
    pub fn stop(&mut self) {
        let (child, _) = self
            .own
            .as_mut()
            .expect("only our own server can be stopped");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Starts our own server again on the same socket (empty: nothing is persisted).
    pub fn restart(&mut self) {
        let socket = self.socket.clone();
        let (child, _) = self
            .own
            .as_mut()
            .expect("only our own server can be started");
        *child = start(&socket);
    }

    /// A connection for the test's own independent reads and writes.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(format!("redis+unix://{}", self.socket.display()))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some((child, _)) = self.own.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn start(socket: &Path) -> Child {
    let _ = std::fs::remove_file(socket);
    let dir = socket.parent().unwrap();
    let child = Command::new("redis-server")
        .args(["--port", "0", "--unixsocket"])
        .arg(socket)
        .args([
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is not installed (apt-get install redis-server)");
    let t = Instant::now();
    let client = redis::Client::open(format!("redis+unix://{}", socket.display())).unwrap();
    while client
        .get_connection()
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_err()
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// A hash name no other test uses.
pub fn unique_hash(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "worldfs-test-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
