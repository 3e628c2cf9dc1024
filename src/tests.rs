//! Rust-side checks of the C ABI; the C programs under `tests/c/` test it from C.

use std::ptr;

use super::*;

/// Every source file of this module but this one (read at test time, so new files are
/// covered too).
fn sources() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("src is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .filter(|path| !path.ends_with("tests.rs"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                std::fs::read_to_string(&path).expect("a readable source file"),
            )
        })
        .collect();
    files.sort();
    files
}

/// The functions of docs/contract.md section 2, the test hook and the additions since;
/// other files may add more.
const CONTRACT_FUNCTIONS: &[&str] = &[
    "kvidx_abi_version",
    "kvidx_apply_event",
    "kvidx_apply_events",
    "kvidx_config_default",
    "kvidx_debug_panic",
    "kvidx_find_matches",
    "kvidx_flush",
    "kvidx_free",
    "kvidx_get_stats",
    "kvidx_hash_tokens",
    "kvidx_new",
    "kvidx_remove_worker",
    "kvidx_remove_worker_dp_rank",
    "kvidx_seq_hashes",
    "kvidx_status_str",
    "kvidx_version",
    "kvidx_new_with_limits",
    "kvidx_queue_limits_default",
    "kvidx_apply_engine_batch",
    "kvidx_engine_feed_new",
    "kvidx_engine_feed_free",
    "kvidx_engine_feed_apply",
    "kvidx_engine_feed_stats",
    "kvidx_engine_feed_forget",
    "kvidx_engine_feed_remove_worker",
    "kvidx_engine_feed_remove_worker_dp_rank",
    "kvidx_engine_feed_publishers",
    "kvidx_apply_events_at",
    "kvidx_apply_engine_batch_at",
    "kvidx_engine_feed_apply_at",
    "kvidx_watermark",
    "kvidx_get_replica_stats",
    "kvidx_snapshot_write",
    "kvidx_snapshot_restore",
    "kvidx_snapshot_write_file",
    "kvidx_snapshot_restore_file",
    "kvidx_engine_feed_next_seq",
    "kvidx_engine_feed_start_stats",
];

#[test]
fn only_free_functions_take_a_mutable_handle() {
    // Every handle parameter is const (callable concurrently) except the free functions'.
    let header = include_str!("../include/kvidx.h");
    for handle in ["struct kvidx_indexer *", "struct kvidx_engine_feed *"] {
        for (at, _) in header.match_indices(handle) {
            let line_start = header[..at].rfind('\n').map_or(0, |i| i + 1);
            let line =
                &header[line_start..header[at..].find('\n').map_or(header.len(), |i| at + i)];
            let is_const = header[..at].ends_with("const ");
            let is_out = header[at + handle.len()..].starts_with('*');
            let is_free = line.contains("kvidx_free(") || line.contains("kvidx_engine_feed_free(");
            assert!(is_const || is_out || is_free, "non-const handle: {line}");
        }
    }
}

#[test]
fn every_exported_function_body_is_one_export_invocation() {
    let marker = concat!("extern \"C\"", " fn ");
    let mut names = Vec::new();
    for (file, text) in sources() {
        let mut rest = text.as_str();
        while let Some(at) = rest.find(marker) {
            let after = &rest[at + marker.len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let body = &after[after.find('{').expect("a body")..];
            let inner = body[1..].trim_start();
            assert!(
                inner.starts_with("export!("),
                "{file}: {name} does not start its body with export!(...)"
            );
            assert!(
                rest[..at].trim_end().ends_with("pub unsafe")
                    || rest[..at].trim_end().ends_with("pub"),
                "{file}: {name} is not public"
            );
            names.push(name);
            rest = after;
        }
        assert_eq!(
            text.matches("#[no_mangle]").count(),
            text.matches(marker).count(),
            "{file}: every exported function has #[no_mangle], and nothing else does"
        );
    }
    for function in CONTRACT_FUNCTIONS {
        assert!(
            names.iter().any(|name| name == function),
            "{function} is missing"
        );
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        names.len(),
        "an exported name is defined twice"
    );
}

fn sync_indexer() -> *mut kvidx_indexer {
    let config = kvidx_config {
        event_threads: 0,
        ..kvidx_config_default()
    };
    let mut handle = ptr::null_mut();
    // SAFETY: valid config and out pointers.
    let status = unsafe { kvidx_new(&config, &mut handle) };
    assert_eq!(status, kvidx_status::KVIDX_OK);
    assert!(!handle.is_null());
    handle
}

fn stored(worker_id: u64, blocks: &[kvidx_block]) -> kvidx_event {
    kvidx_event {
        kind: kvidx_event_kind::KVIDX_EVENT_STORED as u32,
        worker_id,
        dp_rank: 0,
        event_id: 0,
        has_parent: 0,
        parent_seq_hash: 0,
        blocks: blocks.as_ptr(),
        num_blocks: blocks.len(),
        seq_hashes: ptr::null(),
        num_seq_hashes: 0,
    }
}

#[test]
fn panic_is_contained_and_poisons_the_handle() {
    let handle = sync_indexer();
    // SAFETY: a live handle throughout, freed once at the end.
    unsafe {
        assert_eq!(kvidx_debug_panic(handle), kvidx_status::KVIDX_ERR_PANIC);
        assert_eq!(kvidx_flush(handle), kvidx_status::KVIDX_ERR_POISONED);
        assert_eq!(kvidx_debug_panic(handle), kvidx_status::KVIDX_ERR_POISONED);
        let mut stats = std::mem::MaybeUninit::<kvidx_stats>::uninit();
        assert_eq!(
            kvidx_get_stats(handle, stats.as_mut_ptr()),
            kvidx_status::KVIDX_ERR_POISONED
        );
        kvidx_free(handle);
    }
}

#[test]
fn matches_buffer_too_small_leaves_out_untouched() {
    let handle = sync_indexer();
    let blocks = [kvidx_block {
        local_hash: 7,
        seq_hash: 70,
    }];
    // SAFETY: a live handle and valid arrays throughout.
    unsafe {
        for worker in [2, 1] {
            let event = stored(worker, &blocks);
            assert_eq!(kvidx_apply_event(handle, &event), kvidx_status::KVIDX_OK);
        }
        let sentinel = kvidx_match {
            worker_id: 99,
            dp_rank: 9,
            depth: 9,
        };
        let mut out = [sentinel; 1];
        let mut len = 0usize;
        let query = [7u64, 8];
        let status = kvidx_find_matches(handle, query.as_ptr(), 2, out.as_mut_ptr(), 1, &mut len);
        assert_eq!(status, kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
        assert_eq!((len, out[0]), (2, sentinel));
        let mut out = [sentinel; 2];
        let status = kvidx_find_matches(handle, query.as_ptr(), 2, out.as_mut_ptr(), 2, &mut len);
        assert_eq!(status, kvidx_status::KVIDX_OK);
        assert_eq!(len, 2);
        assert_eq!((out[0].worker_id, out[0].depth), (1, 1));
        assert_eq!((out[1].worker_id, out[1].depth), (2, 1));
        kvidx_free(handle);
    }
}

#[test]
fn malformed_batch_applies_nothing() {
    let handle = sync_indexer();
    let blocks = [kvidx_block {
        local_hash: 1,
        seq_hash: 10,
    }];
    let mut bad = stored(5, &blocks);
    bad.has_parent = 2;
    let batch = [stored(4, &blocks), bad];
    // SAFETY: a live handle and valid arrays throughout.
    unsafe {
        assert_eq!(
            kvidx_apply_events(handle, batch.as_ptr(), batch.len()),
            kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
        );
        let mut stats = std::mem::MaybeUninit::<kvidx_stats>::uninit();
        assert_eq!(
            kvidx_get_stats(handle, stats.as_mut_ptr()),
            kvidx_status::KVIDX_OK
        );
        let stats = stats.assume_init();
        assert_eq!((stats.events_applied, stats.workers), (0, 0));
        kvidx_free(handle);
    }
}

#[test]
fn seq_hashes_in_place_match_the_hashing_contract() {
    let tokens: Vec<u32> = (1..=12).collect();
    let mut hashes = [0u64; 3];
    let mut len = 0usize;
    // SAFETY: valid arrays; `kvidx_seq_hashes` allows out == in.
    unsafe {
        assert_eq!(
            kvidx_hash_tokens(tokens.as_ptr(), 12, 4, hashes.as_mut_ptr(), 3, &mut len),
            kvidx_status::KVIDX_OK
        );
        assert_eq!(len, 3);
        assert_eq!(
            kvidx_seq_hashes(hashes.as_ptr(), 3, hashes.as_mut_ptr()),
            kvidx_status::KVIDX_OK
        );
    }
    assert_eq!(
        hashes,
        [
            14643705804678351452,
            4945711292740353085,
            12583592247330656132
        ]
    );
}

#[test]
fn rust_errors_map_to_their_status_codes() {
    use kvidx_core::Error;
    assert_eq!(
        c_convert::status_of(Error::InvalidArgument("x")),
        kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        c_convert::status_of(Error::ParentNotFound),
        kvidx_status::KVIDX_ERR_PARENT_NOT_FOUND
    );
    assert_eq!(
        c_convert::status_of(Error::ShutDown),
        kvidx_status::KVIDX_ERR_SHUT_DOWN
    );
    assert_eq!(
        c_convert::status_of(Error::Malformed("x")),
        kvidx_status::KVIDX_ERR_MALFORMED
    );
    assert_eq!(
        c_convert::status_of(Error::Io(std::io::ErrorKind::Other)),
        kvidx_status::KVIDX_ERR_IO
    );
    for code in 0..=10u32 {
        // SAFETY: kvidx_status_str returns a static NUL-terminated string.
        let text = unsafe { std::ffi::CStr::from_ptr(kvidx_status_str(code)) };
        assert!(text.to_str().unwrap().starts_with("KVIDX_"), "{code}");
    }
    let text = |code: u32| {
        // SAFETY: kvidx_status_str returns a static NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(kvidx_status_str(code)) }
            .to_str()
            .unwrap()
    };
    assert!(text(kvidx_status::KVIDX_ERR_MALFORMED as u32).starts_with("KVIDX_ERR_MALFORMED:"));
    assert!(text(kvidx_status::KVIDX_ERR_TOO_LARGE as u32).starts_with("KVIDX_ERR_TOO_LARGE:"));
    assert!(text(kvidx_status::KVIDX_ERR_IO as u32).starts_with("KVIDX_ERR_IO:"));
    assert_eq!(text(11), "unknown kvidx status code");
    assert_eq!(text(u32::MAX), "unknown kvidx status code");
}

#[test]
fn status_texts_come_from_one_list_covering_every_value_once() {
    // The list names every status once, values 0..N without holes, each text "NAME: ...".
    let all = kvidx_status::ALL;
    for (i, status) in all.iter().enumerate() {
        assert_eq!(*status as u32, i as u32, "{status:?}");
        let text = status.text().to_str().unwrap();
        assert!(text.starts_with(&format!("{status:?}: ")), "{text}");
        assert!(text.len() > format!("{status:?}: ").len(), "{text}");
    }
    assert_eq!(all.last(), Some(&kvidx_status::KVIDX_ERR_IO));
}

#[test]
fn queue_limits_are_validated_never_aborting() {
    let config = kvidx_config {
        event_threads: 2,
        ..kvidx_config_default()
    };
    let default = kvidx_queue_limits_default();
    assert_eq!((default.queue_capacity, default.queue_bytes), (0, 0));
    let bad = [(1u64 << 31, 0u64), (u64::MAX, 0), (1 << 20 | 1, 0)];
    // SAFETY: valid pointers throughout; the handles created are freed once.
    unsafe {
        for (queue_capacity, queue_bytes) in bad {
            let limits = kvidx_queue_limits {
                queue_capacity,
                queue_bytes,
            };
            let mut handle = ptr::null_mut();
            assert_eq!(
                kvidx_new_with_limits(&config, &limits, &mut handle),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
                "{queue_capacity} {queue_bytes}"
            );
            assert!(handle.is_null(), "out written only on success");
        }
        let mut handle = ptr::null_mut();
        assert_eq!(
            kvidx_new_with_limits(ptr::null(), ptr::null(), ptr::null_mut()),
            kvidx_status::KVIDX_ERR_NULL_POINTER
        );
        let bad_threads = kvidx_config {
            event_threads: 1025,
            ..config
        };
        assert_eq!(
            kvidx_new_with_limits(&bad_threads, ptr::null(), &mut handle),
            kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
        );
        // A tiny budget still accepts events (one at a time) and applies all of them.
        let limits = kvidx_queue_limits {
            queue_capacity: 1,
            queue_bytes: 1,
        };
        assert_eq!(
            kvidx_new_with_limits(&config, &limits, &mut handle),
            kvidx_status::KVIDX_OK
        );
        let blocks = [kvidx_block {
            local_hash: 3,
            seq_hash: 30,
        }];
        for worker in 0..50 {
            let event = stored(worker, &blocks);
            assert_eq!(kvidx_apply_event(handle, &event), kvidx_status::KVIDX_OK);
        }
        assert_eq!(kvidx_flush(handle), kvidx_status::KVIDX_OK);
        let mut stats = std::mem::MaybeUninit::<kvidx_stats>::uninit();
        assert_eq!(
            kvidx_get_stats(handle, stats.as_mut_ptr()),
            kvidx_status::KVIDX_OK
        );
        assert_eq!(stats.assume_init().workers, 50);
        kvidx_free(handle);
        // NULL limits: the defaults.
        let mut handle = ptr::null_mut();
        assert_eq!(
            kvidx_new_with_limits(&config, ptr::null(), &mut handle),
            kvidx_status::KVIDX_OK
        );
        kvidx_free(handle);
    }
}

/// A snapshot sink appending to a `Vec<u8>` (it never fails; `failing_sink` always does).
unsafe extern "C" fn vec_sink(user: *mut std::ffi::c_void, data: *const u8, len: usize) -> i32 {
    // SAFETY: the tests pass a `Vec<u8>` as `user`; `data` is readable for `len` bytes.
    let (out, data) = unsafe {
        (
            &mut *user.cast::<Vec<u8>>(),
            std::slice::from_raw_parts(data, len),
        )
    };
    out.extend_from_slice(data);
    0
}

unsafe extern "C" fn failing_sink(_: *mut std::ffi::c_void, _: *const u8, _: usize) -> i32 {
    -1
}

/// A snapshot source reading from a `&[u8]` cursor.
unsafe extern "C" fn slice_source(
    user: *mut std::ffi::c_void,
    buf: *mut u8,
    cap: usize,
    got: *mut usize,
) -> i32 {
    // SAFETY: the tests pass a `&[u8]` as `user`; `buf` is writable for `cap` bytes and `got`
    // is writable.
    unsafe {
        let input = &mut *user.cast::<&[u8]>();
        let n = input.len().min(cap);
        std::ptr::copy_nonoverlapping(input.as_ptr(), buf, n);
        *input = &input[n..];
        *got = n;
    }
    0
}

#[test]
fn snapshots_round_trip_through_callbacks_with_watermarks() {
    let ix = sync_indexer();
    let blocks = [
        kvidx_block {
            local_hash: 1,
            seq_hash: 10,
        },
        kvidx_block {
            local_hash: 2,
            seq_hash: 20,
        },
    ];
    let events = [stored(5, &blocks), stored(6, &blocks[..1])];
    // SAFETY: live handle, valid events and out pointers throughout.
    unsafe {
        assert_eq!(
            kvidx_apply_events_at(ix, events.as_ptr(), 2, 3),
            kvidx_status::KVIDX_OK
        );
        assert_eq!(
            kvidx_apply_events_at(ix, events.as_ptr(), 2, 3),
            kvidx_status::KVIDX_OK
        );
        let mut rs = std::mem::zeroed::<kvidx_replica_stats>();
        assert_eq!(kvidx_get_replica_stats(ix, &mut rs), kvidx_status::KVIDX_OK);
        assert_eq!(
            (rs.batches_applied, rs.batches_skipped, rs.events_skipped),
            (2, 2, 2)
        );
        let mut bytes: Vec<u8> = Vec::new();
        let mut info = std::mem::zeroed::<kvidx_snapshot_info>();
        let user = (&mut bytes as *mut Vec<u8>).cast();
        assert_eq!(
            kvidx_snapshot_write(ix, Some(vec_sink), user, &mut info),
            kvidx_status::KVIDX_OK
        );
        assert_eq!(
            (info.workers, info.blocks, info.bytes),
            (2, 3, bytes.len() as u64)
        );
        assert_eq!((info.min_watermark, info.max_watermark), (3, 3));
        assert_eq!(
            kvidx_snapshot_write(ix, Some(failing_sink), ptr::null_mut(), ptr::null_mut()),
            kvidx_status::KVIDX_ERR_IO
        );
        let copy = sync_indexer();
        let mut input: &[u8] = &bytes;
        let user = (&mut input as *mut &[u8]).cast();
        assert_eq!(
            kvidx_snapshot_restore(copy, Some(slice_source), user, ptr::null_mut()),
            kvidx_status::KVIDX_OK
        );
        let mut w = 0;
        assert_eq!(kvidx_watermark(copy, 5, 0, &mut w), kvidx_status::KVIDX_OK);
        assert_eq!(w, 3);
        let mut out = [kvidx_match {
            worker_id: 0,
            dp_rank: 0,
            depth: 0,
        }; 4];
        let mut len = 0;
        let q = [1u64, 2];
        assert_eq!(
            kvidx_find_matches(copy, q.as_ptr(), 2, out.as_mut_ptr(), 4, &mut len),
            kvidx_status::KVIDX_OK
        );
        assert_eq!(
            (len, out[0].worker_id, out[0].depth, out[1].depth),
            (2, 5, 2, 1)
        );
        // Truncated input: malformed, the indexer left empty.
        let other = sync_indexer();
        let mut input: &[u8] = &bytes[..bytes.len() - 1];
        let user = (&mut input as *mut &[u8]).cast();
        assert_eq!(
            kvidx_snapshot_restore(other, Some(slice_source), user, ptr::null_mut()),
            kvidx_status::KVIDX_ERR_MALFORMED
        );
        let mut st = std::mem::zeroed::<kvidx_stats>();
        assert_eq!(kvidx_get_stats(other, &mut st), kvidx_status::KVIDX_OK);
        assert_eq!(st.workers, 0);
        kvidx_free(other);
        kvidx_free(copy);
        kvidx_free(ix);
    }
}
