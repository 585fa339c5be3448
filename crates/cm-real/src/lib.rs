//! # cm-real: the CM papers' experiments on real (emulated) networks
//!
//! (Skeleton; being built.)
