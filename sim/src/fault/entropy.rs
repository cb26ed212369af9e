//! The entropy adapter of the fault engine: task ids that come out twice.
//!
//! PROTOCOL.md §1 draws a task id as its type's prefix and 8 characters from
//! `0-9a-z`, each one draw from the runtime's entropy source, and requires a
//! collision to be drawn again. With 36^8 ids no run collides by chance, so the
//! redraw is a guard no seed would reach. A `task-id-collision` fault makes the
//! entropy repeat itself: the characters of the nth id draw come out as those of
//! an earlier one, as a source re-seeded the same way after a restart would give
//! them.
//!
//! An id draw is recognised by its shape: a run of 8 draws below 36. Nothing else
//! in the runtime draws below 36 (lock jitter draws below thousands of
//! microseconds), and the `task-id-redrawn` probe, which only a collision reaches,
//! fails the standard sweep's coverage if that ever changes.

use std::sync::{Arc, Mutex};

use coord_runtime::world::Entropy;

use super::{Fault, FaultBook};
use crate::check::{ID_ALPHABET, ID_BODY_LEN};

/// The task id draws of a run, across its boots, and the collisions scheduled
/// among them.
#[derive(Debug)]
pub struct IdDraws {
    book: FaultBook,
    state: Mutex<DrawState>,
}

#[derive(Debug, Default)]
struct DrawState {
    /// Each `task-id-collision` fault: its index in the schedule, its draw and the
    /// earlier draw it repeats (both from 1).
    collisions: Vec<(usize, u32, u32)>,
    /// The characters of every id drawn so far, as draws below 36.
    bodies: Vec<Vec<u64>>,
    /// The draws of the id being drawn.
    current: Vec<u64>,
    /// The earlier id the one being drawn repeats.
    repeating: Option<usize>,
}

impl IdDraws {
    /// The draws of a run whose schedule is `book`'s; `None` when it places no
    /// collision, so that runs without one draw straight from their source.
    pub fn of(book: &FaultBook) -> Option<Arc<Self>> {
        let collisions: Vec<(usize, u32, u32)> = book
            .schedule()
            .iter()
            .enumerate()
            .filter_map(|(index, fault)| match fault {
                Fault::TaskIdCollision { draw, repeats } => {
                    Some((index, *draw, repeats.unwrap_or(draw.saturating_sub(1))))
                }
                _ => None,
            })
            .collect();
        (!collisions.is_empty()).then(|| {
            Arc::new(Self {
                book: book.clone(),
                state: Mutex::new(DrawState {
                    collisions,
                    ..DrawState::default()
                }),
            })
        })
    }

    /// The next character draw of an id: `drawn` (the source's own, always taken so
    /// that the rest of the run draws what it would have), or the earlier id's
    /// character in its place when a collision fires for this id.
    fn character(&self, drawn: u64) -> u64 {
        let mut state = self.state.lock().expect("id draws poisoned");
        let state = &mut *state;
        if state.current.is_empty() {
            let draw = state.bodies.len() as u32 + 1;
            state.repeating = state
                .collisions
                .iter()
                .find(|&&(index, at, repeats)| {
                    at == draw
                        && (repeats as usize) <= state.bodies.len()
                        && self.book.fire_index(
                            index,
                            format!("task id draw {draw} repeats draw {repeats}"),
                        )
                })
                .map(|&(_, _, repeats)| repeats as usize - 1);
        }
        let character = match state.repeating {
            Some(earlier) => state.bodies[earlier][state.current.len()],
            None => drawn,
        };
        state.current.push(character);
        if state.current.len() == ID_BODY_LEN {
            let body = std::mem::take(&mut state.current);
            state.bodies.push(body);
            state.repeating = None;
        }
        character
    }
}

/// A boot's entropy, with the run's scheduled task-id collisions applied.
#[derive(Debug)]
pub struct CollidingEntropy {
    inner: Arc<dyn Entropy>,
    draws: Arc<IdDraws>,
}

impl CollidingEntropy {
    /// `inner`, whose id draws go through `draws`.
    pub fn new(inner: Arc<dyn Entropy>, draws: Arc<IdDraws>) -> Self {
        Self { inner, draws }
    }
}

impl Entropy for CollidingEntropy {
    fn next_u64(&self) -> u64 {
        self.inner.next_u64()
    }

    fn below(&self, bound: u64) -> u64 {
        let drawn = self.inner.below(bound);
        if bound == ID_ALPHABET.len() as u64 {
            self.draws.character(drawn)
        } else {
            drawn
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;
    use coord_runtime::world::{ChaChaEntropy, SystemClock};
    use std::collections::BTreeMap;

    fn id(entropy: &dyn Entropy) -> Vec<u64> {
        (0..ID_BODY_LEN)
            .map(|_| entropy.below(ID_ALPHABET.len() as u64))
            .collect()
    }

    #[test]
    fn the_scheduled_draw_repeats_the_earlier_one_once() {
        // Goal: draw 3 comes out as draw 1, every other draw (and every draw that
        // is not an id's) is the source's own, and the fault fires once.
        let schedule = vec![Fault::TaskIdCollision {
            draw: 3,
            repeats: Some(1),
        }];
        let book = FaultBook::new(
            schedule,
            BTreeMap::new(),
            Trace::new(Arc::new(SystemClock::new())),
        );
        let draws = IdDraws::of(&book).expect("a collision is scheduled");
        let colliding = CollidingEntropy::new(Arc::new(ChaChaEntropy::from_seed(7)), draws);
        let plain = ChaChaEntropy::from_seed(7);
        let first = id(&colliding);
        assert_eq!(first, id(&plain));
        assert_eq!(colliding.below(5_000), plain.below(5_000));
        let second = id(&colliding);
        assert_eq!(second, id(&plain));
        assert_ne!(first, second);
        assert_eq!(id(&colliding), first, "draw 3 repeats draw 1");
        let _ = id(&plain);
        assert_eq!(id(&colliding), id(&plain), "draw 4 is the source's own");
        assert!(!book.can_fire(0), "the collision fired");
    }

    #[test]
    fn a_run_without_a_collision_has_no_id_draws() {
        let book = FaultBook::new(
            Vec::new(),
            BTreeMap::new(),
            Trace::new(Arc::new(SystemClock::new())),
        );
        assert!(IdDraws::of(&book).is_none());
    }
}
