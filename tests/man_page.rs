//! man/worldfs.1 must match the CLI definition (`UPDATE_MAN=1` rewrites it).

use std::path::Path;

#[test]
fn man_page_matches_the_cli() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("man/worldfs.1");
    let generated = worldfs::manpage::render();
    if std::env::var_os("UPDATE_MAN").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read(&path)
        .expect("man/worldfs.1 missing: run UPDATE_MAN=1 cargo test --test man_page");
    assert!(
        on_disk == generated,
        "man/worldfs.1 is out of date: run UPDATE_MAN=1 cargo test --test man_page"
    );
}

#[test]
fn man_page_documents_every_subcommand_and_mount_option() {
    let text = String::from_utf8(worldfs::manpage::render()).unwrap();
    for word in [
        "mount",
        "unmount",
        "check",
        "info",
        "read\\-only",
        "cache\\-size",
        "allow\\-other",
        "foreground",
    ] {
        assert!(text.contains(word), "man page lacks {word}");
    }
}
