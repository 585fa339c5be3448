//! # cm-netem: emulated network paths between network namespaces
//!
//! (Skeleton; being built.)
