//! A bulk-transfer server and client over QUIC, for the example and the
//! `quic-ensemble` experiment: the server sends to each client that
//! connects for as long as the client asks, on one unidirectional stream;
//! the client counts the bytes. The sender's congestion control is the
//! CM ([`CmCongestion`], per connection) or quinn's own NewReno.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Endpoint, ServerConfig, TransportConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{CmCongestion, CmThread};

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// TLS or QUIC configuration.
    #[error("QUIC configuration: {0}")]
    Config(String),
    /// Socket or runtime I/O.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The connection failed.
    #[error("QUIC connection: {0}")]
    Connection(String),
}

fn cfg_err(e: impl std::fmt::Display) -> TransferError {
    TransferError::Config(e.to_string())
}

fn conn_err(e: impl std::fmt::Display) -> TransferError {
    TransferError::Connection(e.to_string())
}

/// Whose congestion control the server's connections use.
#[derive(Clone, Debug)]
pub enum Congestion {
    /// Each connection is a flow of this CM.
    Cm(CmThread),
    /// quinn's NewReno, per connection.
    NewReno,
}

/// A self-signed certificate for "cm-quic" (the client trusts only it).
fn certificate() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), TransferError> {
    let c = rcgen::generate_simple_self_signed(vec!["cm-quic".into()]).map_err(cfg_err)?;
    let key = PrivatePkcs8KeyDer::from(c.key_pair.serialize_der());
    Ok((c.cert.der().clone(), key.into()))
}

fn transport(cc: &Congestion, peer: SocketAddr) -> TransportConfig {
    let mut t = TransportConfig::default();
    // Room for a 10 Mbit/s x 60 ms path and its queue many times over.
    t.stream_receive_window(quinn::VarInt::from_u32(16 << 20));
    t.receive_window(quinn::VarInt::from_u32(32 << 20));
    // Little more than the path holds, so that what the sender has
    // written is close to what it has sent.
    t.send_window(1 << 20);
    if let Congestion::Cm(cm) = cc {
        t.congestion_controller_factory(Arc::new(CmCongestion::new(cm.clone(), peer)));
    }
    t
}

/// Serve on `bind` until `stop` returns true; each connection gets as many
/// seconds of data as its client's first byte asks for. The certificate
/// goes to `cert_out` for clients.
pub async fn serve(
    bind: SocketAddr,
    cc: Congestion,
    cert_out: &std::path::Path,
    stop: impl Fn() -> bool,
) -> Result<(), TransferError> {
    let (cert, key) = certificate()?;
    std::fs::write(cert_out, cert.as_ref())?;
    let crypto = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .map_err(cfg_err)?
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .map_err(cfg_err)?;
    let crypto = Arc::new(QuicServerConfig::try_from(crypto).map_err(cfg_err)?);
    let endpoint = Endpoint::server(ServerConfig::with_crypto(crypto.clone()), bind)?;
    while !stop() {
        let incoming =
            match tokio::time::timeout(Duration::from_millis(200), endpoint.accept()).await {
                Ok(Some(i)) => i,
                Ok(None) => break,
                Err(_) => continue,
            };
        // quinn tells a factory nothing of the peer: one per connection.
        let mut sc = ServerConfig::with_crypto(crypto.clone());
        sc.transport_config(Arc::new(transport(&cc, incoming.remote_address())));
        let Ok(connecting) = incoming.accept_with(Arc::new(sc)) else {
            continue;
        };
        tokio::spawn(async move {
            let _ = send_to(connecting).await;
        });
    }
    endpoint.close(0u32.into(), b"bye");
    Ok(())
}

async fn send_to(connecting: quinn::Connecting) -> Result<(), TransferError> {
    let conn = connecting.await.map_err(conn_err)?;
    let (_, mut ask) = conn.accept_bi().await.map_err(conn_err)?;
    let mut secs = [0u8; 1];
    ask.read_exact(&mut secs).await.map_err(conn_err)?;
    let mut out = conn.open_uni().await.map_err(conn_err)?;
    let chunk = vec![0x5a_u8; 64 * 1024];
    let until = Instant::now() + Duration::from_secs(u64::from(secs[0]));
    while Instant::now() < until {
        if out.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = out.finish();
    // Let the last bytes be acknowledged before the connection goes.
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await;
    Ok(())
}

/// What a client received.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Bytes.
    pub bytes: u64,
    /// From the connection's start to the last byte.
    pub seconds: f64,
}

impl Received {
    /// Bits per second.
    pub fn bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds.max(1e-6)
    }
}

/// Connect to `server` (trusting the certificate in `cert`), ask for
/// `secs` seconds of data and count what arrives within them.
pub async fn fetch(
    server: SocketAddr,
    cert: &std::path::Path,
    secs: u8,
) -> Result<Received, TransferError> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(std::fs::read(cert)?))
        .map_err(cfg_err)?;
    let crypto = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .map_err(cfg_err)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let mut cc = quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(crypto).map_err(cfg_err)?,
    ));
    cc.transport_config(Arc::new(transport(&Congestion::NewReno, server)));
    let bind: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .map_err(cfg_err)?;
    let mut endpoint = Endpoint::client(bind)?;
    endpoint.set_default_client_config(cc);
    let t0 = Instant::now();
    let conn = endpoint
        .connect(server, "cm-quic")
        .map_err(conn_err)?
        .await
        .map_err(conn_err)?;
    let (mut ask, _) = conn.open_bi().await.map_err(conn_err)?;
    ask.write_all(&[secs]).await.map_err(conn_err)?;
    let mut data = conn.accept_uni().await.map_err(conn_err)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    // What arrives within the seconds asked for: the server's buffered
    // tail would otherwise stretch the transfer past them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(secs));
    loop {
        match tokio::time::timeout_at(deadline, data.read(&mut buf)).await {
            Ok(Ok(Some(n))) => bytes += n as u64,
            Ok(Ok(None)) | Err(_) => break,
            Ok(Err(e)) => return Err(conn_err(e)),
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(Received { bytes, seconds })
}
