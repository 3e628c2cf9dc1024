//! The runs hung below a run, by where they hang and their first block's local hash.
//!
//! Most runs have a few children, found by a scan of one short array: one cache line read
//! for the key and the child together. A run with many (the root, a prompt shared by many
//! conversations) keeps them in a hash map.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::run::Run;

/// Where a child hangs (blocks of its parent before it) and its first local hash.
pub(super) type ChildKey = (u32, u64);

/// Children kept in the array at most; one more moves them to the map.
const FEW: usize = 6;

type Entry = (ChildKey, Arc<Run>);
type Map = FxHashMap<ChildKey, Arc<Run>>;

/// See the module docs.
pub(super) enum Children {
    Few(Vec<Entry>),
    Many(Map),
}

impl Default for Children {
    fn default() -> Self {
        Self::Few(Vec::new())
    }
}

impl Children {
    #[inline]
    pub(super) fn get(&self, key: &ChildKey) -> Option<&Arc<Run>> {
        match self {
            Self::Few(few) => few.iter().find(|(k, _)| k == key).map(|(_, run)| run),
            Self::Many(many) => many.get(key),
        }
    }

    pub(super) fn contains_key(&self, key: &ChildKey) -> bool {
        self.get(key).is_some()
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Self::Few(few) => few.len(),
            Self::Many(many) => many.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hangs `child` at `key`, returning the child it replaces.
    pub(super) fn insert(&mut self, key: ChildKey, child: Arc<Run>) -> Option<Arc<Run>> {
        match self {
            Self::Few(few) => {
                if let Some((_, old)) = few.iter_mut().find(|(k, _)| *k == key) {
                    return Some(std::mem::replace(old, child));
                }
                if few.len() < FEW {
                    few.push((key, child));
                    return None;
                }
                let mut many: Map = few.drain(..).collect();
                many.insert(key, child);
                *self = Self::Many(many);
                None
            }
            Self::Many(many) => many.insert(key, child),
        }
    }

    /// Unhangs the child at `key`.
    pub(super) fn remove(&mut self, key: &ChildKey) -> Option<Arc<Run>> {
        match self {
            Self::Few(few) => {
                let at = few.iter().position(|(k, _)| k == key)?;
                Some(few.swap_remove(at).1)
            }
            // A map stays a map: a run that had many children tends to get them again.
            Self::Many(many) => many.remove(key),
        }
    }

    /// The array's entries and the map, one of them empty.
    fn parts(&self) -> (&[Entry], Option<&Map>) {
        match self {
            Self::Few(few) => (few, None),
            Self::Many(many) => (&[], Some(many)),
        }
    }

    /// Every key.
    pub(super) fn keys(&self) -> impl Iterator<Item = ChildKey> + '_ {
        let (few, many) = self.parts();
        few.iter()
            .map(|(k, _)| *k)
            .chain(many.into_iter().flat_map(|m| m.keys().copied()))
    }

    /// Every child.
    #[cfg(test)]
    pub(super) fn values(&self) -> impl Iterator<Item = &Arc<Run>> + '_ {
        let (few, many) = self.parts();
        few.iter()
            .map(|(_, run)| run)
            .chain(many.into_iter().flat_map(|m| m.values()))
    }

    /// Takes every child out.
    pub(super) fn take_all(&mut self) -> Vec<Arc<Run>> {
        match std::mem::take(self) {
            Self::Few(few) => few.into_iter().map(|(_, run)| run).collect(),
            Self::Many(many) => many.into_values().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_and_many_children_are_found_replaced_and_removed() {
        let runs: Vec<Arc<Run>> = (0..20).map(|_| Arc::new(Run::root())).collect();
        let mut children = Children::default();
        for (at, run) in runs.iter().enumerate() {
            let key = (at as u32 % 3, at as u64);
            assert!(children.insert(key, Arc::clone(run)).is_none());
            assert_eq!(children.len(), at + 1);
            assert!(matches!(children, Children::Few(_)) == (at < FEW));
        }
        for (at, run) in runs.iter().enumerate() {
            let key = (at as u32 % 3, at as u64);
            assert!(Arc::ptr_eq(children.get(&key).unwrap(), run));
            assert!(!children.contains_key(&(at as u32 % 3 + 1, at as u64)));
        }
        let mut keys: Vec<ChildKey> = children.keys().collect();
        keys.sort_unstable();
        assert_eq!(keys.len(), 20);
        let replaced = children.insert((1, 1), Arc::clone(&runs[0])).unwrap();
        assert!(Arc::ptr_eq(&replaced, &runs[1]));
        assert!(children.remove(&(1, 1)).is_some() && children.remove(&(1, 1)).is_none());
        assert_eq!(children.values().count(), 19);
        assert_eq!(children.take_all().len(), 19);
        assert!(children.is_empty());
    }
}
