//! `man/worldfs.1`, generated from the clap definition plus the sections that explain the
//! tree and the write semantics. `tests/man_page.rs` fails when the file is out of date
//! (`UPDATE_MAN=1 cargo test --test man_page` rewrites it).

use clap::CommandFactory;
use clap_mangen::Man;

use crate::cli::Cli;

const EXTRA: &str = r#".SH "THE TREE (LUANTI)"
.nf
MOUNT/world.mt, worldmods/, ...     the world folder's other files, folders and links (as on disk)
MOUNT/players/NAME                  the player file format (players.sqlite, players.db, PostgreSQL or players/)
MOUNT/auth.txt                      name:password:privileges:last_login (0600; where auth data exists)
MOUNT/mod_storage/MOD/KEY           one file per mod-storage entry
MOUNT/blocks/X,Y,Z/                 one folder per stored map block (block coordinates)
    nodes.cubeset                   node names and param2 as a Cubeset file
    light.txt                       param1 of every node, layer by layer
    block.txt                       version, flags, lighting_complete (27+), timestamp
    timers.txt                      node timers (positions relative to the block)
    objects.txt                     static objects (positions relative to the block)
    meta/x,y,z/fields/KEY           public metadata fields, one file each
    meta/x,y,z/private/KEY          private metadata fields
    meta/x,y,z/inventory            the node's inventory (inventory text format)
    error.txt                       only for a block that does not decode: why (rm \-r deletes it)
MOUNT/index/nodes/NAME/X,Y,Z        link to each block holding node NAME
MOUNT/index/items/ITEM              PATH LIST SLOT COUNT, one line per slot holding ITEM
MOUNT/index/fields/KEY/VALUE/       links to the meta folders whose field KEY is VALUE
MOUNT/index/objects/NAME/X,Y,Z      link to each block holding static objects of entity NAME
MOUNT/index/broken/X,Y,Z            link to each block that does not decode
.fi
.PP
index/ answers whole-world questions from one parallel in-process scan of the map (nothing
is scanned at mount); the answer is kept (within --cache-size: on a large world only the node
names and the blocks of the name asked about) and updated by changes made through the mount,
and rescanned after another program's commit. mv index/nodes/A index/nodes/B replaces node A by
B in every block (one transaction, all or nothing; the changed blocks are streamed into it,
so the daemon holds a bounded number of them, except on LevelDB, whose write batch holds
them all until the commit); mv index/items/A index/items/B replaces item A by B in
every node and player inventory; an invalid new name fails with EPERM and the reason. A node
rename marks the blocks it changes for relighting, and dates only the files whose content it
changed. rm \-r index/objects/NAME removes the static objects of entity NAME from every block
in one transaction (removing one link changes nothing). index/ is reached
by name and not listed at the top of the mount, so backups, find and grep -r never walk it.
.PP
Nothing shows more than the disk allows (the kernel checks each user of an --allow-other
mount against it): the root shows the world folder's owner and mode, sticky bit included;
each view the owner of its database and, for group and others, at most the bits the
database gives them (a 0600 map.sqlite shows blocks 0600 and folders 0700); a Terrarum disk's files follow the disk file. World
files and folders show their own owners, permission bits (the same on --read-only, where
the kernel refuses every write) and
mtimes; chmod and touch set them, a replaced file keeps its mode, and what a user makes
there through the mount is that user's on disk when worldfs runs as root, as is a chown
(cp -a and rsync -a as root keep owners); on a store's objects chmod and chown succeed
without effect. Without --allow-other only the mounting user reaches the mount, and
worldfs checks modes itself where the kernel leaves it to (access(2), writes, reads of
all but block views, entries made, removed or renamed, chown), with the kernel's rules. Symbolic links in the
world folder show as links and worldfs never follows one: readlink gives the target as
stored; rm, mv, touch -h and ln -s act on the link itself (ln -s only among the world
folder's files). A folder named like a view (blocks/, index/, players/ beside the sqlite3 player
backend, mod_storage/) is not shown: the view wins.
.PP
The backends world.mt names (backend, player_backend, auth_backend, mod_storage_backend) are
used: sqlite3, files, postgresql with the libpq strings pgsql_connection,
pgsql_player_connection, pgsql_auth_connection, pgsql_mod_storage_connection, leveldb
(map.db, players.db, auth.db) or redis for the map (redis_address, redis_port, redis_hash,
redis_password); the tree is the same. A world.mt written through the mount must name the
stores it writes to (the same backends, and the connection settings of those in use, as
when it was mounted): one naming others, or a link, is refused (EPERM) and world.mt stays
as it was; restore a backup of another backend's or database's world with
rsync \-a \-\-exclude /world.mt. A world folder without world.mt has each store read where
its data is (players.sqlite or players/, auth.sqlite or auth.txt, mod_storage.sqlite or
mod_storage/), sqlite3 where there is none. The tables, keys and records are the engine's, each
commit one transaction (a LevelDB write batch, a Redis MULTI/EXEC). A world whose server
runs on LevelDB fails the mount naming map.db/LOCK (LevelDB allows one process). A
PostgreSQL or Redis server that is down fails the mount; one that goes away fails the calls
needing it with EIO until it is back. Passwords are never shown (info, errors and logs name
host, port, database and user, or the Redis server and hash).
A readonly_backend seed map in readonly/ shows where the engine reads it; its blocks that
the main map lacks show no write permission and refuse changes (EROFS).
.PP
A folder holding only world.mt mounts as an empty world (restoring a backup into it with
rsync -a creates each store on first write, map.sqlite with the Luanti 5.6 schema); a
read-only mount creates nothing. A new database appears whole (renamed into place), so a
restore cut off by a kill mounts again and the same rsync completes it; an empty map.sqlite
is an empty map, as for the engine.
.PP
Node coordinates are 16*X+x, 16*Y+y, 16*Z+z. A value file reads as its bytes plus one
newline; one trailing newline is removed on write. Names that cannot be file names are
percent-escaped (%2F for /, %25 for %, %0A for a newline and %XX for every control
character, %2E%2E for ..). A name whose escaped form passes
255 bytes shows as its start, %# and a 16-digit hash: that name opens, changes, renames and
removes the stored key, but cannot create one. In fields/, private/ and mod_storage/MOD/
every name is a key except the temporaries of sed -i, rsync and vim.
.SH "THE TREE (SURVIVALCRAFT)"
.nf
MOUNT/Project.xml                   read/write
MOUNT/chunks/CX,CZ/blocks.cubeset   block id and data per cell (names in comments)
MOUNT/chunks/CX,CZ/light.txt        one hex digit per cell (not for region worlds)
MOUNT/chunks/CX,CZ/surface.txt      top height, temperature, humidity per column (and bottom and
                                    sunlight heights in Chunks*.dat)
MOUNT/players/NAME/inventory        a player's slots, written back into Project.xml
MOUNT/containers/X,Y,Z/inventory    chests, furnaces, crafting tables
MOUNT/index/blocks/ID/CX,CZ         link to each chunk holding block id ID
MOUNT/index/items/ID                PATH COMPONENT SLOT COUNT, one line per slot holding block id ID
.fi
.PP
A .scworld file mounts only with --read-only; unpack it to edit it. index/ answers from one
parallel scan of the chunks (items from Project.xml); mv index/blocks/A index/blocks/B
replaces block A by B in every chunk holding it (data and light kept) in one commit of the
chunk store (Chunks*.dat through one journal, several region files through one sealed
journal: all or nothing); mv index/items/A index/items/B replaces it in every inventory
slot (one commit of Project.xml). IDs are decimal block ids; others fail with EINVAL.
.SH "THE TREE (TERRARUM)"
.nf
MOUNT/header.txt                    the disk header: name, kind, save_mode, origin, snapshot, game_mode
MOUNT/savegameinfo.json             entry -1, pretty-printed (genver first)
MOUNT/loadOrder.txt, ...            the well-known entries by name
MOUNT/thumbnail.tga                 gzip-decoded images
MOUNT/inventory                     a player disk's items, ITEM QUANTITY per line
MOUNT/actors/ID.json                actor entries
MOUNT/chunks/LAYER/CX,CY.cubeset    terrain, wall, ores, fluid tiles
MOUNT/entries/ID                    every live entry's stored bytes
MOUNT/index/tiles/NAME/LAYER,CX,CY.cubeset  link to each chunk file holding tile NAME (world disks)
MOUNT/index/items/ITEM              PATH itemList SLOT QUANTITY, one line per inventory item
.fi
.PP
index/ answers from one parallel scan of the disk's entries; mv index/tiles/A index/tiles/B
(B in tileNumberToNameMap, or a tile number) and mv index/items/A index/items/B (the player's
inventory and every actor's; quantities of an item already held add up) change every entry
holding A in one commit of the disk (all or nothing); a bad name fails with EINVAL.
.PP
Each saved file is appended to the disk and the old copy discarded, as the game's autosave
does; worldfs compact DISK drops discarded entries afterwards. A TEVD disk mounts as its
real folders.
.PP
header.txt holds key = value lines (flags, capacity, marker and reserved too when not 0);
not the disk CRC nor a world's quicksave bit. The same text is a no-op, another is committed
by one clean rewrite, a kind change fails with EPERM, a bad text fails the close with its
line. To restore a disk that is gone, copy the backup's header.txt to the disk's path and
mount that file read-write: it becomes a new, empty disk with that header (renamed into
place), and rsync -a from the backup fills it exactly. A missing path, an empty file or a
read-only mount make no disk. Chunk files need the world JSON first (rsync -a writes the
root's files first; otherwise a second pass completes the restore).
.PP
A disk that ends inside its last entry (an interrupted save) reads as before that save; the
next save cuts the torn bytes off. Damage inside a disk (bytes that are not entries, a root
listing naming entries the disk does not hold, an entry failing its CRC) is never written
over: the entries around it are shown, the mount is read-only, the log says why, and check
fails. Shown files are bounded: entries read up to 16 MiB, images decoded up to 16 MiB, JSON
up to 16 MiB of decoded memory.
.SH WRITING
What is written goes to a buffer. On close and fsync the file is parsed and the block
re-encoded at its own serialization version (22 and 23 are written as 25); close returns
the error if anything failed, and every reader of the mount sees the new block when it
returns. Luanti blocks are then written back in groups, one SQLite transaction for many
closes: when writing pauses for 100 ms, at the latest 1 s after the first uncommitted
close, and at once on fsync of any file of the mount, a listing of blocks/, a commit by
another program (a block it changed after our close keeps its version, the later one), and
unmount or SIGTERM. When fsync returns, everything written before it is in the database.
-o sync commits each close in its own transaction before close returns. A crash (SIGKILL)
leaves every block old or new and loses at most the closes of the last second no fsync
followed. Everything else (players, auth, mod storage, world files, other games) is
committed at close. Bad input (a syntax
error, an unknown character or name, a value out of range, a truncated file) changes nothing
in the database: close fails, the log and worldfs status name the file, line and reason, and the text stays
readable in the mount until fixed or removed. Blocks whose nodes change get their
lighting_complete cleared (before version 27, the lighting_expired flag set) so the engine
relights them, unless a block.txt written through the mount left the block as it is (same
header, same nodes): cp \-a and rsync \-a restores keep the flags they wrote, also when run
again after a stop, across remounts; a block.txt saved unchanged marks nothing; light.txt
stays as written.
Times set by rsync, cp \-a or touch are kept on every file and folder while its content (a
folder: its names; a block folder: until another program changes its block) is unchanged, so an edit
makes the next backup send only what changed. The folders worldfs makes up (the top, blocks/,
index/, and with sqlite3 backends players/ and mod_storage/) show 2020\-01\-01 and ignore
times set on them.
.PP
rm of a view of a block changes nothing: the file stays,
so rm \-r of a block folder reaches the rmdir that deletes the block. For a minute, or until
it writes the file, the process that removed it does not see it, so mv from another file
system, cp \-\-remove\-destination and install (which remove the destination, then create it
with O_EXCL) replace it.
.PP
rm of a stored object whose text worldfs checks (a player, a key, a field, a chest's
inventory, world.mt) hides it at once and reaches the store within about a second (at once
at fsync), or at once when an rmdir or rename around it,
or the unmount, needs it; a file created under the name in between replaces it, so install,
mv from another file system and cp \-\-remove\-destination replace a stored object only with a
text that commits (a failed one leaves it stored). What cannot be removed is refused at the
rm. A folder the tree cannot move there (players/, blocks/, a block into the world folder)
is refused with EPERM instead of EXDEV, so mv never copies it and removes the original.
index/ takes no file: create, open for writing and truncation fail with EPERM. A database
path holding a FIFO or another special file is refused at once. The mount shows 256 levels
of folders: what a world folder holds deeper answers ENAMETOOLONG.
.PP
mkdir blocks/X,Y,Z adds an all-air block; rmdir (rm -r) of a block folder deletes the block
(the engine regenerates it); cp -r of a block folder copies it; mv renames it. mkdir and
rm -r of meta/x,y,z add and remove node metadata. Temporary files of editors, sed -i and
rsync are held by the daemon; renaming one over a file commits it. One still there at unmount
(a mod's .gitignore, a key or player named 4913 from a backup, or what a killed tool left,
as on any filesystem) is stored under its own name where its folder can hold it, else
dropped with a log line. A file renamed to such a name (an editor's backup) is hidden but
stays stored until new content for it is committed or the backup is deleted; the backup
itself is not stored at unmount. Held files keep real modes (a backup
of auth.txt stays 0600).
.PP
Removing a file whose commit failed discards only its text: the stored object shows again,
and removing it again deletes it. Text no commit took is never dropped: at unmount (or
SIGTERM) it is saved under $XDG_STATE_HOME/worldfs/unsaved/, the log names each file, and
worldfs unmount prints "not committed: PATH (saved in FILE)" and exits 1. Blocks written
back whose commit still fails at unmount are lost: worldfs unmount prints "not committed:
blocks/X,Y,Z (could not be saved: ...)" for each and exits 1. Descriptors open
on one file share its buffer: each reads what the others wrote, and stat shows the
buffer's size. A buffer past 8 MiB waits in an unnamed private file of the state folder,
not in memory. A file is at most 256 MiB (EFBIG beyond); a file a write failed to grow past
it is never stored cut: its closes fail with EFBIG and drop what was written (the file keeps
what it held), until a truncation. A second read-write mount of a
world is refused, and so is a mount point that is not empty (unless -o nonempty) or holds a
mount already.
.PP
Never write while a game server runs on the world: the server overwrites blocks it holds in
memory and gives up on a database locked for 3 seconds. --read-only is safe beside a running
server (only short read transactions; the one write, as any SQLite program makes at its
first read, rolls back a commit a crash cut off, whose journal no process holds).
.SH EXAMPLES
.nf
worldfs mount ~/.minetest/worlds/w /mnt/w
grep \-rl default:chest /mnt/w/blocks \-\-include=nodes.cubeset
cat /mnt/w/blocks/0,0,0/meta/2,10,1/fields/text          # a sign's text
sed \-i '0,/^Empty$/s//Item default:diamond 99/' /mnt/w/players/celeron55   # give items
sed \-i 's/^foo:\\([^:]*\\):shout:/foo:\\1:shout,fly:/' /mnt/w/auth.txt  # grant fly
cat /mnt/w/mod_storage/mymod/*                             # inspect mod storage
cp \-r /mnt/w/blocks/0,0,0 /mnt/w/blocks/5,0,5             # copy a block
rsync \-a /mnt/w/ /backup/w/                               # incremental backup
worldfs status /mnt/w                                      # why an edit was refused
mount \-t fuse.worldfs ~/.minetest/worlds/w /mnt/w \-o ro    # as sshfs (the Debian package)
worldfs unmount /mnt/w
.fi
.SH FILES
.TP
$XDG_STATE_HOME/worldfs/worldfs.log
the daemon's log (or --log-file); WORLDFS_STATE_DIR overrides the folder
.TP
/sbin/mount.fuse.worldfs, /sbin/umount.fuse.worldfs
mount(8)'s and umount(8)'s helpers (the Debian package): mount \-t fuse.worldfs WORLD MNT
\-o OPTIONS and fstab lines of type fuse.worldfs mount through fuse3's mount.fuse3, and
umount MNT then waits for the commits as worldfs unmount does
.TP
$XDG_RUNTIME_DIR/worldfs/HASH.pid, HASH.sock
a running daemon's pid and the socket worldfs status asks (root's in /run/worldfs)
.TP
$XDG_STATE_HOME/worldfs/*.mtimes.sqlite
modification times of blocks edited through worldfs (never stored in the world)
.TP
$XDG_STATE_HOME/worldfs/*.summaries.sqlite
Luanti block summaries: the sizes of a block's files, so a later mount lists unchanged
blocks without decoding them (a cache: safe to delete while nothing is mounted)
.TP
$XDG_STATE_HOME/worldfs/unsaved/TIME\-PID/PATH
text whose commit failed, saved at unmount (mode 0600)
.TP
$XDG_STATE_HOME/worldfs/held/PID/N/PATH
large held text of a running daemon for the mount's PATH (moved out of memory; the next
mount moves a killed daemon's to unsaved/TIME\-PID\-ended/ and names each file in its log)
.SH "EXIT STATUS"
0 on success; 1 on any error, from check when an object is broken or a disk damaged, and
from unmount when text could not be committed. status: 0 nothing held or failing, 1 texts
held or the store failing, 2 no daemon answers for the mount point.
.SH "SEE ALSO"
fusermount3(1), rsync(1), minetestserver(6)
"#;

/// The man page as roff.
pub fn render() -> Vec<u8> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    let man = Man::new(cmd.clone()).date("2026-11-21");
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    // The subcommands are sections of this page (there are no worldfs-mount(1) pages).
    out.extend_from_slice(b".SH SUBCOMMANDS\n");
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        out.extend_from_slice(
            format!(
                ".TP\n\\fBworldfs {}\\fR\n{}\n",
                sub.get_name(),
                sub.get_about()
                    .map(|a| a.to_string().replace('-', "\\-"))
                    .unwrap_or_default()
            )
            .as_bytes(),
        );
    }
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        out.extend_from_slice(
            format!(".SH \"WORLDFS {}\"\n", sub.get_name().to_uppercase()).as_bytes(),
        );
        if let Some(about) = sub.get_about() {
            out.extend_from_slice(format!("{about}\n").as_bytes());
        }
        let sub_man = Man::new(sub.clone().bin_name(format!("worldfs {}", sub.get_name())));
        // The synopsis names each argument (clap_mangen's leaves option values unnamed); the
        // options below give each option's value.
        let mut syn = format!("\\fBworldfs {}\\fR [\\fIOPTIONS\\fR]", sub.get_name());
        for arg in sub.get_positionals() {
            let name = arg
                .get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| arg.get_id().to_string(), |v| v.to_string());
            syn.push_str(&format!(" <\\fI{name}\\fR>"));
        }
        let syn = format!("{syn}\n.br\n").into_bytes();
        let mut opts = Vec::new();
        let _ = sub_man.render_options_section(&mut opts);
        let strip = |v: Vec<u8>| {
            String::from_utf8_lossy(&v)
                .lines()
                .filter(|l| !l.starts_with(".SH"))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        out.extend_from_slice(b".PP\n");
        out.extend_from_slice(strip(syn).as_bytes());
        out.extend_from_slice(strip(opts).as_bytes());
    }
    out.extend_from_slice(EXTRA.as_bytes());
    let _ = man.render_version_section(&mut out);
    out
}
