//! What the bytes of a transfer are: zeros (the default, like ttcp's
//! generated buffer), or a file's contents on the sender and a file written
//! at the receiver. Both transports read and write by stream offset, so
//! retransmitted or out-of-order TCP/CM segments land where they belong.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, TtcpError};

/// The sender's data.
#[derive(Debug, Default)]
pub(crate) struct Source(Option<File>);

impl Source {
    /// Zeros, or the contents of `path`.
    pub(crate) fn open(path: Option<&Path>) -> Result<Source> {
        path.map(|p| File::open(p).map_err(|e| TtcpError::io(format!("open {}", p.display()), e)))
            .transpose()
            .map(Source)
    }

    /// Fill `buf` with the stream's bytes from `offset`. Zeros are not
    /// written: callers pass buffers that are zeros already (a segment's
    /// encoded payload, the sender's zeroed chunk), so the default path
    /// costs nothing per packet.
    pub(crate) fn fill(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match &self.0 {
            None => Ok(()),
            Some(f) => f
                .read_exact_at(buf, offset)
                .map_err(|e| TtcpError::io(format!("read {} bytes at {offset}", buf.len()), e)),
        }
    }
}

/// The receiver's data.
#[derive(Debug, Default)]
pub(crate) struct Sink(Option<File>);

impl Sink {
    /// Discard, or write the `n`th connection (from 1) to `path` (the
    /// first) or `path.n` (later ones).
    pub(crate) fn create(path: Option<&Path>, n: u64) -> Result<Sink> {
        let Some(p) = path else {
            return Ok(Sink(None));
        };
        let p: PathBuf = if n <= 1 {
            p.to_path_buf()
        } else {
            let mut s = p.as_os_str().to_owned();
            s.push(format!(".{n}"));
            s.into()
        };
        File::create(&p)
            .map(|f| Sink(Some(f)))
            .map_err(|e| TtcpError::io(format!("create {}", p.display()), e))
    }

    /// Store `data` at stream offset `offset`.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        match &self.0 {
            None => Ok(()),
            Some(f) => f
                .write_all_at(data, offset)
                .map_err(|e| TtcpError::io(format!("write {} bytes at {offset}", data.len()), e)),
        }
    }
}
