//! The congestion controller a flow's macroflow runs, and the bottleneck
//! capacity estimate it runs on (iscc §V-D: ISCC needs the capacity C;
//! §VI-B: one estimate per macroflow, shared by its flows). Both act on the
//! whole macroflow, so on every flow in it.

use cm_core::controller::ControllerConfig;
use cm_core::{FlowId, Rate};
use cm_ipc::{ErrorCode, ToClient, ToDaemon};

use super::Cm;
use crate::backend::Backend;
use crate::error::CmError;

impl Cm {
    /// Run the controller `cfg` on `flow`'s macroflow from now on (its new
    /// flows too). The controller starts from its initial state; the
    /// macroflow keeps its RTT estimate, flows and capacity estimate.
    /// Unusable parameters are [`CmError::Refused`] in either mode.
    ///
    /// In daemon mode the call carries `cfg`'s text form
    /// ([`cm_core::controller::spec`]), which the daemon parses again: a
    /// configuration whose text form does not give it back exactly (an
    /// [`cm_core::controller::AimdConfig`] with non-default fields), or
    /// whose text is longer than [`cm_ipc::MAX_SPEC`] bytes, is
    /// [`CmError::Invalid`] there. Text parses with `str::parse`:
    ///
    /// ```
    /// # let mut cm = libcm::Cm::embedded(libcm::Config::default())?;
    /// let flow = cm.open(None, "192.0.2.7:9000".parse()?)?;
    /// cm.set_controller(flow, &"iscc:l=2".parse()?)?;
    /// cm.set_capacity(flow, Some(libcm::Rate::from_bits_per_sec(10_000_000)))?;
    /// let s = cm.stat()?;
    /// assert_eq!(s.macroflows[0].controller, "iscc");
    /// assert_eq!(s.macroflows[0].capacity, Some(1_250_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_controller(&mut self, flow: FlowId, cfg: &ControllerConfig) -> Result<(), CmError> {
        if let Err(why) = cfg.validate() {
            return Err(CmError::Refused {
                code: ErrorCode::InvalidArgument,
                why: format!("controller {cfg}: {why}"),
            });
        }
        let spec = match self.backend {
            Backend::Daemon(_) => wire_spec(cfg)?,
            Backend::Embedded(_) => String::new(),
        };
        self.ask(
            Some(flow),
            |e, flow| {
                let mf = e.core.macroflow_of(flow)?;
                e.core.set_controller(cm_clock::now(), mf, cfg)
            },
            |seq, flow| ToDaemon::SetController {
                seq,
                flow: flow.to_u64(),
                spec,
            },
            |r| matches!(r, ToClient::Done { .. }).then_some(()),
            "unexpected reply to set_controller",
        )?;
        self.note_controller(flow, cfg);
        Ok(())
    }

    /// The bottleneck capacity of `flow`'s path, as the application or its
    /// receiver estimates it (packet pairs, configuration), for its
    /// macroflow's controller: ISCC takes it at once, the others ignore it.
    /// `None` (or zero) forgets it. Fire-and-forget in daemon mode, like
    /// [`Cm::set_weight`].
    pub fn set_capacity(&mut self, flow: FlowId, capacity: Option<Rate>) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| {
                let mf = core.macroflow_of(flow)?;
                core.set_capacity(now, mf, capacity)
            },
            |flow| ToDaemon::SetCapacity {
                flow: flow.to_u64(),
                capacity: capacity.map(Rate::bytes_per_sec),
            },
        )
    }
}

impl Cm {
    /// One bottleneck-rate sample for `flow`'s path, from a packet bunch
    /// its receiver measured (iscc §VI-B; `cm_core::BunchSampler`). Every
    /// flow of the macroflow feeds one filter; when the filtered estimate
    /// appears or moves by more than 1% it becomes the macroflow's capacity,
    /// as [`Cm::set_capacity`] would (`CongestionManager::capacity_sample`).
    /// Fire-and-forget in daemon mode.
    pub fn capacity_sample(&mut self, flow: FlowId, sample: Rate) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| core.capacity_sample(now, flow, sample),
            |flow| ToDaemon::CapacitySample {
                flow: flow.to_u64(),
                sample: sample.bytes_per_sec(),
            },
        )
    }

    /// `flow`'s feedback comes in batches (the CM protocol's probe
    /// responses) and resolves a byte `lag_per_mille` thousandths of an RTT
    /// later than per-packet acknowledgements would; `None`: per-packet.
    /// The macroflow's window allows for the lag
    /// (`CongestionManager::set_feedback_lag`). `CcUdpSocket` sets it when
    /// its peer negotiates the protocol. Fire-and-forget in daemon mode.
    pub fn set_feedback_lag(
        &mut self,
        flow: FlowId,
        lag_per_mille: Option<u16>,
    ) -> Result<(), CmError> {
        self.check_flow(flow)?;
        self.fire(
            flow,
            |core, now, flow| {
                let mf = core.macroflow_of(flow)?;
                core.set_feedback_lag(now, mf, lag_per_mille)
            },
            |flow| ToDaemon::SetFeedbackLag {
                flow: flow.to_u64(),
                lag: lag_per_mille,
            },
        )
    }
}

/// The text the daemon is sent for `cfg`: one that parses back to exactly
/// `cfg` and fits the message.
fn wire_spec(cfg: &ControllerConfig) -> Result<String, CmError> {
    let spec = cfg.to_string();
    if spec.len() > cm_ipc::MAX_SPEC {
        return Err(CmError::Invalid(
            "controller spec longer than cm_ipc::MAX_SPEC bytes",
        ));
    }
    if spec.parse::<ControllerConfig>().as_ref() != Ok(cfg) {
        return Err(CmError::Invalid(
            "this controller configuration has no exact text form to send to the daemon",
        ));
    }
    Ok(spec)
}
