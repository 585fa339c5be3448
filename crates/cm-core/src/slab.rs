//! A generational arena: O(1) insert, remove and lookup by a handle that
//! can never alias a later occupant of the same slot.

/// A slot index plus the generation it was allocated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub index: u32,
    pub generation: u32,
}

#[derive(Clone, Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values addressed by [`Key`].
#[derive(Clone, Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Store `value`; `None` if the index space (u32) is exhausted.
    pub fn insert(&mut self, value: T) -> Option<Key> {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            return Some(Key {
                index,
                generation: slot.generation,
            });
        }
        let Ok(index) = u32::try_from(self.slots.len()) else {
            self.len -= 1;
            return None;
        };
        self.slots.push(Slot {
            generation: 0,
            value: Some(value),
        });
        Some(Key {
            index,
            generation: 0,
        })
    }

    pub fn get(&self, key: Key) -> Option<&T> {
        let slot = self.slots.get(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.value.as_ref()
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.value.as_mut()
    }

    pub fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        let v = slot.value.take()?;
        // A retired generation is never reused: wrap-around would take 2^32
        // reuses of one slot; the slot is then leaked.
        slot.generation = slot.generation.wrapping_add(1);
        if slot.generation != 0 {
            self.free.push(key.index);
        }
        self.len -= 1;
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let v = s.value.as_ref()?;
            Some((
                Key {
                    index: i as u32,
                    generation: s.generation,
                },
                v,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_keys_do_not_alias_new_occupants() {
        let mut s = Slab::default();
        let a = s.insert("a").unwrap();
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b").unwrap();
        assert_eq!(a.index, b.index);
        assert_eq!(s.get(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.len(), 1);
    }
}
