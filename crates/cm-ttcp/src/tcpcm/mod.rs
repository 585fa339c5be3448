//! TCP/CM over UDP: the sender loop and the receiver.

pub(crate) mod coalesce;
pub(crate) mod conn;
pub(crate) mod receiver;
pub(crate) mod sender;
