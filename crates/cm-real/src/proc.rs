//! A program the experiments run (a server, a client, a daemon), killed and
//! reaped on every exit path, with its output read under a time limit.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{RealError, Result};

/// Kills its child (and waits for it) on every exit path.
pub struct Proc(Option<Child>, &'static str);

impl Proc {
    /// Start `c`; `what` names it in errors.
    pub fn spawn(mut c: Command, what: &'static str) -> Result<Proc> {
        c.stdin(Stdio::null());
        c.spawn()
            .map(|c| Proc(Some(c), what))
            .map_err(|e| RealError::Program(format!("running {what}: {e}")))
    }

    /// Its process id, while it runs under this guard.
    pub fn id(&self) -> Option<u32> {
        self.0.as_ref().map(Child::id)
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// What it wrote to a piped standard error (read to the end).
    pub fn stderr_text(&mut self) -> String {
        let mut err = String::new();
        if let Some(mut e) = self.0.as_mut().and_then(|c| c.stderr.take()) {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        err
    }

    /// Its standard output, waiting at most `limit`.
    pub fn output(mut self, limit: Duration) -> Result<String> {
        let Some(mut child) = self.0.take() else {
            return Ok(String::new());
        };
        let until = Instant::now() + limit;
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RealError::Program(format!(
                    "{} did not finish within {limit:?}",
                    self.1
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child
            .wait_with_output()
            .map_err(|e| RealError::Program(e.to_string()))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
