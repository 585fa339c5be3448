//! Random loss at the receiver's ingress: a classic-BPF `tc` filter that
//! drops each packet with probability p.

use crate::error::{NetemError, Result};

use super::{HOST_IF, Node, Path};
use crate::config::ConfigError;
use crate::netns::run;

fn loss_program(p: f64) -> String {
    if p <= 0.0 {
        return "1,6 0 0 0".to_string(); // ret #0 (TC_ACT_OK)
    }
    let thresh = (p * 4_294_967_296.0).round().min(u32::MAX as f64) as u64;
    // ld rand (SKF_AD_OFF + SKF_AD_RANDOM); jge #thresh, pass, drop; pass: ret #0; drop: ret #2
    format!("4,32 0 0 4294963256,53 0 1 {thresh},6 0 0 0,6 0 0 2")
}
impl Path {
    /// Change the random loss probability at the receiver's ingress, in place.
    pub fn set_loss(&self, p: f64) -> Result<()> {
        if !(p.is_finite() && (0.0..1.0).contains(&p)) {
            return Err(ConfigError::Loss(p).into());
        }
        let mut inner = self.lock();
        if inner.torn_down {
            return Err(NetemError::TornDown);
        }
        let prog = loss_program(p);
        run(
            "tc",
            &[
                "-n",
                self.ns(Node::Receiver),
                "filter",
                "replace",
                "dev",
                HOST_IF,
                "ingress",
                "protocol",
                "ip",
                "pref",
                "1",
                "handle",
                "1",
                "bpf",
                "da",
                "bytecode",
                &prog,
            ],
        )?;
        inner.loss = p;
        Ok(())
    }

    /// The current loss probability.
    pub fn loss(&self) -> f64 {
        self.lock().loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_programs() {
        assert_eq!(loss_program(0.0), "1,6 0 0 0");
        assert_eq!(
            loss_program(0.5),
            "4,32 0 0 4294963256,53 0 1 2147483648,6 0 0 0,6 0 0 2"
        );
        assert!(loss_program(0.999_999_999_99).contains(&u32::MAX.to_string()));
    }
}
