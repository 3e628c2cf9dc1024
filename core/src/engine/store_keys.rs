//! The keys a store's engine hashes mix in besides tokens and the LoRA name, reduced to what
//! the index folds into local hashes (docs/contract.md section 3.1): one key digest per block.
//!
//! vLLM publishes them per block in `extra_keys`: the LoRA name (a bare string equal to
//! `lora_name`, already the seed of every block), one `[identifier, offset]` pair per
//! multimodal item overlapping the block, the cache salt (a bare string, first block of a
//! request) and prompt-embeds digests. The first three fold; a prompt-embeds digest or a key
//! of unknown shape cannot (a router has no way to name it), nor can keys that do not line up
//! with the blocks: such a store is [`StoreKeys::unfoldable`].

use crate::namespace::{BlockKey, KeyDigest};

use super::batch::ExtraKey;

/// One store's foldable keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreKeys {
    /// Per block, its key digest (0: no keys); empty when no block has keys, and shorter than
    /// the block count when the last blocks have none.
    pub digests: Vec<u64>,
    /// Whether any key besides the LoRA name was published (what the old skip policy skips).
    pub any_keys: bool,
    /// Whether some key cannot be folded: a prompt-embeds digest, a key of unknown shape, or
    /// keys in an `extra_keys` list whose length is not the store's block count.
    pub unfoldable: bool,
}

impl StoreKeys {
    /// The digest of block `i` (0 when it has no keys).
    pub fn digest(&self, i: usize) -> u64 {
        self.digests.get(i).copied().unwrap_or(0)
    }

    /// Derives the keys of a decoded `extra_keys` list for a store of `blocks` blocks whose
    /// adapter is `lora_name`.
    pub fn of_extra_keys(
        extra_keys: &[Option<Vec<ExtraKey>>],
        blocks: usize,
        lora_name: Option<&str>,
    ) -> Self {
        let mut builder = StoreKeysBuilder::new(blocks, lora_name);
        for entry in extra_keys {
            builder.begin_entry();
            for key in entry.iter().flatten() {
                builder.key(key);
            }
        }
        builder.finish()
    }
}

/// Builds [`StoreKeys`] one `extra_keys` entry and one key at a time, as they are decoded.
#[derive(Debug)]
pub struct StoreKeysBuilder<'a> {
    blocks: usize,
    lora_name: Option<&'a str>,
    keys: StoreKeys,
    /// Entries begun so far; the current entry is `entries - 1`.
    entries: usize,
    current: KeyDigest,
    lora_seen: bool,
}

impl<'a> StoreKeysBuilder<'a> {
    /// A builder for a store of `blocks` blocks whose adapter is `lora_name`.
    pub fn new(blocks: usize, lora_name: Option<&'a str>) -> Self {
        Self {
            blocks,
            lora_name,
            keys: StoreKeys::default(),
            entries: 0,
            current: KeyDigest::default(),
            lora_seen: false,
        }
    }

    /// Starts the next block's entry (a nil entry is an entry without keys).
    #[inline]
    pub fn begin_entry(&mut self) {
        self.end_entry();
        self.entries += 1;
    }

    /// Adds one key of the current entry (a key before the first [`Self::begin_entry`] makes
    /// the store unfoldable).
    pub fn key(&mut self, key: &ExtraKey) {
        let lora = self.lora_name;
        let block_key = match key {
            // The first bare string equal to the adapter's name is the LoRA key: the seed.
            ExtraKey::Text(text) if !self.lora_seen && Some(text.as_str()) == lora => {
                self.lora_seen = true;
                return;
            }
            ExtraKey::Text(salt) => BlockKey::CacheSalt(salt.as_bytes()),
            ExtraKey::Multimodal { identifier, offset } => BlockKey::Multimodal {
                identifier: identifier.as_bytes(),
                offset: *offset,
            },
            ExtraKey::Digest(_) | ExtraKey::Other => {
                self.keys.any_keys = true;
                self.keys.unfoldable = true;
                return;
            }
        };
        self.keys.any_keys = true;
        if self.entries == 0 || self.entries > self.blocks {
            // A key outside any entry, or in an entry past the last block.
            self.keys.unfoldable = true;
        } else {
            self.current.push(block_key);
        }
    }

    #[inline]
    fn end_entry(&mut self) {
        let digest = std::mem::take(&mut self.current).value();
        self.lora_seen = false;
        if digest != 0 {
            let block = self.entries - 1;
            if self.keys.digests.len() <= block {
                self.keys.digests.resize(block + 1, 0);
            }
            self.keys.digests[block] = digest;
        }
    }

    /// The keys of every entry added.
    pub fn finish(mut self) -> StoreKeys {
        if self.entries > 0 {
            self.end_entry();
        }
        if self.keys.any_keys && self.entries != self.blocks {
            self.keys.unfoldable = true;
        }
        self.keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(identifier: &str, offset: i64) -> ExtraKey {
        ExtraKey::Multimodal {
            identifier: identifier.to_owned(),
            offset,
        }
    }

    #[test]
    fn lora_names_are_not_keys_and_salts_and_items_are() {
        let lora = Some("lora-a");
        let only_lora = StoreKeys::of_extra_keys(
            &[Some(vec![ExtraKey::Text("lora-a".into())]), None],
            2,
            lora,
        );
        assert_eq!(only_lora, StoreKeys::default());
        let salted = StoreKeys::of_extra_keys(
            &[
                Some(vec![
                    ExtraKey::Text("lora-a".into()),
                    mm("img", 2),
                    ExtraKey::Text("lora-a".into()),
                ]),
                Some(vec![ExtraKey::Text("lora-a".into()), mm("img", -2)]),
            ],
            2,
            lora,
        );
        let mut first = KeyDigest::default();
        first.push(BlockKey::Multimodal {
            identifier: b"img",
            offset: 2,
        });
        // A salt equal to the adapter's name is still the salt.
        first.push(BlockKey::CacheSalt(b"lora-a"));
        let mut second = KeyDigest::default();
        second.push(BlockKey::Multimodal {
            identifier: b"img",
            offset: -2,
        });
        assert_eq!(salted.digests, vec![first.value(), second.value()]);
        assert!(salted.any_keys && !salted.unfoldable);
    }

    #[test]
    fn digests_unknown_shapes_and_misaligned_lists_are_unfoldable() {
        let embeds =
            StoreKeys::of_extra_keys(&[Some(vec![ExtraKey::Digest(vec![1; 32])])], 1, None);
        assert!(embeds.unfoldable);
        let other = StoreKeys::of_extra_keys(&[Some(vec![ExtraKey::Other])], 1, None);
        assert!(other.unfoldable);
        let short = StoreKeys::of_extra_keys(&[Some(vec![mm("img", 0)])], 2, None);
        assert!(short.unfoldable);
        let long = StoreKeys::of_extra_keys(&[None, Some(vec![mm("img", 0)])], 1, None);
        assert!(long.unfoldable);
        let nils = StoreKeys::of_extra_keys(&[None, None, None], 1, None);
        assert_eq!(nils, StoreKeys::default());
    }
}
