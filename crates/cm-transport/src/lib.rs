//! Sans-IO transports that use (or compete with) the Congestion Manager.
#![warn(missing_docs)]
