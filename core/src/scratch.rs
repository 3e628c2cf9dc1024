//! Per-thread scratch buffers, so that hot paths allocate nothing once warm.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Runs `f` with this thread's scratch value, or with a fresh one when it is unavailable
/// (already borrowed by an outer call on this thread, or the thread is being torn down).
pub fn with_scratch<T: Default + 'static, R>(
    key: &'static LocalKey<RefCell<T>>,
    f: impl FnOnce(&mut T) -> R,
) -> R {
    let mut f = Some(f);
    let reused = key.try_with(|cell| {
        let mut scratch = cell.try_borrow_mut().ok()?;
        let f = f.take()?;
        Some(f(&mut scratch))
    });
    match (reused, f) {
        (Ok(Some(result)), _) => result,
        (_, Some(f)) => f(&mut T::default()),
        (_, None) => unreachable!("the closure ran but gave no result"),
    }
}
