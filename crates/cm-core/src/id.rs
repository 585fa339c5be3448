//! The handles of the API: flows, macroflows and clients. Each is a slot
//! index and a generation in one `u64`, so a stale handle of a reused slot
//! is recognised (see [`crate::slab`]) and the value crosses the C ABI and
//! the wire as one integer.

use core::fmt;

use crate::slab::Key;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u64);

        impl $name {
            /// Build from a slot index and generation.
            pub const fn from_raw(index: u32, generation: u32) -> Self {
                $name(((generation as u64) << 32) | index as u64)
            }
            /// The id as one integer (for wire formats and the C ABI).
            pub const fn to_u64(self) -> u64 {
                self.0
            }
            /// The id from [`Self::to_u64`].
            pub const fn from_u64(v: u64) -> Self {
                $name(v)
            }
            /// The slot index.
            pub const fn index(self) -> u32 {
                self.0 as u32
            }
            pub(crate) fn key(self) -> Key {
                Key { index: self.0 as u32, generation: (self.0 >> 32) as u32 }
            }
            pub(crate) fn from_key(k: Key) -> Self {
                Self::from_raw(k.index, k.generation)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}.{}"), self.0 as u32, self.0 >> 32)
            }
        }
    };
}

id_type!(
    /// A flow handle (`cm_flowid` in the papers).
    FlowId,
    "f"
);
id_type!(
    /// A macroflow handle: flows sharing one congestion state.
    MacroflowId,
    "m"
);
id_type!(
    /// A CM client: one application (process or connection to the daemon).
    ClientId,
    "c"
);
