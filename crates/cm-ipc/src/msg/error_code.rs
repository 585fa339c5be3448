//! The reasons the daemon gives when it refuses a call, and their wire values.

/// Why the daemon refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The flow is not open, or is not the caller's.
    UnknownFlow,
    /// The macroflow does not exist or the caller may not use it.
    UnknownMacroflow,
    /// A bad argument (RTT, byte counts, k, weight, MTU, threshold).
    InvalidArgument,
    /// A per-client or global limit was reached.
    LimitReached,
    /// The caller sends messages faster than its limit allows.
    RateLimited,
    /// The caller may not do this (another user's flow or macroflow).
    PermissionDenied,
    /// The message could not be decoded.
    Malformed,
    /// The client speaks another protocol version.
    UnsupportedVersion,
    /// The first message was not `Hello`.
    NotIntroduced,
}

impl ErrorCode {
    /// The wire value.
    pub fn to_u16(self) -> u16 {
        match self {
            ErrorCode::UnknownFlow => 1,
            ErrorCode::UnknownMacroflow => 2,
            ErrorCode::InvalidArgument => 3,
            ErrorCode::LimitReached => 4,
            ErrorCode::RateLimited => 5,
            ErrorCode::PermissionDenied => 6,
            ErrorCode::Malformed => 7,
            ErrorCode::UnsupportedVersion => 8,
            ErrorCode::NotIntroduced => 9,
        }
    }

    /// From the wire value.
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => ErrorCode::UnknownFlow,
            2 => ErrorCode::UnknownMacroflow,
            3 => ErrorCode::InvalidArgument,
            4 => ErrorCode::LimitReached,
            5 => ErrorCode::RateLimited,
            6 => ErrorCode::PermissionDenied,
            7 => ErrorCode::Malformed,
            8 => ErrorCode::UnsupportedVersion,
            9 => ErrorCode::NotIntroduced,
            _ => return None,
        })
    }
}
