//! The children of a radix node, keyed by local hash, packed for the common cases: most nodes
//! have no child (leaves) or one (a chain), so those need no allocation besides the child; a
//! map is allocated only once a node has two or more children.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

/// A node's children: `T` is the child handle (an `Arc` of the node type).
#[derive(Debug, Default)]
pub(crate) enum Children<T> {
    /// No child.
    #[default]
    None,
    /// One child and its local hash.
    One(u64, T),
    /// Two or more children.
    Many(Box<FxHashMap<u64, T>>),
}

impl<T> Children<T> {
    /// The child for `local`, if any.
    #[inline]
    pub(crate) fn get(&self, local: u64) -> Option<&T> {
        match self {
            Children::None => None,
            Children::One(key, child) => (*key == local).then_some(child),
            Children::Many(map) => map.get(&local),
        }
    }

    /// The child for `local`, made by `make` if there is none.
    pub(crate) fn get_or_insert_with(&mut self, local: u64, make: impl FnOnce() -> T) -> &T {
        if let Children::One(key, _) = self {
            if *key != local {
                let Children::One(key, child) = std::mem::take(self) else {
                    unreachable!("matched above")
                };
                let mut map = FxHashMap::default();
                map.insert(key, child);
                *self = Children::Many(Box::new(map));
            }
        }
        match self {
            Children::None => {
                *self = Children::One(local, make());
                match self {
                    Children::One(_, child) => child,
                    _ => unreachable!("filled above"),
                }
            }
            Children::One(_, child) => child,
            Children::Many(map) => map.entry(local).or_insert_with(make),
        }
    }

    /// Removes the child for `local` if `is_it` says it is the one meant; true if removed.
    /// A map left with one child goes back to the inline form.
    pub(crate) fn remove_if(&mut self, local: u64, is_it: impl FnOnce(&T) -> bool) -> bool {
        let removed = match self {
            Children::None => false,
            Children::One(key, child) => {
                let hit = *key == local && is_it(child);
                if hit {
                    *self = Children::None;
                }
                hit
            }
            Children::Many(map) => match map.entry(local) {
                Entry::Occupied(entry) if is_it(entry.get()) => {
                    entry.remove();
                    true
                }
                _ => false,
            },
        };
        if let Children::Many(map) = self {
            if map.len() == 1 {
                let (key, child) = map.drain().next().expect("one child");
                *self = Children::One(key, child);
            }
        }
        removed
    }

    /// Whether there is no child.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Children::None => true,
            Children::One(..) => false,
            Children::Many(map) => map.is_empty(),
        }
    }

    /// Moves every child into `out`, leaving no child.
    pub(crate) fn take_all(&mut self, out: &mut Vec<T>) {
        match std::mem::take(self) {
            Children::None => {}
            Children::One(_, child) => out.push(child),
            Children::Many(map) => out.extend(map.into_values()),
        }
    }

    /// Every child, in no particular order.
    #[cfg(test)]
    pub(crate) fn values(&self) -> Box<dyn Iterator<Item = &T> + '_> {
        match self {
            Children::None => Box::new(std::iter::empty()),
            Children::One(_, child) => Box::new(std::iter::once(child)),
            Children::Many(map) => Box::new(map.values()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_a_map_and_shrinks_back() {
        let mut c: Children<u32> = Children::default();
        assert!(c.is_empty());
        assert_eq!(*c.get_or_insert_with(7, || 70), 70);
        assert_eq!(
            *c.get_or_insert_with(7, || 71),
            70,
            "an existing child is kept"
        );
        assert!(matches!(c, Children::One(7, 70)));
        assert_eq!(*c.get_or_insert_with(8, || 80), 80);
        assert!(matches!(c, Children::Many(_)));
        assert_eq!(c.get(7), Some(&70));
        assert_eq!(c.get(8), Some(&80));
        assert_eq!(c.get(9), None);
        assert!(!c.remove_if(7, |&v| v == 71), "not the child meant");
        assert!(c.remove_if(7, |&v| v == 70));
        assert!(matches!(c, Children::One(8, 80)));
        let mut all: Vec<u32> = c.values().copied().collect();
        assert_eq!(all, vec![80]);
        assert!(!c.remove_if(9, |_| true));
        assert!(c.remove_if(8, |_| true));
        assert!(c.is_empty());
        assert_eq!(c.values().count(), 0);
        for local in 0..5 {
            c.get_or_insert_with(local, || local as u32);
        }
        all = c.values().copied().collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        let mut taken = Vec::new();
        c.take_all(&mut taken);
        taken.sort_unstable();
        assert_eq!(taken, vec![0, 1, 2, 3, 4]);
        assert!(c.is_empty());
        c.get_or_insert_with(9, || 90);
        c.take_all(&mut taken);
        assert_eq!(taken.last(), Some(&90));
        assert!(c.is_empty());
    }
}
