//! `type = "syslog"` settings (feature `config`): [`SyslogSinkConfig`].

use std::io;
use std::path::PathBuf;

use serde::Deserialize;

use super::{SyslogSink, SyslogSinkOptions, SyslogTransport};
use crate::config::{dotted_why, lines_only, SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// Syslog transport names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SyslogTransportName {
    /// RFC 5426. Default.
    #[default]
    Udp,
    /// RFC 6587 octet counting.
    Tcp,
    /// Unix datagram socket.
    UnixDgram,
    /// Unix stream socket, octet counting.
    UnixStream,
    /// RELP over TCP (rsyslog `imrelp`): written when acknowledged.
    Relp,
}

/// `type = "syslog"` settings; see [`SyslogSinkOptions`]. Pair with
/// `[format] type = "rfc5424"` or `"rfc3164"`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SyslogSinkConfig {
    /// `udp` (default), `tcp`, `unix_dgram`, `unix_stream` or `relp`.
    pub transport: SyslogTransportName,
    /// `host:port` (IP literal) for UDP/TCP, a socket path for unix.
    /// Default `127.0.0.1:514`.
    pub address: String,
    /// Whole-datagram size limit (UDP, unix datagram); a longer message
    /// is refused and its record dropped, never cut. Default 2048.
    pub max_datagram_bytes: usize,
    /// First reconnect backoff. Default 10.
    pub reconnect_min_ms: u64,
    /// Longest reconnect backoff. Default 2000.
    pub reconnect_max_ms: u64,
    /// Connect/write timeout of stream transports. Default 1000.
    pub io_timeout_ms: u64,
    /// RELP: unacknowledged messages at most. Default 128.
    pub relp_window: usize,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
    /// RFC 5848 Signature Blocks with the records (`[sink.sign]`); see
    /// [`SyslogSignConfig`]. Needs `format = "rfc5424"`.
    pub sign: Option<SyslogSignConfig>,
}

/// `[sink.sign]` of a syslog sink: RFC 5848 Signature and Certificate
/// Blocks sent with the records; see
/// [`SyslogSignOptions`](super::SyslogSignOptions) for each setting.
///
/// ```toml
/// [sink.sign]
/// key_file = "/etc/dplog/syslog-sign.key"   # 0600, dplog-verify keygen
/// rsid_file = "/var/lib/dplog/syslog.rsid"
/// every_messages = 25
/// every_s = 10
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SyslogSignConfig {
    /// Ed25519 private key, PKCS#8 PEM, mode 0600 or 0400.
    pub key_file: PathBuf,
    /// Reboot session ID state file (created when missing).
    pub rsid_file: PathBuf,
    /// Messages per Signature Block (1..=99). Default 25.
    #[serde(default = "sign_every_messages")]
    pub every_messages: usize,
    /// Longest wait of a message for its block, in seconds (0: none).
    /// Default 10.
    #[serde(default = "sign_every_s")]
    pub every_s: u64,
    /// PRI of the block messages. Default 110.
    #[serde(default = "sign_pri")]
    pub pri: u8,
    /// HOSTNAME of the block messages; default this host's name.
    #[serde(default)]
    pub hostname: Option<String>,
    /// APP-NAME of the block messages. Default `dplog`.
    #[serde(default = "sign_app_name")]
    pub app_name: String,
    /// Certificate Block resent after this many Signature Blocks. Default
    /// 10.
    #[serde(default = "sign_cert_every_blocks")]
    pub cert_every_blocks: u32,
    /// Copies of each Signature Block (1..=4). Default 1.
    #[serde(default = "sign_copies")]
    pub copies: u8,
}

fn sign_default() -> super::SyslogSignOptions {
    super::SyslogSignOptions::new("", "")
}
fn sign_every_messages() -> usize {
    sign_default().every_messages
}
fn sign_every_s() -> u64 {
    sign_default().every_ms / 1000
}
fn sign_pri() -> u8 {
    sign_default().pri
}
fn sign_app_name() -> String {
    sign_default().app_name
}
fn sign_cert_every_blocks() -> u32 {
    sign_default().cert_every_blocks
}
fn sign_copies() -> u8 {
    sign_default().copies
}

impl SyslogSignConfig {
    /// The sink's signing options.
    pub fn options(&self) -> super::SyslogSignOptions {
        super::SyslogSignOptions {
            key_file: self.key_file.clone(),
            rsid_file: self.rsid_file.clone(),
            every_messages: self.every_messages,
            every_ms: self.every_s.saturating_mul(1000),
            pri: self.pri,
            hostname: self.hostname.clone(),
            app_name: self.app_name.clone(),
            cert_every_blocks: self.cert_every_blocks,
            copies: self.copies,
        }
    }
}

impl Default for SyslogSinkConfig {
    fn default() -> Self {
        let d = SyslogSinkOptions::new(SyslogTransport::UnixDatagram(PathBuf::new()));
        Self {
            transport: SyslogTransportName::Udp,
            address: "127.0.0.1:514".into(),
            max_datagram_bytes: d.max_datagram_bytes,
            reconnect_min_ms: d.reconnect_min_ms,
            reconnect_max_ms: d.reconnect_max_ms,
            io_timeout_ms: d.io_timeout_ms,
            relp_window: d.relp_window,
            role: SinkRole::Fanout,
            sign: None,
        }
    }
}

impl SyslogSinkConfig {
    /// The sink options; `InvalidInput` for an address that does not parse.
    pub fn options(&self) -> io::Result<SyslogSinkOptions> {
        let addr = || {
            self.address.parse().map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("syslog address {:?}: {e}", self.address),
                )
            })
        };
        let t = match self.transport {
            SyslogTransportName::Udp => SyslogTransport::Udp(addr()?),
            SyslogTransportName::Tcp => SyslogTransport::Tcp(addr()?),
            SyslogTransportName::Relp => SyslogTransport::Relp(addr()?),
            SyslogTransportName::UnixDgram => {
                SyslogTransport::UnixDatagram(self.address.clone().into())
            }
            SyslogTransportName::UnixStream => {
                SyslogTransport::UnixStream(self.address.clone().into())
            }
        };
        Ok(SyslogSinkOptions {
            transport: t,
            max_datagram_bytes: self.max_datagram_bytes,
            reconnect_min_ms: self.reconnect_min_ms,
            reconnect_max_ms: self.reconnect_max_ms,
            io_timeout_ms: self.io_timeout_ms,
            relp_window: self.relp_window,
            sign: self.sign.as_ref().map(SyslogSignConfig::options),
        })
    }
}

impl SinkSettings for SyslogSinkConfig {
    /// One message per line: the line formats only
    /// ([`lines_only`]); over `udp`, `tcp` or
    /// `relp`, `address` an IP address and port (`127.0.0.1:514`,
    /// `[::1]:514`), which the sink would only refuse when it opens.
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        if let Some(e) = lines_only("syslog", format) {
            return Err(e);
        }
        if self.sign.is_some() && format != "rfc5424" {
            return Err(SettingsError::new(
                "sign",
                format!(
                    "sign: RFC 5848 signature blocks are RFC 5424 messages, and a verifier \
                     reads the records as such; use [format] type = \"rfc5424\", not {format:?}"
                ),
            ));
        }
        use SyslogTransportName::{Relp, Tcp, Udp};
        let a = &self.address;
        if !matches!(self.transport, Udp | Tcp | Relp) || a.parse::<std::net::SocketAddr>().is_ok()
        {
            return Ok(());
        }
        Err(SettingsError::new(
            "address",
            format!(
                "address = {a:?}: not an IP address and port{} (e.g. \"127.0.0.1:514\", \
                 \"[::1]:514\"); a local socket takes transport = \"unix_dgram\" or \
                 \"unix_stream\"",
                a.rsplit_once(':')
                    .and_then(|(h, _)| dotted_why(h))
                    .map_or(String::new(), |w| format!(": {w}")),
            ),
        ))
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `syslog T ADDR`, T one of `udp`, `tcp`, `unix-dgram`,
    /// `unix-stream`, `relp`.
    fn describe(&self) -> String {
        let t = match self.transport {
            SyslogTransportName::Udp => "udp",
            SyslogTransportName::Tcp => "tcp",
            SyslogTransportName::UnixDgram => "unix-dgram",
            SyslogTransportName::UnixStream => "unix-stream",
            SyslogTransportName::Relp => "relp",
        };
        format!("syslog {t} {}", self.address)
    }

    /// A [`SyslogSink`]; `header` is not used.
    fn build(&self, _header: Option<&[u8]>) -> io::Result<BoxSink> {
        Ok(Box::new(SyslogSink::new(self.options()?)?))
    }
}
