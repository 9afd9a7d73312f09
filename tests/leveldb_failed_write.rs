//! A LevelDB write that fails part-way (a full disk) leaves a torn record at the end of the
//! database's log; LevelDB appends the next write after it, and opening the database later
//! drops the rest of that log block with the writes that had succeeded in it. worldfs's
//! `Db` opens the database again after a failed write, so that every write reported as done
//! is there when the database is opened next (a restore run again after freeing space lost
//! thousands of blocks before, every command exiting 0).
//!
//! The full disk is a file-size limit (`RLIMIT_FSIZE`, writes past it fail with `EFBIG`),
//! set in a child process running this same test binary, since the limit holds for the
//! whole process.

use std::path::Path;
use std::process::Command;

use worldfs::luanti::store::leveldb::Db;

const CHILD: &str = "WORLDFS_TORN_LOG_CHILD";

/// The child: writes 8 KiB values under a file-size limit until a write fails, lifts the
/// limit, writes more, and prints the key of every write that returned success.
fn child(path: &Path) {
    // SAFETY: plain libc calls on this process; SIGXFSZ ignored so an over-limit write
    // fails with EFBIG instead of ending the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let db = Db::open(path, true).unwrap();
    let value = vec![7u8; 8 << 10];
    let log_size = || -> u64 {
        std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len())
            .max()
            .unwrap_or(0)
    };
    // Some writes first, so the torn record is not the first of its log block.
    let mut done = Vec::new();
    for i in 0..3 {
        let key = format!("before{i}");
        db.write(&[(key.as_bytes(), Some(&value))]).unwrap();
        done.push(key);
    }
    // The limit ends the log inside the next record.
    let limit = log_size() + 3000;
    let set_limit = |soft: u64| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid pointers to a local struct.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim), 0);
            lim.rlim_cur = soft.min(lim.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
        }
    };
    set_limit(limit);
    let failed = db.write(&[(b"torn", Some(&value))]);
    assert!(failed.is_err(), "the write past the limit succeeded");
    set_limit(libc::RLIM_INFINITY);
    for i in 0..40 {
        let key = format!("after{i}");
        if db.write(&[(key.as_bytes(), Some(&value))]).is_ok() {
            done.push(key);
        }
    }
    drop(db);
    println!("\nDONE {}", done.join(" "));
}

#[test]
fn every_write_reported_done_after_a_failed_one_is_there_when_opened_again() {
    let child_dir = std::env::var_os(CHILD);
    if let Some(dir) = child_dir {
        child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("map.db");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "every_write_reported_done_after_a_failed_one_is_there_when_opened_again",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Vec<&str> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("DONE "))
        .expect("the child's list of writes")
        .split(' ')
        .collect();
    assert!(
        done.iter().filter(|k| k.starts_with("after")).count() >= 30,
        "the writes after the failed one mostly failed: {done:?}"
    );
    let db = Db::open(&path, false).unwrap();
    let missing: Vec<&&str> = done
        .iter()
        .filter(|k| db.get(k.as_bytes()).unwrap().is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "writes reported done but gone after opening again: {missing:?}"
    );
}
