//! `worldfs mount` and `worldfs unmount`: the daemon's life cycle.
//!
//! `mount` checks its arguments, forks, and returns only when the child has mounted (or
//! prints the child's error). The child locks the world against a second writer
//! ([`StoreLock`]), runs the FUSE session with several request threads and a signal thread:
//! SIGTERM, SIGINT and SIGHUP commit whatever open files still hold and the blocks written
//! back in groups (`-o sync` turns that off), and unmount. `unmount` unmounts and then waits
//! for the daemon process to exit, so when it returns every change is in the store. Text whose commit failed is never dropped: at the end the daemon saves it to
//! a recovery folder in the state folder, logs where, and leaves a report that `unmount`
//! prints (exiting non-zero).

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::{Config, MountOption, Session, SessionACL};

use crate::vfs::inodes::UNITS_PER_INODE;
use nix::sys::signal::{SigSet, Signal};
use nix::unistd::{fork, setsid, ForkResult};

use crate::cli::MountArgs;
use crate::error::{Error, Result};
use crate::fuse::{KernelNotifier, WorldFs};
use crate::luanti::store::write_back::WINDOW;
use crate::storekit::lock::StoreLock;
use crate::storekit::mtimes::{content_hash, state_dir};
use crate::vfs::overlay::{Leftover, Unsaved};
use crate::vfs::Vfs;
use crate::worlds::{self, Game};

/// Where pid files of running daemons live: root's in `/run/worldfs`, whatever its
/// environment (a mount made at boot from fstab and `umount` typed in a login shell find
/// the same daemon), other users' in their runtime folder.
fn runtime_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/run/worldfs");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => PathBuf::from(d).join("worldfs"),
        None => std::env::temp_dir().join(format!("worldfs-{}", nix::unistd::geteuid())),
    }
}

/// The daemon's files for `mountpoint` in the runtime folder, named by `ext`.
fn runtime_file(mountpoint: &Path, ext: &str) -> PathBuf {
    let canon = mountpoint
        .canonicalize()
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    runtime_dir().join(format!(
        "{:016x}.{ext}",
        content_hash(canon.to_string_lossy().as_bytes())
    ))
}

/// Holds the daemon's pid.
fn pid_file(mountpoint: &Path) -> PathBuf {
    runtime_file(mountpoint, "pid")
}

/// Where the daemon answers `worldfs status` (see [`crate::status`]).
fn status_socket(mountpoint: &Path) -> PathBuf {
    runtime_file(mountpoint, "sock")
}

/// `worldfs status`.
pub fn status(mountpoint: &Path) -> Result<ExitCode> {
    crate::status::status(status_socket(mountpoint), mountpoint)
}

/// Lists what the daemon could not commit, for `worldfs unmount` to print: its pid on the
/// first line, then one "not committed" line per path.
fn report_file(mountpoint: &Path) -> PathBuf {
    runtime_file(mountpoint, "unsaved")
}

/// Whether `-o` carries `option`.
fn has_option(args: &MountArgs, option: &str) -> bool {
    args.options
        .iter()
        .any(|o| o.split(',').any(|x| x.trim() == option))
}

fn check_mountpoint(mountpoint: &Path, nonempty: bool) -> Result<()> {
    let shown = mountpoint.display();
    let md = fs::metadata(mountpoint).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::not_found(format!(
            "mount point {shown} does not exist (make it with mkdir)"
        )),
        // A mount whose daemon died (killed, crashed) answers nothing until it is unmounted.
        // ENOTCONN, or ECONNABORTED when requests were in flight as it died.
        _ if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)) => Error::new(
            libc::ENOTCONN,
            format!(
                "mount point {shown} still holds a mount whose daemon is gone (killed or \
                     crashed): run `worldfs unmount {shown}` first; what the daemon had \
                     committed is in the world, and a restore can be run again"
            ),
        ),
        _ => Error::from(e).context(format!("mount point {shown}")),
    })?;
    if !md.is_dir() {
        return Err(Error::not_dir(format!(
            "mount point {shown} is a file, not a folder"
        )));
    }
    // A folder on another device than its parent is a mount point already: mounting over it
    // would hide that mount, and a second worldfs there is a mistake (a mount run twice).
    let parent = fs::metadata(mountpoint.join(".."));
    if parent.is_ok_and(|p| p.dev() != md.dev()) {
        return Err(Error::new(
            libc::EBUSY,
            format!(
                "mount point {shown} already holds a mount: unmount it first (`worldfs \
                 unmount {shown}` for a worldfs mount)"
            ),
        ));
    }
    let mut entries =
        fs::read_dir(mountpoint).map_err(|e| Error::from(e).context(format!("{shown}")))?;
    if !nonempty && entries.next().is_some() {
        return Err(Error::not_empty(format!(
            "mount point {shown} is not empty: the mount would hide its files (-o nonempty \
                 mounts anyway)"
        )));
    }
    Ok(())
}

/// What a read-write mount locks against a second writer: the store itself. Terrarum disks
/// are locked by their trees, which re-lock the file after each rewrite.
fn lock_target(source: &Path, game: Game) -> Option<PathBuf> {
    match game {
        // A world being restored has no map.sqlite yet: its folder is locked instead.
        Game::Luanti if source.join("map.sqlite").is_file() => Some(source.join("map.sqlite")),
        Game::Luanti if source.is_dir() => Some(source.to_path_buf()),
        Game::Luanti => Some(source.to_path_buf()),
        Game::Survivalcraft if source.is_dir() => Some(source.to_path_buf()),
        Game::Survivalcraft | Game::Tvda | Game::Tevd => None,
    }
}

fn init_logging(args: &MountArgs, to_file: Option<&Path>) {
    // fuser warns about what is normal here (the session's own unmount after `fusermount3
    // -u`, xattr requests it does not implement); keep those out of a quiet log.
    let level = match args.verbose {
        0 => "warn,fuser=error",
        1 => "info,fuser=warn",
        _ => "debug",
    };
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level));
    if let Some(path) = to_file {
        if let Some(dir) = path.parent() {
            let _ = fs::create_dir_all(dir);
        }
        match fs::OpenOptions::new().create(true).append(true).open(path) {
            Ok(f) => {
                builder.target(env_logger::Target::Pipe(Box::new(f)));
            }
            Err(e) => eprintln!("worldfs: cannot open log file {}: {e}", path.display()),
        }
    }
    let _ = builder.try_init();
}

/// The default log file of a background daemon.
pub fn default_log_file() -> PathBuf {
    state_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("worldfs.log")
}

/// `worldfs mount`.
pub fn mount(args: &MountArgs) -> Result<ExitCode> {
    check_mountpoint(&args.mountpoint, has_option(args, "nonempty"))?;
    if let Some(game) = &args.create {
        worlds::create(&args.source, game)?;
    }
    let game = worlds::detect(&args.source)?;
    if args.snapshot && game != worlds::Game::Luanti {
        return Err(Error::unsupported(format!(
            "{}: --snapshot reads Luanti worlds only (another game's world is read as one \
             moment by mounting it --read-only while the game is not running)",
            args.source.display()
        )));
    }
    if args.foreground {
        init_logging(args, args.log_file.as_deref());
        return serve(args, game, || {});
    }
    let (read_end, write_end) = nix::unistd::pipe().map_err(|e| Error::new(e as i32, "pipe"))?;
    // SAFETY: no other thread exists yet in this process (nothing has been started), so the
    // child may run arbitrary code after fork.
    match unsafe { fork() }.map_err(|e| Error::new(e as i32, format!("fork: {e}")))? {
        ForkResult::Parent { .. } => {
            drop(write_end);
            let mut msg = String::new();
            let mut f = fs::File::from(read_end);
            let _ = f.read_to_string(&mut msg);
            if msg == "ok" {
                Ok(ExitCode::SUCCESS)
            } else if msg.is_empty() {
                Err(Error::corrupt(
                    "the daemon exited before the mount was ready",
                ))
            } else {
                Err(Error::corrupt(msg))
            }
        }
        ForkResult::Child => {
            drop(read_end);
            let _ = setsid();
            let log_file = args.log_file.clone().unwrap_or_else(default_log_file);
            init_logging(args, Some(&log_file));
            let mut pipe = Some(fs::File::from(write_end));
            let result = serve(args, game, || {
                if let Some(mut p) = pipe.take() {
                    let _ = p.write_all(b"ok");
                }
                detach_stdio();
            });
            if let Err(e) = &result {
                log::error!("{e}");
                if let Some(mut p) = pipe.take() {
                    let _ = p.write_all(e.to_string().as_bytes());
                }
            }
            std::process::exit(match result {
                Ok(code) if code == ExitCode::SUCCESS => 0,
                _ => 1,
            });
        }
    }
}

fn detach_stdio() {
    if let Ok(null) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let fd = OwnedFd::from(null);
        for target in 0..3 {
            // SAFETY: dup2 onto the standard descriptors with a valid open descriptor.
            unsafe {
                libc::dup2(fd.as_raw_fd(), target);
            }
        }
    }
}

fn mount_config(args: &MountArgs, fs_name: String) -> Config {
    let allow_other = args.allow_other || has_option(args, "allow_other");
    let mut opts = vec![
        MountOption::FSName(fs_name),
        MountOption::Subtype("worldfs".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    // Other users' access is checked by the kernel against owners and modes; a mount of one
    // user's checks what the kernel leaves to it itself (`vfs::permission`), which spares a
    // request for the folder's attributes after each change in it.
    if allow_other {
        opts.push(MountOption::DefaultPermissions);
    }
    if args.read_only || args.snapshot {
        opts.push(MountOption::RO);
    }
    for o in args.options.iter().flat_map(|s| s.split(',')) {
        match o.trim() {
            // `nonempty` is worldfs's own (fuse3 mounts over anything); the rest are fstab's,
            // for mount(8) and not the kernel (the mount helper passes some of them on).
            "" | "allow_other" | "nonempty" | "rw" | "defaults" | "nofail" | "_netdev" | "auto"
            | "noauto" | "user" | "users" | "nouser" | "owner" | "group" => {}
            other
                if ["x-", "comment=", "helper=", "uhelper=", "user="]
                    .iter()
                    .any(|p| other.starts_with(p)) => {}
            "ro" => opts.push(MountOption::RO),
            // Device files and set-user-ID bits are never honoured (nodev, nosuid above),
            // whatever mount.fuse3 asks for root.
            "dev" | "suid" | "nodev" | "nosuid" => {}
            "exec" => opts.push(MountOption::Exec),
            "noexec" => opts.push(MountOption::NoExec),
            "atime" => opts.push(MountOption::Atime),
            "noatime" => opts.push(MountOption::NoAtime),
            "async" => opts.push(MountOption::Async),
            "dirsync" => opts.push(MountOption::DirSync),
            other => opts.push(MountOption::CUSTOM(other.to_string())),
        }
    }
    let mut config = Config::default();
    config.mount_options = opts;
    config.acl = if allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(usize::from(args.threads));
    config.clone_fd = true;
    config
}

/// How the session ended: unmounting is a normal end. The kernel ends the session with
/// ENODEV, or with ECONNABORTED for a request thread that was reading a request just as the
/// unmount tore the connection down (Linux's `fuse_dev_do_read`); both mean "unmounted".
fn session_end(run: std::io::Result<()>) -> Result<()> {
    match run {
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {
            log::info!("FUSE connection closed by the kernel while a request was being read");
            Ok(())
        }
        other => other.map_err(|e| Error::from(e).context("FUSE session")),
    }
}

/// Blocks the termination signals in every thread (one thread waits for them, see
/// [`unmount_on_signal`]) and tunes the allocator; called before any other thread starts.
fn prepare_process() -> Result<SigSet> {
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals
        .thread_block()
        .map_err(|e| Error::new(e as i32, "cannot block signals"))?;

    // Request threads would each get a malloc arena of their own; two keep the daemon's
    // memory close to what it holds (decoded objects, inodes) on long walks. A fixed mmap
    // threshold keeps large buffers (a decompressed block, a rendered view) mapped on their
    // own, so memory freed after a big block goes back to the system: glibc otherwise raises
    // the threshold after the first such free and keeps later ones in the heap.
    // SAFETY: mallopt only tunes the allocator; called before any other thread starts.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
    Ok(signals)
}

/// The kernel keeps an inode for every name it has seen until memory runs short, and the
/// daemon must keep each one too: past the budget, ask the kernel to drop the oldest names,
/// so a walk of any world leaves the daemon's memory bounded.
fn forget_past_budget(vfs: Arc<Vfs>, notifier: fuser::Notifier, budget: usize) {
    std::thread::spawn(move || {
        let mut sent = std::collections::HashSet::new();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let names = vfs.over_budget(budget, &sent);
            if !names.is_empty() {
                log::info!(
                    "over the inode budget: asking the kernel to forget {} names",
                    names.len()
                );
            }
            sent = names.iter().map(|(ino, _, _)| *ino).collect();
            let shed = vfs.shed_units(budget.saturating_mul(UNITS_PER_INODE));
            if !shed.inodes.is_empty() {
                log::info!(
                    "over the budget of numbered folders: asking the kernel to drop {} inodes",
                    shed.inodes.len()
                );
            }
            for ino in shed.inodes {
                let _ = notifier.inval_inode(fuser::INodeNo(ino), 0, 0);
            }
            let names = names
                .into_iter()
                .map(|(_, p, n)| (p, n))
                .chain(shed.entries);
            for (parent, name) in names {
                // ENOENT: the kernel has dropped it already.
                let _ = notifier.inval_entry(fuser::INodeNo(parent), std::ffi::OsStr::new(&name));
            }
        }
    });
}

/// On SIGTERM, SIGINT or SIGHUP: commits open files and unmounts (lazily if the mount is
/// busy), which ends the session.
fn unmount_on_signal(
    signals: SigSet,
    vfs: Arc<Vfs>,
    mut unmounter: fuser::SessionUnmounter,
    mountpoint: PathBuf,
) {
    std::thread::spawn(move || {
        if let Ok(sig) = signals.wait() {
            log::warn!("{sig:?}: committing open files and unmounting");
            vfs.commit_all();
            if unmounter.unmount().is_err() {
                let _ = Command::new("fusermount3")
                    .arg("-u")
                    .arg("-z")
                    .arg(&mountpoint)
                    .status();
            }
        }
    });
}

/// After the session: commits what is open, stores the files left under temporaries' names,
/// saves the text no commit took and reports it for `worldfs unmount` in `report_path`.
/// Returns the unsaved paths' report lines.
fn finish(vfs: &Vfs, report_path: &Path) -> Vec<String> {
    vfs.commit_all();
    for Leftover { path, stored } in vfs.store_scratch() {
        match stored {
            Ok(()) => log::info!("{path}: a file under a temporary's name, stored at unmount"),
            Err(e) => log::warn!("temporary file not stored at unmount: {path} ({e})"),
        }
    }
    if let Err(e) = vfs.sync() {
        log::error!("committing the files stored at unmount: {e}");
    }
    let unsaved = save_unsaved(vfs);
    if !unsaved.is_empty() {
        let mut report = format!("{}\n", std::process::id());
        for line in &unsaved {
            report.push_str(line);
            report.push('\n');
        }
        if let Err(e) = fs::write(report_path, report) {
            log::error!("cannot write {}: {e}", report_path.display());
        }
    }
    unsaved
}

/// Runs `mount` with `CAP_SYS_ADMIN` out of this thread's effective capabilities (restored
/// after), so that fuser's own `mount(2)` is refused and it mounts through fusermount3, as
/// for any user. Only fusermount3 gives the mount its type `fuse.worldfs` (fuser's direct
/// mount makes every mount `fuse`), and umount(8) runs our helper (`umount.fuse.worldfs`,
/// which waits for the commits as `worldfs unmount` does) only for that type. fusermount3 is
/// set-user-ID root, so for root it runs with every capability. A thread without the
/// capability to drop (not root) runs `mount` as it is.
fn without_mount_capability<T>(mount: impl FnOnce() -> T) -> T {
    /// `struct __user_cap_header_struct`, version 3.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    /// `struct __user_cap_data_struct`; version 3 takes two (capabilities 0–31, 32–63).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_SYS_ADMIN: u32 = 21;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget with a version-3 header and the two data structs that version takes.
    let got = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    if got != 0 || data[0].effective & (1 << CAP_SYS_ADMIN) == 0 {
        return mount();
    }
    let saved = data;
    data[0].effective &= !(1 << CAP_SYS_ADMIN);
    // SAFETY: capset of this thread (pid 0) with the structs capget filled, one bit cleared.
    let dropped =
        unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) } == 0;
    let out = mount();
    if dropped {
        // SAFETY: as above, putting back what capget gave (still permitted).
        let restored =
            unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, saved.as_ptr()) };
        if restored != 0 {
            log::warn!("could not restore CAP_SYS_ADMIN after mounting");
        }
    }
    out
}

/// Runs the FUSE session until unmounted; `ready` is called once the mount is usable.
fn serve(args: &MountArgs, game: worlds::Game, ready: impl FnOnce()) -> Result<ExitCode> {
    let signals = prepare_process()?;
    let read_only = args.read_only || args.snapshot || has_option(args, "ro");
    if args.snapshot {
        crate::luanti::store::snapshot::start();
    }
    // Held for the daemon's life (declared first, dropped last); the kernel drops it when
    // the daemon exits, however it ends.
    let _world_lock = match lock_target(&args.source, game) {
        Some(target) if !read_only => Some(StoreLock::mount(&target, false)?),
        _ => None,
    };
    let tree = worlds::open_grouping(
        &args.source,
        game,
        read_only,
        crate::storekit::objects::mib(args.cache_size),
        (!has_option(args, "sync")).then_some(WINDOW),
    )?;
    if let Some(state) = state_dir() {
        keep_orphaned_held(&state);
    }
    let held_dir = state_dir().map(|d| d.join("held").join(std::process::id().to_string()));
    let vfs = Arc::new(Vfs::new(tree, held_dir));
    let fs_name = format!("worldfs:{}", args.source.display());
    let config = mount_config(args, fs_name);
    // Named before mounting: naming the mount point after would ask this daemon about it.
    let pid_path = pid_file(&args.mountpoint);
    let report_path = report_file(&args.mountpoint);
    let socket_path = status_socket(&args.mountpoint);
    if let Some(dir) = pid_path.parent() {
        let _ = fs::create_dir_all(dir);
        // Made private only when it is a real folder of this user's (never through a link,
        // never another user's folder planted in /tmp).
        match fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() => {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
            }
            _ => log::warn!(
                "{}: not a folder of this user's; worldfs status and unmount may not find \
                 this daemon",
                dir.display()
            ),
        }
    }
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let kernel_checks = config.mount_options.iter().any(|o| match o {
        MountOption::DefaultPermissions => true,
        MountOption::CUSTOM(c) => c == "default_permissions",
        _ => false,
    });
    let fs = || WorldFs::new(vfs.clone(), uid, gid, kernel_checks);
    let mut session = match without_mount_capability(|| {
        Session::new(fs(), &args.mountpoint, &config)
    }) {
        Ok(session) => session,
        Err(e) => {
            log::warn!("mounting through fusermount3 failed ({e}); mounting directly (type fuse: umount will not run umount.fuse.worldfs)");
            Session::new(fs(), &args.mountpoint, &config).map_err(|e| {
                Error::from(e).context(format!("mounting on {}", args.mountpoint.display()))
            })?
        }
    };
    forget_past_budget(vfs.clone(), session.notifier(), args.max_inodes.max(10));
    vfs.keep_kernel_cache(Box::new(KernelNotifier(session.notifier())));
    vfs.watch()?;
    unmount_on_signal(
        signals,
        vfs.clone(),
        session.unmount_callable(),
        args.mountpoint.clone(),
    );
    if let Err(e) = crate::status::serve(vfs.clone(), &socket_path, &args.source) {
        log::warn!("worldfs status cannot ask this mount: {e}");
    }
    let _ = fs::remove_file(&report_path);
    let _ = fs::write(&pid_path, std::process::id().to_string());
    log::info!(
        "mounted {} on {}",
        args.source.display(),
        args.mountpoint.display()
    );
    ready();
    let run = session.run();
    let _ = fs::remove_file(&socket_path);
    let unsaved = finish(&vfs, &report_path);
    let _ = fs::remove_file(&pid_path);
    session_end(run)?;
    log::info!("unmounted {}", args.mountpoint.display());
    Ok(if unsaved.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Where the text no commit took is saved at unmount: a new folder in the state folder.
fn recovery_dir() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = format!("{secs}-{}", std::process::id());
    match state_dir() {
        Some(d) => d.join("unsaved").join(name),
        None => std::env::temp_dir().join(format!("worldfs-unsaved-{name}")),
    }
}

/// Moves the held text of daemons that ended without unmounting (killed with SIGKILL, or a
/// crash) from `STATE/held/PID/` to `STATE/unsaved/TIME-PID-ended/`, and says so in the log:
/// that text was never committed, and it stays recoverable instead of lying unseen.
fn keep_orphaned_held(state: &Path) {
    let Ok(entries) = fs::read_dir(state.join("held")) else {
        return;
    };
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if pid != std::process::id() as i32 && process_alive(pid) {
            continue;
        }
        // Never followed: a link or a file there is moved as it is.
        let folder = e.file_type().is_ok_and(|t| t.is_dir());
        let held = if folder {
            files_below(&e.path())
        } else {
            Vec::new()
        };
        if folder && held.is_empty() {
            // Killed after every held text was dropped: its folders hold nothing else (a
            // link or any other entry is listed as a file above).
            let _ = fs::remove_dir_all(e.path());
            continue;
        }
        let dest = state.join("unsaved").join(format!("{secs}-{pid}-ended"));
        let moved = crate::vfs::held::private_dir(&state.join("unsaved"))
            .and_then(|()| fs::rename(e.path(), &dest).map_err(Error::from));
        match moved {
            Ok(()) => {
                log::warn!(
                    "text held by worldfs pid {pid}, which ended without unmounting, was never \
                     committed: kept in {}",
                    dest.display()
                );
                for file in held {
                    // Spilled text lies in `N/PATH` (see `vfs::held::Spill::hold`); a
                    // daemon older than that kept no path.
                    let at: PathBuf = file.iter().skip(1).collect();
                    let whose = if at.as_os_str().is_empty() {
                        "text whose path was not recorded".to_string()
                    } else {
                        format!("text for the mount's {}", at.display())
                    };
                    log::warn!("  {} holds {whose}", dest.join(&file).display());
                }
            }
            Err(err) => log::warn!("{}: {err}", e.path().display()),
        }
    }
}

/// The files below `dir`, as paths relative to it, sorted.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let Ok(entries) = fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let child = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(child),
                _ => files.push(child),
            }
        }
    }
    files.sort();
    files
}

/// Saves the text no commit took and says so in the log and on stderr (seen in the
/// foreground); returns one "not committed" line per path.
fn save_unsaved(vfs: &Vfs) -> Vec<String> {
    let lines: Vec<String> = vfs
        .save_unsaved(&recovery_dir())
        .into_iter()
        .map(|Unsaved { path, saved }| match saved {
            Ok(file) => format!("not committed: {path} (saved in {})", file.display()),
            Err(e) => format!("not committed: {path} (could not be saved: {e})"),
        })
        .collect();
    for line in &lines {
        log::error!("{line}");
        eprintln!("worldfs: {line}");
    }
    lines
}

/// Whether process `pid` still runs: one of its threads is not a zombie. A daemon's main
/// thread ends (a zombie) before its other threads, which still hold its files and so the
/// world's lock: until the last one ends, a new mount of the world would be refused.
fn process_alive(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks
        .flatten()
        .any(|t| fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| task_running(&stat)))
}

/// Whether a `/proc/…/stat` line is of a task that has not ended: its state (the field after
/// the parenthesized name) is neither zombie nor dead.
fn task_running(stat: &str) -> bool {
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

/// Whether the daemon `pid` was killed but cannot end: its main thread has ended (a zombie)
/// while another still waits in the kernel.
fn dying(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !task_running(&stat))
        && process_alive(pid)
}

/// The FUSE connection number of the mount at `mountpoint` (its device's minor number), from
/// `/proc/self/mountinfo` lines (no call into the mount, whose daemon may not answer).
fn connection_of(mountinfo: &str, mountpoint: &Path) -> Option<u32> {
    let wanted = mountpoint.to_str()?;
    // The last line naming the path is the mount on top, the one an unmount acts on.
    mountinfo.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let (device, at) = (fields.get(2)?, fields.get(4)?);
        let at = at
            .replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\012", "\n")
            .replace("\\134", "\\");
        let fuse = line
            .split(" - ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with("fuse"));
        (fuse && at == wanted)
            .then(|| device.split_once(':')?.1.parse().ok())
            .flatten()
    })
}

/// The FUSE connection number of the mount at `mountpoint`.
fn connection(mountpoint: &Path) -> Result<u32> {
    let at = fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
    connection_of(&mountinfo, &at)
        .ok_or_else(|| Error::not_found(format!("{}: not a FUSE mount", mountpoint.display())))
}

/// Aborts FUSE connection `n`, of the mount at `mountpoint`: every request waiting on it
/// fails at once.
fn abort_connection(mountpoint: &Path, n: u32) -> Result<()> {
    let abort = format!("/sys/fs/fuse/connections/{n}/abort");
    fs::write(&abort, "1").map_err(|e| {
        Error::from(e).context(format!(
            "aborting the connection of {} ({abort}; `umount -f` does the same)",
            mountpoint.display()
        ))
    })
}

/// `worldfs unmount`.
pub fn unmount(mountpoint: &Path) -> Result<ExitCode> {
    let pid_path = pid_file(mountpoint);
    let pid: Option<i32> = fs::read_to_string(&pid_path)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let fusermount = |lazy: bool| {
        let mut cmd = Command::new("fusermount3");
        cmd.arg(if lazy { "-uz" } else { "-u" }).arg(mountpoint);
        cmd.status()
            .or_else(|_| {
                let mut umount = Command::new("umount");
                // No helper: ours (umount.fuse.worldfs) would run `worldfs unmount` again.
                umount.arg("-i");
                if lazy {
                    umount.arg("-l");
                }
                umount.arg(mountpoint).status()
            })
            .map_err(|e| Error::from(e).context("running fusermount3"))
    };
    // A daemon killed while one of its threads waited in the kernel (a cache invalidation
    // waiting for a page that a writer to the mount holds, the writer waiting for an answer
    // only the daemon could give) cannot end, nor can the writer: only aborting the
    // connection ends both. Its number is read while the mount is still listed.
    let stuck = pid
        .filter(|&pid| dying(pid))
        .map(|_| connection(mountpoint));
    let mut status = fusermount(false)?;
    if let Some(connection) = stuck {
        match connection.and_then(|n| abort_connection(mountpoint, n)) {
            Ok(()) => eprintln!(
                "worldfs: the daemon of {} was killed while the kernel waited on it; its connection is aborted (writes in flight fail)",
                mountpoint.display()
            ),
            Err(e) => eprintln!("worldfs: {e}"),
        }
        let start = Instant::now();
        while pid.is_some_and(process_alive) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // A mount whose daemon is gone commits nothing any more: a process still holding one of
    // its files (it only gets errors) must not keep the dead mount in place, so it is
    // detached at once and goes when the last such file is closed.
    if !status.success() && pid.is_some_and(|pid| !process_alive(pid)) {
        status = fusermount(true)?;
        if status.success() {
            eprintln!(
                "worldfs: the daemon of {} had ended; the mount is detached (files still open in it only give errors)",
                mountpoint.display()
            );
        }
    }
    if !status.success() {
        return Err(Error::new(
            libc::EBUSY,
            format!(
                "could not unmount {} (is it busy or not a worldfs mount?)",
                mountpoint.display()
            ),
        ));
    }
    let Some(pid) = pid else {
        return Ok(ExitCode::SUCCESS);
    };
    let start = Instant::now();
    while process_alive(pid) {
        if start.elapsed() > Duration::from_secs(300) {
            return Err(Error::new(
                libc::ETIMEDOUT,
                format!("daemon {pid} did not exit"),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // What the daemon could not commit (saved for recovery), if it left a report.
    let report_path = report_file(mountpoint);
    let report = fs::read_to_string(&report_path).unwrap_or_default();
    let _ = fs::remove_file(&report_path);
    let mut lines = report.lines();
    if lines.next().and_then(|l| l.trim().parse::<i32>().ok()) != Some(pid) {
        return Ok(ExitCode::SUCCESS);
    }
    for line in lines {
        eprintln!("worldfs: {line}");
    }
    Ok(ExitCode::FAILURE)
}

#[cfg(test)]
mod tests {
    use super::{check_mountpoint, keep_orphaned_held, process_alive, session_end, task_running};

    #[test]
    fn the_connection_of_a_mount_is_found_in_mountinfo() {
        use super::connection_of;
        use std::path::Path;
        let info = "22 1 0:21 / /proc rw - proc proc rw\n\
                    61 22 0:52 / /tmp/my\\040world rw,nosuid - fuse.worldfs worldfs:/w rw\n\
                    62 22 0:53 / /tmp/other rw - fuse worldfs:/x rw\n\
                    63 22 8:1 / /tmp/disk rw - ext4 /dev/sda1 rw\n";
        assert_eq!(connection_of(info, Path::new("/tmp/my world")), Some(52));
        assert_eq!(connection_of(info, Path::new("/tmp/other")), Some(53));
        assert_eq!(
            connection_of(info, Path::new("/tmp/disk")),
            None,
            "not FUSE"
        );
        assert_eq!(connection_of(info, Path::new("/tmp/none")), None);
    }

    #[test]
    fn a_process_runs_while_any_of_its_threads_has_not_ended() {
        assert!(process_alive(std::process::id() as i32));
        // A child that exited and is not reaped yet is a zombie: it holds no files.
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        for _ in 0..200 {
            if !process_alive(pid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!process_alive(pid), "an exited child counts as running");
        drop(child);
        // The state is the field after the name, which may hold spaces and parentheses.
        assert!(task_running("42 (worldfs) S 1 42"));
        assert!(task_running("42 (a) Z (b) R 1 42"));
        assert!(!task_running("42 (a) R (b) Z 1 42"));
        assert!(!task_running("42 (worldfs) X 1 42"));
        assert!(!task_running("garbage"));
    }

    #[test]
    fn held_text_of_a_daemon_that_ended_is_kept_for_recovery() {
        let state = tempfile::tempdir().unwrap();
        let dead = state.path().join("held/999999999");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("1"), b"text never committed").unwrap();
        keep_orphaned_held(state.path());
        assert!(!dead.exists());
        let unsaved: Vec<_> = std::fs::read_dir(state.path().join("unsaved"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(unsaved.len(), 1);
        assert!(unsaved[0].to_string_lossy().ends_with("-999999999-ended"));
        assert_eq!(
            std::fs::read(unsaved[0].join("1")).unwrap(),
            b"text never committed"
        );
    }

    #[test]
    fn mount_points_that_are_files_missing_or_not_empty_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = check_mountpoint(&file, false).unwrap_err();
        assert_eq!(e.errno(), libc::ENOTDIR);
        assert!(e.message().ends_with("is a file, not a folder"), "{e}");
        let e = check_mountpoint(&dir.path().join("missing"), false).unwrap_err();
        assert!(e.message().contains("does not exist"), "{e}");
        let e = check_mountpoint(dir.path(), false).unwrap_err();
        assert_eq!(e.errno(), libc::ENOTEMPTY);
        assert!(e.message().contains("-o nonempty"), "{e}");
        check_mountpoint(dir.path(), true).unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        check_mountpoint(&empty, false).unwrap();
        let e = check_mountpoint(std::path::Path::new("/proc"), true).unwrap_err();
        assert_eq!(e.errno(), libc::EBUSY);
        assert!(e.message().contains("already holds a mount"), "{e}");
    }

    #[test]
    fn a_connection_aborted_at_unmount_is_a_normal_end() {
        let aborted = std::io::Error::from_raw_os_error(libc::ECONNABORTED);
        assert!(session_end(Err(aborted)).is_ok());
        assert!(session_end(Ok(())).is_ok());
        let other = std::io::Error::from_raw_os_error(libc::EIO);
        let err = session_end(Err(other)).expect_err("EIO is a failure");
        assert!(err.to_string().contains("FUSE session"), "{err}");
    }
}
