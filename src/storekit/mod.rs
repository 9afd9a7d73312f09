//! The store toolkit: what the games' stores and trees share to keep their files, below the
//! core and apart from it. Atomic replacement of a file and the clean-up of what a crash left
//! ([`replace`]), SQLite journals ([`journal`]), the times recorded beside a store
//! ([`mtimes`]), the cache of decoded objects ([`objects`]), scans that retry until stable
//! ([`scan`]), the whole-store answers of `index/` kept between questions ([`answers`]), the lock a writer takes on a store ([`lock`]), a world's real folder shown as
//! it is on disk ([`folder`]), a rate limit for "did the store change?" checks
//! ([`throttle`]) and the names tools use for temporaries ([`scratch`]).
//!
//! Nothing here imports the core's implementation (`crate::vfs` but its [`Tree`] contract
//! types, which [`folder`] serves): stores use the toolkit without knowing the core exists.
//!
//! [`Tree`]: crate::vfs::Tree

pub mod answers;
pub mod folder;
pub mod journal;
pub mod lock;
pub mod mtimes;
pub mod objects;
pub mod replace;
pub mod scan;
pub mod scratch;
pub mod throttle;
