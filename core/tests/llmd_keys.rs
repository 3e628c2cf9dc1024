//! kvidx's llm-d request keys against the keys an independent Go implementation
//! (tests/llmd-keys: hash/fnv and fxamacker/cbor's canonical mode) wrote to
//! tests/fixtures/llmd_keys.txt.

use kvidx::llmd;

/// One golden case: seed, model, block size, tokens, keys.
struct Case {
    seed: String,
    model: String,
    block_size: usize,
    tokens: Vec<u32>,
    keys: Vec<u64>,
}

/// Splits off a leading Go-quoted string (no escapes in the golden file).
fn quoted(s: &str) -> (String, &str) {
    let s = s.trim_start();
    assert!(s.starts_with('"'), "expected a quoted string at {s:?}");
    let end = s[1..].find('"').expect("closing quote") + 1;
    let text = &s[1..end];
    assert!(!text.contains('\\'), "escapes are not expected: {text:?}");
    (text.to_owned(), &s[end + 1..])
}

fn cases() -> Vec<Case> {
    let path = format!(
        "{}/../tests/fixtures/llmd_keys.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cases: Vec<Case> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (seed, rest) = quoted(line);
            let (model, rest) = quoted(rest);
            let f: Vec<&str> = rest.split_whitespace().collect();
            assert_eq!(f.len(), 4, "{line}");
            let first: u32 = f[1].parse().unwrap();
            let n: u32 = f[2].parse().unwrap();
            Case {
                seed,
                model,
                block_size: f[0].parse().unwrap(),
                tokens: (0..n).map(|i| first + i).collect(),
                keys: f[3]
                    .split(',')
                    .map(|k| u64::from_str_radix(k, 16).unwrap())
                    .collect(),
            }
        })
        .collect();
    assert!(cases.len() >= 8, "{path} holds {} cases", cases.len());
    cases
}

#[test]
fn request_keys_match_the_independent_go_implementation() {
    for c in cases() {
        let keys = llmd::request_keys(&c.tokens, c.block_size, &c.seed, &c.model);
        assert_eq!(keys, c.keys, "seed {:?} model {:?}", c.seed, c.model);
    }
}
