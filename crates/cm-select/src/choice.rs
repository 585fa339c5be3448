//! The outcome of selection: a transport, its controller and tuning, and
//! the reason in one line.

use core::fmt;

use cm_core::controller::ControllerConfig;

/// The transports this project offers an application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The kernel's TCP (`std::net::TcpStream`).
    LinuxTcp,
    /// Congestion-controlled UDP through the CM
    /// (`libcm::ccudp::CcUdpSocket`).
    CcUdp,
    /// Plain UDP, no congestion control (only when it is prohibited).
    Udp,
}

impl Transport {
    /// Short machine name: `tcp`, `ccudp`, `udp`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::LinuxTcp => "tcp",
            Transport::CcUdp => "ccudp",
            Transport::Udp => "udp",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::LinuxTcp => "Linux TCP",
            Transport::CcUdp => "CC-UDP",
            Transport::Udp => "raw UDP",
        })
    }
}

/// The CM controller a CC-UDP choice runs (`cm_core::controller`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    /// The papers' window AIMD (sigcomm1999 §4.1), the CM's default.
    Aimd,
    /// TCP-Friendly Rate Control (RFC 5348).
    Tfrc,
    /// ISCC(l=2) on the capacity estimate (iscc §V-D).
    Iscc,
    /// Binomial SQRT, k = l = 1/2 (Bansal & Balakrishnan 2001).
    Sqrt,
    /// Binomial IIAD, k = 1, l = 0 (Bansal & Balakrishnan 2001).
    Iiad,
}

impl Controller {
    /// The controller's text form (`cm_core::controller::spec`) for CC-UDP
    /// packets of `payload` bytes (TFRC's equation uses the packet size).
    pub fn spec(self, payload: usize) -> String {
        match self {
            Controller::Aimd => "aimd".to_owned(),
            Controller::Tfrc => format!("tfrc:s={}", payload + crate::tuning::CCUDP_HEADER),
            Controller::Iscc => "iscc:l=2".to_owned(),
            Controller::Sqrt => "sqrt".to_owned(),
            Controller::Iiad => "iiad".to_owned(),
        }
    }

    /// The parsed configuration for packets of `payload` bytes.
    pub fn config(self, payload: usize) -> Result<ControllerConfig, String> {
        self.spec(payload).parse().map_err(|e| format!("{e}"))
    }

    /// Short machine name: `aimd`, `tfrc`, `iscc`, `sqrt`, `iiad`.
    pub fn name(self) -> &'static str {
        match self {
            Controller::Aimd => "aimd",
            Controller::Tfrc => "tfrc",
            Controller::Iscc => "iscc",
            Controller::Sqrt => "sqrt",
            Controller::Iiad => "iiad",
        }
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Controller::Aimd => "AIMD",
            Controller::Tfrc => "TFRC",
            Controller::Iscc => "ISCC(l=2)",
            Controller::Sqrt => "binomial SQRT",
            Controller::Iiad => "binomial IIAD",
        })
    }
}

/// The sender-side buffering chosen (tuning module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffering {
    /// The transport's default (libcm's queue, the kernel's send buffer).
    Default,
    /// A queue of this many packets (MAXQ, paper §4.3.1).
    Packets(u32),
    /// A send buffer of this many bytes (on/off bridging, RFC 2861).
    Bytes(u64),
}

impl fmt::Display for Buffering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Buffering::Default => f.write_str("default buffering"),
            Buffering::Packets(n) => write!(f, "queue {n}"),
            Buffering::Bytes(b) => write!(f, "{b}-byte send buffer"),
        }
    }
}

/// What [`crate::select`] picked, tuned, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The transport.
    pub transport: Transport,
    /// The CM controller (CC-UDP only).
    pub controller: Option<Controller>,
    /// Payload bytes per datagram (datagram transports only).
    pub packet_size: Option<usize>,
    /// Sender-side buffering.
    pub buffering: Buffering,
    /// Disable Nagle (`TCP_NODELAY`) on a TCP choice: delay-sensitive.
    pub nodelay: bool,
    /// The rule that decided, with its source.
    pub why: String,
    /// Preferences not met and other remarks.
    pub notes: Vec<String>,
}

impl Choice {
    /// The one-line explanation (same as `Display`).
    pub fn reason(&self) -> String {
        self.to_string()
    }

    /// The controller's text form, for `Cm::set_controller` or
    /// `cm_set_controller`.
    pub fn controller_spec(&self) -> Option<String> {
        self.controller
            .map(|c| c.spec(self.packet_size.unwrap_or(crate::tuning::MTU_PAYLOAD)))
    }

    /// A machine-readable summary:
    /// `transport=ccudp controller=tfrc:s=176 packet=160 queue=1p`.
    pub fn summary(&self) -> String {
        let mut s = format!("transport={}", self.transport.name());
        if let Some(c) = self.controller_spec() {
            s.push_str(&format!(" controller={c}"));
        }
        if let Some(p) = self.packet_size {
            s.push_str(&format!(" packet={p}"));
        }
        match self.buffering {
            Buffering::Default => s.push_str(" queue=default"),
            Buffering::Packets(n) => s.push_str(&format!(" queue={n}p")),
            Buffering::Bytes(b) => s.push_str(&format!(" queue={b}B")),
        }
        if self.nodelay {
            s.push_str(" nodelay");
        }
        s
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.transport)?;
        if let Some(c) = self.controller {
            write!(f, " with {c}")?;
        }
        if let Some(p) = self.packet_size {
            write!(f, ", {p}-byte packets")?;
        }
        if self.buffering != Buffering::Default {
            write!(f, ", {}", self.buffering)?;
        }
        if self.nodelay {
            f.write_str(", TCP_NODELAY")?;
        }
        write!(f, ": {}", self.why)?;
        for n in &self.notes {
            write!(f, "; {n}")?;
        }
        Ok(())
    }
}
