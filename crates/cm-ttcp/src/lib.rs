//! # cm-ttcp: bulk transfers over real sockets, TCP/CM and Linux TCP
//!
//! (Skeleton; being built.)
