//! Tests only: a hook that runs once inside a race window of the code under test (between a
//! store read and the cache insert, between a commit and a release), so a test can make the
//! other thread's step happen exactly there, deterministically.

use std::sync::Mutex;

type Step<T> = Box<dyn FnOnce(&T) + Send>;

/// One step to run, at most once, the next time the code reaches the window.
pub struct RaceHook<T>(Mutex<Option<Step<T>>>);

impl<T> Default for RaceHook<T> {
    fn default() -> Self {
        RaceHook(Mutex::new(None))
    }
}

impl<T> RaceHook<T> {
    /// Sets the step to run in the window.
    pub fn set(&self, step: impl FnOnce(&T) + Send + 'static) {
        if let Ok(mut s) = self.0.lock() {
            *s = Some(Box::new(step));
        }
    }

    /// Runs the step, if one is set (the code under test calls this in its window).
    pub fn run(&self, on: &T) {
        let step = self.0.lock().ok().and_then(|mut s| s.take());
        if let Some(step) = step {
            step(on);
        }
    }
}
