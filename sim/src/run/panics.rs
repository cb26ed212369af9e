//! Panics during a run: a simulated process death is kept off stderr, and every
//! other panic is kept for the run's verdict. A runtime task that panics dies
//! quietly inside the executor and its work is never done, so the run must say so
//! itself ([`crate::check::judge_panics`]).

use std::cell::RefCell;
use std::sync::Once;

use crate::fault::SimulatedCrash;

/// Keeps simulated process deaths off stderr; every other panic is kept for the
/// run on its thread and reported as usual.
pub(super) fn install_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<SimulatedCrash>().is_none() {
                note_panic(info);
                previous(info);
            }
        }));
    });
}

thread_local! {
    /// The panics on this thread since the run on it began: a seed runs on one
    /// thread from its first boot to its verdict.
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Keeps a panic for the run on this thread.
fn note_panic(info: &std::panic::PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    let at = info
        .location()
        .map(|at| format!(" at {}:{}", at.file(), at.line()))
        .unwrap_or_default();
    let noted = format!("{message}{at}");
    // A panic while the list is borrowed (there is none) or after the thread's
    // storage is gone is left to the previous hook's report.
    let _ = PANICS.try_with(|panics| {
        if let Ok(mut panics) = panics.try_borrow_mut() {
            panics.push(noted);
        }
    });
}

/// The panics noted on this thread since the last call.
pub(super) fn take() -> Vec<String> {
    PANICS.with(|panics| std::mem::take(&mut *panics.borrow_mut()))
}

/// What a boot that was run under `catch_unwind` returned, or `None` when the code
/// under test panicked out of it (the panic noted for the verdict).
///
/// A panic in a spawned runtime task dies inside the executor, but one in the
/// coordinator's own loop, which the boot polls itself, unwinds through the boot;
/// and a spawned task that panics holding the session's lock poisons it, so the
/// coordinator's next look at its tasks panics too. Contained, the run goes on to
/// its witnesses and its verdict, which fails the seed with its repro line, and a
/// sweep goes on to the next seed. A simulated process death unwinds on, to
/// whoever placed it.
pub(super) fn contained<T>(booted: std::thread::Result<T>) -> Option<T> {
    match booted {
        Ok(end) => Some(end),
        Err(payload) if payload.downcast_ref::<SimulatedCrash>().is_some() => {
            std::panic::resume_unwind(payload)
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_out_of_a_boot_ends_it_and_is_kept_for_the_verdict() {
        // Goal: a runtime panic that unwinds out of a boot fails its seed instead
        // of stopping the sweep, and a simulated crash still unwinds. Method: a
        // boot that returns, one that panics, and one that dies a simulated death.
        install_hook();
        take();
        assert_eq!(contained(std::panic::catch_unwind(|| 7)), Some(7));
        let panicked = std::panic::catch_unwind(|| -> u32 { panic!("a live task can be killed") });
        assert_eq!(contained(panicked), None);
        let panics = take();
        assert_eq!(panics.len(), 1, "{panics:?}");
        assert!(panics[0].starts_with("a live task can be killed at "));
        let crashed = std::panic::catch_unwind(|| {
            contained(std::panic::catch_unwind(|| -> u32 {
                std::panic::panic_any(SimulatedCrash)
            }))
        });
        assert!(crashed
            .expect_err("a simulated crash unwinds on")
            .downcast_ref::<SimulatedCrash>()
            .is_some());
        assert!(take().is_empty());
    }

    #[test]
    fn a_panic_during_a_run_is_kept_for_its_verdict_and_a_simulated_crash_is_not() {
        // Goal: a runtime task that panics inside the executor fails the run rather
        // than dying quietly. Method: the run's hook installed, one panic caught as
        // an executor would catch it, and one simulated crash; only the first is
        // kept, with its message and location.
        install_hook();
        take();
        let _ = std::panic::catch_unwind(|| panic!("a guard's invariant broke"));
        let _ = std::panic::catch_unwind(|| std::panic::panic_any(SimulatedCrash));
        let panics = take();
        assert_eq!(panics.len(), 1, "{panics:?}");
        assert!(
            panics[0].starts_with("a guard's invariant broke at "),
            "{}",
            panics[0]
        );
        assert!(panics[0].contains("run/panics.rs"), "{}", panics[0]);
        assert!(take().is_empty());
    }
}
