//! `type = "kafka"` settings (features `config` and `kafka`):
//! [`KafkaSinkConfig`].

use std::io;

use serde::Deserialize;

use super::{KafkaKey, KafkaSink, KafkaSinkOptions};
use crate::config::{host_port_why, lines_only, SettingsError, SinkRole, SinkSettings};
use crate::route::BoxSink;

/// `type = "kafka"` settings; see [`KafkaSinkOptions`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaSinkConfig {
    /// `bootstrap.servers`. Default `127.0.0.1:9092`.
    pub brokers: String,
    /// Topic. Default `dplog`.
    pub topic: String,
    /// Field whose value keys each message, e.g. `sourceIPv4Address`.
    /// Default: no key.
    pub key_field: Option<String>,
    /// Idempotent producer. Default true.
    pub idempotent: bool,
    /// `linger.ms`. Default 5.
    pub linger_ms: u64,
    /// `message.timeout.ms`; 0 = no local timeout. Default 0.
    pub message_timeout_ms: u64,
    /// `queue.buffering.max.messages`. Default 1000000.
    pub queue_max_messages: u64,
    /// `message.max.bytes`. Default: librdkafka's.
    pub message_max_bytes: Option<u64>,
    /// Consecutive same-key lines packed per Kafka message. Default 1.
    pub lines_per_message: usize,
    /// Other librdkafka properties.
    pub properties: std::collections::BTreeMap<String, String>,
    /// No delivery report for this long (ms) while messages are in flight
    /// = the cluster is stalled: new batches get a retryable error, so the
    /// consumer backs off and a failover set switches to its secondary;
    /// 0 = never. Default 5000.
    pub ack_timeout_ms: u64,
    /// `fanout` (default) or `failover`.
    pub role: SinkRole,
}

impl Default for KafkaSinkConfig {
    fn default() -> Self {
        let d = KafkaSinkOptions::new("127.0.0.1:9092", "dplog");
        Self {
            brokers: d.brokers,
            topic: d.topic,
            key_field: None,
            idempotent: d.idempotent,
            linger_ms: d.linger_ms,
            message_timeout_ms: d.message_timeout_ms,
            queue_max_messages: d.queue_max_messages,
            message_max_bytes: d.message_max_bytes,
            lines_per_message: d.lines_per_message,
            properties: Default::default(),
            ack_timeout_ms: d.ack_timeout_ms,
            role: SinkRole::Fanout,
        }
    }
}

impl KafkaSinkConfig {
    /// The sink options.
    pub fn options(&self) -> KafkaSinkOptions {
        KafkaSinkOptions {
            brokers: self.brokers.clone(),
            topic: self.topic.clone(),
            key: self
                .key_field
                .clone()
                .map_or(KafkaKey::None, KafkaKey::Field),
            idempotent: self.idempotent,
            linger_ms: self.linger_ms,
            message_timeout_ms: self.message_timeout_ms,
            queue_max_messages: self.queue_max_messages,
            message_max_bytes: self.message_max_bytes,
            lines_per_message: self.lines_per_message,
            properties: self.properties.clone().into_iter().collect(),
            ack_timeout_ms: self.ack_timeout_ms,
        }
    }
}

impl SinkSettings for KafkaSinkConfig {
    /// One message per line: the line formats only
    /// ([`lines_only`]); `brokers` a
    /// comma-separated list of `host[:port]` (librdkafka would retry a bad
    /// one forever).
    fn check(&self, format: &str) -> Result<(), SettingsError> {
        if let Some(e) = lines_only("kafka", format) {
            return Err(e);
        }
        let b = &self.brokers;
        match b.split(',').find_map(|h| host_port_why(h.trim(), false)) {
            None => Ok(()),
            Some(w) => Err(SettingsError::new(
                "brokers",
                format!(
                    "brokers = {b:?}: {w} (a comma-separated list of host[:port], e.g. \
                     \"127.0.0.1:9092,kafka-2:9092\")"
                ),
            )),
        }
    }

    fn role(&self) -> SinkRole {
        self.role
    }

    /// `kafka topic T at BROKERS`.
    fn describe(&self) -> String {
        format!("kafka topic {} at {}", self.topic, self.brokers)
    }

    /// A [`KafkaSink`]; `header` is not used.
    fn build(&self, _header: Option<&[u8]>) -> io::Result<BoxSink> {
        Ok(Box::new(KafkaSink::new(self.options())?))
    }
}
