//! The disk files of the TEVd family and their transactions.
//!
//! - [`format`]: which member of the family a file is, from its first bytes;
//! - [`tvda`]: a TVDA disk, read entry by entry, changed by crash-safe appends or rewrites;
//! - [`tevd`]: a TEVD disk as a directory tree, changed by one crash-safe rewrite;
//! - [`compact`]: `worldfs compact`, a TVDA disk rewritten without dead entries.

pub mod compact;
pub mod format;
pub mod tevd;
pub mod tvda;
