//! Whole-store answers kept between questions: what every game's `index/` shares. A
//! question is answered from the kept answer while the store is at the version that answer
//! was scanned at; otherwise one scan at a time (a question asked during a scan waits for
//! its answer) builds a new one, scanned again when the store changed while it ran (a few
//! tries, then `EAGAIN`). An answer is kept only when the game says it fits its budget, and
//! the mount's own commits bring the kept answer up to date instead of dropping it.
//!
//! Each game supplies only what differs: the version of its store, what a scan reads and
//! how an answer names its objects ([`Answer`]), and whether an answer is kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// How many scans a question runs before it gives up on a store that keeps changing.
pub const SCAN_TRIES: usize = 3;

/// A whole-store answer of a game.
pub trait Answer: Clone + Default {
    /// Marks it true for store version `version`, as the `generation`th answer (the
    /// folders of `index/` show the generation in their mtime, since the kernel keeps a
    /// folder's listing until its mtime changes).
    fn stamp(&mut self, version: u64, generation: u64);
}

/// The kept answer and the store version it is true for (`None`: none kept).
struct Kept<A> {
    version: Option<u64>,
    answer: Arc<A>,
}

impl<A: Default> Default for Kept<A> {
    fn default() -> Kept<A> {
        Kept {
            version: None,
            answer: Arc::default(),
        }
    }
}

/// What a question starts a scan from, given the answer kept for the store's version now.
pub enum Start<A> {
    /// The kept answer answers it.
    Answered(Arc<A>),
    /// A scan completes this answer (a copy of the kept one, or an empty one).
    From(A),
}

/// The answers of one store (see the module documentation).
pub struct Answers<A> {
    kept: Mutex<Kept<A>>,
    /// One scan at a time.
    scanning: Mutex<()>,
    scans: AtomicU64,
    generations: AtomicU64,
}

impl<A: Answer> Default for Answers<A> {
    fn default() -> Answers<A> {
        Answers {
            kept: Mutex::default(),
            scanning: Mutex::new(()),
            scans: AtomicU64::new(0),
            generations: AtomicU64::new(0),
        }
    }
}

impl<A: Answer> Answers<A> {
    fn kept(&self) -> Result<MutexGuard<'_, Kept<A>>> {
        crate::error::lock_named(&self.kept, "index")
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The generation of the latest answer (each scan and each commit of ours makes one).
    pub fn generation(&self) -> u64 {
        self.generations.load(Ordering::Relaxed)
    }

    /// How many scans ran so far.
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }

    /// Answers a question about the store `what` names (in messages: "the map").
    /// `version` gives the store's version now, with what a scan of that version needs;
    /// `start` says what the kept answer of that version (if any) gives; `scan` completes
    /// an answer for that version; `now` gives the store's version after it (a change
    /// meanwhile means scanning again); `keep` says whether the new answer is kept.
    pub fn answer<C>(
        &self,
        what: &str,
        mut version: impl FnMut() -> Result<(u64, C)>,
        start: impl Fn(Option<&Arc<A>>) -> Start<A>,
        mut scan: impl FnMut(&mut A, C) -> Result<()>,
        mut now: impl FnMut() -> Result<u64>,
        keep: impl Fn(&A) -> bool,
    ) -> Result<Arc<A>> {
        let _one = crate::error::lock_named(&self.scanning, "index scan")?;
        for _ in 0..SCAN_TRIES {
            let (at, needs) = version()?;
            let mut base = {
                let kept = self.kept()?;
                let current = (kept.version == Some(at)).then_some(&kept.answer);
                match start(current) {
                    Start::Answered(answer) => return Ok(answer),
                    Start::From(base) => base,
                }
            };
            let started = std::time::Instant::now();
            self.scans.fetch_add(1, Ordering::Relaxed);
            scan(&mut base, needs)?;
            base.stamp(at, self.next_generation());
            log::info!(
                "index: scanned {what} in {:.3} s",
                started.elapsed().as_secs_f64()
            );
            let answer = Arc::new(base);
            let mut kept = self.kept()?;
            if now()? != at {
                log::debug!("index: {what} changed during the scan; scanning again");
                continue;
            }
            *kept = if keep(&answer) {
                Kept {
                    version: Some(at),
                    answer: answer.clone(),
                }
            } else {
                Kept::default()
            };
            return Ok(answer);
        }
        Err(Error::new(
            libc::EAGAIN,
            format!("{what} kept changing while it was scanned; try again"),
        ))
    }

    /// Our commit took the store from version `before` to `after`: `follow` brings the kept
    /// answer up to date when it was true before; any other is dropped, unless a question
    /// already made it for `after`.
    pub fn committed(&self, before: u64, after: u64, follow: impl FnOnce(&mut A)) {
        let Ok(mut kept) = self.kept() else { return };
        if kept.version != Some(before) {
            if kept.version != Some(after) {
                *kept = Kept::default();
            }
            return;
        }
        // Copied only while a question still holds the previous answer.
        let answer = Arc::make_mut(&mut kept.answer);
        follow(answer);
        answer.stamp(after, self.next_generation());
        kept.version = Some(after);
    }
}

/// Whether an answer of `weight` bytes is kept within `budget` (logged when it is not).
pub fn fits(weight: usize, budget: usize) -> bool {
    let fits = weight <= budget;
    if !fits {
        log::info!("index: the answer ({weight} bytes) is larger than the cache budget; not kept");
    }
    fits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default, Debug, PartialEq)]
    struct Count {
        n: u32,
        version: u64,
        generation: u64,
    }

    impl Answer for Count {
        fn stamp(&mut self, version: u64, generation: u64) {
            self.version = version;
            self.generation = generation;
        }
    }

    fn ask(answers: &Answers<Count>, store: &std::cell::Cell<u64>, n: u32) -> Result<Arc<Count>> {
        answers.answer(
            "the store",
            || Ok((store.get(), ())),
            |kept| match kept {
                Some(a) => Start::Answered(a.clone()),
                None => Start::From(Count::default()),
            },
            |a, ()| {
                a.n = n;
                Ok(())
            },
            || Ok(store.get()),
            |_| true,
        )
    }

    #[test]
    fn an_answer_is_kept_for_its_version_and_followed_by_our_commits() {
        let answers = Answers::<Count>::default();
        let store = std::cell::Cell::new(7);
        assert_eq!(ask(&answers, &store, 1).unwrap().n, 1);
        assert_eq!(ask(&answers, &store, 2).unwrap().n, 1, "kept");
        assert_eq!(answers.scans(), 1);
        // Our commit 7 → 8 follows it; another program's change (9) drops it.
        answers.committed(7, 8, |a| a.n += 10);
        store.set(8);
        let a = ask(&answers, &store, 3).unwrap();
        assert_eq!((a.n, a.version, answers.scans()), (11, 8, 1));
        store.set(9);
        assert_eq!(ask(&answers, &store, 4).unwrap().n, 4);
        assert_eq!(answers.scans(), 2);
        // A commit from a version the kept answer is not true for drops it.
        answers.committed(5, 6, |a| a.n += 100);
        assert_eq!(ask(&answers, &store, 5).unwrap().n, 5);
    }

    #[test]
    fn a_store_that_keeps_changing_gives_eagain_after_the_tries() {
        let answers = Answers::<Count>::default();
        let store = std::cell::Cell::new(0);
        let e = answers
            .answer(
                "the store",
                || Ok((store.get(), ())),
                |_| Start::From(Count::default()),
                |_, ()| Ok(()),
                || {
                    store.set(store.get() + 1);
                    Ok(store.get())
                },
                |_| true,
            )
            .unwrap_err();
        assert_eq!(e.errno(), libc::EAGAIN);
        assert_eq!(answers.scans(), SCAN_TRIES as u64);
    }
}
