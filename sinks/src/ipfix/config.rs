//! `type = "ipfix"` settings (feature `config`): [`IpfixSinkConfig`].

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use serde::Deserialize;

use super::{IpfixExporter, IpfixExporterOptions, IpfixTransport};
use crate::config::{host_port_why, SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// IPFIX transport names.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum IpfixTransportName {
    /// RFC 7011 section 10.3. Default.
    #[default]
    Udp,
    /// RFC 7011 section 10.4.
    Tcp,
}

/// `type = "ipfix"` settings; see [`IpfixExporterOptions`]. Takes
/// `[format] type = "ipfix"` only (checked when the config is loaded).
///
/// ```toml
/// [format]
/// type = "ipfix"
/// [sink]
/// type = "ipfix"
/// transport = "udp"              # or "tcp"
/// address = "192.0.2.10:4739"    # host:port; IPv6 as "[2001:db8::1]:4739"
/// max_message_bytes = 1400       # one message per datagram, at most this
/// template_refresh_secs = 60     # UDP: templates again after this long
/// template_refresh_messages = 1000  # UDP: or after this many messages (0: off)
/// # observation_domain_id = 7    # default: [format.ipfix]'s
/// ```
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IpfixSinkConfig {
    /// `udp` (default) or `tcp`.
    pub transport: IpfixTransportName,
    /// The collector, `host:port` (an IP literal, IPv6 in brackets, or a
    /// name resolved when the sink opens: its first address). Default
    /// `127.0.0.1:4739`.
    pub address: String,
    /// Largest message in bytes (the UDP payload). Default 1400.
    pub max_message_bytes: usize,
    /// UDP: seconds between template re-sends. Default 60.
    pub template_refresh_secs: u64,
    /// UDP: messages between template re-sends; 0 = by time only.
    /// Default 1000.
    pub template_refresh_messages: u64,
    /// Observation Domain ID of every message. Default: the format's.
    /// A collector tells exporters apart by it and their address: give
    /// each exporter on one host a domain of its own (see
    /// [`IpfixExporterOptions::observation_domain_id`](super::IpfixExporterOptions::observation_domain_id)).
    pub observation_domain_id: Option<u32>,
    /// TCP: first reconnect backoff (ms). Default 10.
    pub reconnect_min_ms: u64,
    /// TCP: longest reconnect backoff (ms). Default 2000.
    pub reconnect_max_ms: u64,
    /// TCP: connect/write timeout (ms). Default 1000.
    pub io_timeout_ms: u64,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
}

impl Default for IpfixSinkConfig {
    fn default() -> Self {
        let d = IpfixExporterOptions::new(IpfixTransport::Udp(SocketAddr::from((
            [127, 0, 0, 1],
            super::IPFIX_PORT,
        ))));
        Self {
            transport: IpfixTransportName::Udp,
            address: format!("127.0.0.1:{}", super::IPFIX_PORT),
            max_message_bytes: d.max_message_bytes,
            template_refresh_secs: d.template_refresh_secs,
            template_refresh_messages: d.template_refresh_messages,
            observation_domain_id: None,
            reconnect_min_ms: d.reconnect_min_ms,
            reconnect_max_ms: d.reconnect_max_ms,
            io_timeout_ms: d.io_timeout_ms,
            role: SinkRole::Fanout,
        }
    }
}

impl IpfixSinkConfig {
    /// The exporter options; `InvalidInput` for an address that does not
    /// resolve.
    pub fn options(&self) -> io::Result<IpfixExporterOptions> {
        let addr = self
            .address
            .to_socket_addrs()
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("ipfix address {:?}: {e}", self.address),
                )
            })?
            .next()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("ipfix address {:?} resolves to nothing", self.address),
                )
            })?;
        let transport = match self.transport {
            IpfixTransportName::Udp => IpfixTransport::Udp(addr),
            IpfixTransportName::Tcp => IpfixTransport::Tcp(addr),
        };
        Ok(IpfixExporterOptions {
            transport,
            max_message_bytes: self.max_message_bytes,
            template_refresh_secs: self.template_refresh_secs,
            template_refresh_messages: self.template_refresh_messages,
            observation_domain_id: self.observation_domain_id,
            reconnect_min_ms: self.reconnect_min_ms,
            reconnect_max_ms: self.reconnect_max_ms,
            io_timeout_ms: self.io_timeout_ms,
        })
    }
}

impl SinkSettings for IpfixSinkConfig {
    /// The exporter re-packs IPFIX records into messages: `ipfix` only;
    /// `address` must be `host:port` (the host may be a name, resolved
    /// when the sink opens).
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        if format != "ipfix" {
            return Err(SettingsError::new(
                "type",
                format!(
                    "type = \"ipfix\" with [format] type = \"{format}\": the IPFIX exporter \
                     sends IPFIX records and takes [format] type = \"ipfix\" only; set it, or \
                     send {format} to {}",
                    if format == "binary" {
                        "a file or mmap sink"
                    } else {
                        "a file, mmap, syslog or kafka sink"
                    }
                ),
            ));
        }
        match host_port_why(&self.address, true) {
            None => Ok(()),
            Some(w) => Err(SettingsError::new(
                "address",
                format!(
                    "address = {:?}: {w} (e.g. \"192.0.2.10:4739\")",
                    self.address
                ),
            )),
        }
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `ipfix T ADDR`, T `udp` or `tcp`.
    fn describe(&self) -> String {
        let t = match self.transport {
            IpfixTransportName::Udp => "udp",
            IpfixTransportName::Tcp => "tcp",
        };
        format!("ipfix {t} {}", self.address)
    }

    /// An [`IpfixExporter`]; `header` is not used.
    fn build(&self, _header: Option<&[u8]>) -> io::Result<BoxSink> {
        Ok(Box::new(IpfixExporter::new(self.options()?)?))
    }
}
