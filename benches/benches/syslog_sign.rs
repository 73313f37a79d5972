//! The cost of RFC 5848 signing in the syslog sink, on the sink's thread:
//! one batch of 1000 RFC 5424 lines of a user's record (a DHCP lease,
//! ~230 bytes each) written with `SyslogSink::write_batch` over UDP to a
//! socket on 127.0.0.1 that nobody reads (the kernel drops what does not
//! fit its buffer; the send is what is timed), with and without `sign`
//! (SHA-256 of every message, a Signature Block of 25 hashes signed with
//! Ed25519 and sent every 25 messages, 40 per batch; and with blocks of
//! 99 hashes, 11 per batch, in datagrams of up to 8 KiB). `thrpt` is
//! messages/s; the differences are the signing costs: per message (the
//! hash) and per block (the signature and its datagram).

#![allow(missing_docs)] // criterion_main! generates main

use std::net::UdpSocket;
use std::sync::OnceLock;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dplog::formatters::{Format, FormatSpec};
use dplog::schema::{HasSchema, Schema};
use dplog::sinks::syslog::SyslogSignOptions;
use dplog::sinks::{seal, SyslogSink, SyslogSinkOptions, SyslogTransport};
use dplog::{schema, Formatter, Record, RecordHeader, Sink};
use dplog_benches::criterion_config;

/// A DHCP server's lease grant: 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Lease {
    header: RecordHeader,
    time_ns: u64,
    client: u32,
    seq: u32,
    lease_s: u32,
    relay_port: u16,
    _pad: u16,
}
const _: () = assert!(std::mem::size_of::<Lease>() == 32);

impl Record for Lease {
    const SCHEMA_ID: u16 = 711;
    fn header(&self) -> &RecordHeader {
        &self.header
    }
}

// SAFETY: repr(C), 8 + 8 + 4 + 4 + 4 + 2 + 2 = 32 bytes without implicit
// padding (size asserted above); the schema is built from its own
// offset_of! values and size_of.
unsafe impl HasSchema for Lease {
    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(|| {
            schema!(Lease, id = 711, name = "dhcpLease", [
                time_ns => "observationTimeMilliseconds": NsTimestamp, ie 323;
                client => "clientAddress": Ipv4, ie 0;
                seq => "leaseSeq": U32, ie 0;
                lease_s => "leaseSeconds": U32, ie 0;
                relay_port => "relayPort": Port, ie 0;
            ])
            .unwrap()
        })
    }
}

const N: u32 = 1000;

fn batch() -> Vec<u8> {
    let mut f = FormatSpec {
        kind: Format::Rfc5424,
        ..FormatSpec::default()
    }
    .formatter(&[Lease::schema()])
    .unwrap();
    let mut out = Vec::new();
    for i in 0..N {
        let r = Lease {
            header: RecordHeader::of::<Lease>(),
            time_ns: 1_767_225_600_000_000_000 + u64::from(i) * 1_000_000,
            client: 0x0A01_0000 + i,
            seq: i,
            lease_s: 3600,
            relay_port: 67,
            _pad: 0,
        };
        f.format(&r, &mut out);
    }
    out
}

fn bench(c: &mut Criterion) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = rx.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = (dir.path().join("b.key"), dir.path().join("b.pub"));
    seal::generate_key_pair(&key, &public).unwrap();
    let b = batch();
    let mut g = c.benchmark_group("syslog_sign");
    g.throughput(Throughput::Elements(u64::from(N)));
    for (name, every) in [("udp_plain", 0), ("udp_signed", 25), ("udp_signed_99", 99)] {
        let mut o = SyslogSinkOptions::new(SyslogTransport::Udp(addr));
        o.max_datagram_bytes = 8192;
        if every > 0 {
            o.sign = Some(SyslogSignOptions {
                every_messages: every,
                every_ms: 0,
                ..SyslogSignOptions::new(&key, dir.path().join("b.rsid"))
            });
        }
        let mut sink = SyslogSink::new(o).unwrap();
        g.bench_function(name, |bn| bn.iter(|| sink.write_batch(&b).unwrap()));
        sink.close().unwrap();
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
