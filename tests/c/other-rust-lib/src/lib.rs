//! A stand-in for another Rust static library in the same C program as libkvidx.a. It uses
//! the same parts of std as kvidx does (allocation, threads, formatting, panics caught at the
//! boundary), so both archives carry their own copy of them.

use std::panic::catch_unwind;

/// Sums `1..=n` on a spawned thread; returns `u64::MAX` if anything failed.
#[no_mangle]
pub extern "C" fn other_sum_on_thread(n: u32) -> u64 {
    catch_unwind(|| {
        let values: Vec<u64> = (1..=u64::from(n)).collect();
        std::thread::spawn(move || values.iter().sum::<u64>())
            .join()
            .unwrap_or(u64::MAX)
    })
    .unwrap_or(u64::MAX)
}

/// Panics inside and catches it; returns 1 when the panic was caught.
#[no_mangle]
pub extern "C" fn other_caught_panic() -> u32 {
    let caught = catch_unwind(|| {
        let text = format!("other_rust_lib: a deliberate panic {}", 42);
        panic!("{text}");
    });
    u32::from(caught.is_err())
}
