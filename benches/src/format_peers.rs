//! Peers of the compiled template for the issue's ~120-byte NAT44 text
//! line, shared by `benches/format_template.rs` and
//! `examples/min_of_batches.rs`: a `write!` baseline and a formatter
//! hand-specialised for this one line. Both produce exactly the bytes of
//! [`TEMPLATE`].

use std::io::Write;
use std::net::Ipv4Addr;

use dplog::Formatter;
use dplog_schema_nat::Nat44SessionRecord;

/// The example template, extended with protocol and destination to
/// about 120 bytes per line.
pub const TEMPLATE: &str = "{observationTimeMilliseconds:rfc3339} NAT44 {natEvent:name} \
{sourceIPv4Address}:{sourceTransportPort} -> {postNATSourceIPv4Address}:{postNAPTSourceTransportPort} \
proto={protocolIdentifier} dst={destinationIPv4Address}:{destinationTransportPort}";

/// The RFC 8158 name of `natEvent` `ev`, `?` if unknown.
pub fn event_name(ev: u8) -> &'static str {
    dplog_schema_nat::nat_event::NAMES
        .iter()
        .find(|(v, _)| *v == ev as u32)
        .map_or("?", |(_, n)| n)
}

/// `write!` peer.
#[derive(Debug)]
pub struct FmtWrite {
    sec: u64,
    prefix: String,
}

impl Default for FmtWrite {
    fn default() -> Self {
        Self::new()
    }
}

impl FmtWrite {
    /// A peer with an empty date cache.
    pub fn new() -> Self {
        Self {
            sec: u64::MAX,
            prefix: String::with_capacity(32),
        }
    }
}

impl Formatter<Nat44SessionRecord> for FmtWrite {
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let sec = r.timestamp_ns / 1_000_000_000;
        if sec != self.sec {
            use std::fmt::Write as _;
            let (y, m, d) = dplog::formatters::time::civil_from_days((sec / 86_400) as i64);
            let sod = sec % 86_400;
            self.prefix.clear();
            write!(
                self.prefix,
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                sod / 3600,
                (sod / 60) % 60,
                sod % 60
            )
            .unwrap();
            self.sec = sec;
        }
        writeln!(
            out,
            "{}.{:03}Z NAT44 {} {}:{} -> {}:{} proto={} dst={}:{}",
            self.prefix,
            (r.timestamp_ns / 1_000_000) % 1000,
            event_name(r.nat_event),
            Ipv4Addr::from(r.src_addr),
            r.src_port,
            Ipv4Addr::from(r.post_nat_src_addr),
            r.post_napt_src_port,
            r.protocol,
            Ipv4Addr::from(r.dst_addr),
            r.dst_port
        )
        .expect("writing to a Vec cannot fail");
    }
}

/// "00".."99".
static DIGITS2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Octet text (3 bytes, left-aligned) and its length.
static OCTETS: [([u8; 4], usize); 256] = {
    let mut t = [([0u8; 4], 0usize); 256];
    let mut i = 0;
    while i < 256 {
        let (h, te, o) = ((i / 100) as u8, ((i / 10) % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            ([b'0' + h, b'0' + te, b'0' + o, 0], 3)
        } else if i >= 10 {
            ([b'0' + te, b'0' + o, 0, 0], 2)
        } else {
            ([b'0' + o, 0, 0, 0], 1)
        };
        i += 1;
    }
    t
};

/// The hand-specialised peer: this one line, straight-line code into a
/// fixed buffer, then one copy into the output.
#[derive(Debug)]
pub struct Hand {
    sec: u64,
    /// `YYYY-MM-DDTHH:MM:SS.`
    prefix: [u8; 20],
}

impl Default for Hand {
    fn default() -> Self {
        Self::new()
    }
}

impl Hand {
    /// A peer with an empty date cache.
    pub fn new() -> Self {
        Self {
            sec: u64::MAX,
            prefix: [0; 20],
        }
    }

    #[inline(always)]
    fn ipv4(b: &mut [u8; 160], mut n: usize, a: u32) -> usize {
        for (i, shift) in [24u32, 16, 8, 0].into_iter().enumerate() {
            let (t, len) = &OCTETS[((a >> shift) & 0xff) as usize];
            b[n..n + 4].copy_from_slice(t);
            n += len;
            if i < 3 {
                b[n] = b'.';
                n += 1;
            }
        }
        n
    }

    #[inline(always)]
    fn port(b: &mut [u8; 160], n: usize, p: u16) -> usize {
        let p = p as usize;
        if p >= 10_000 {
            b[n] = b'0' + (p / 10_000) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[(p / 100) % 100]);
            b[n + 3..n + 5].copy_from_slice(&DIGITS2[p % 100]);
            n + 5
        } else if p >= 1000 {
            b[n..n + 2].copy_from_slice(&DIGITS2[p / 100]);
            b[n + 2..n + 4].copy_from_slice(&DIGITS2[p % 100]);
            n + 4
        } else if p >= 100 {
            b[n] = b'0' + (p / 100) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[p % 100]);
            n + 3
        } else if p >= 10 {
            b[n..n + 2].copy_from_slice(&DIGITS2[p]);
            n + 2
        } else {
            b[n] = b'0' + p as u8;
            n + 1
        }
    }

    #[inline(always)]
    fn lit(b: &mut [u8; 160], n: usize, s: &[u8]) -> usize {
        b[n..n + s.len()].copy_from_slice(s);
        n + s.len()
    }
}

impl Formatter<Nat44SessionRecord> for Hand {
    #[inline]
    fn format(&mut self, r: &Nat44SessionRecord, out: &mut Vec<u8>) {
        let sec = r.timestamp_ns / 1_000_000_000;
        if sec != self.sec {
            let (y, m, d) = dplog::formatters::time::civil_from_days((sec / 86_400) as i64);
            let sod = (sec % 86_400) as usize;
            let y = y as usize;
            let p = &mut self.prefix;
            p[0..2].copy_from_slice(&DIGITS2[y / 100]);
            p[2..4].copy_from_slice(&DIGITS2[y % 100]);
            p[4] = b'-';
            p[5..7].copy_from_slice(&DIGITS2[m as usize]);
            p[7] = b'-';
            p[8..10].copy_from_slice(&DIGITS2[d as usize]);
            p[10] = b'T';
            p[11..13].copy_from_slice(&DIGITS2[sod / 3600]);
            p[13] = b':';
            p[14..16].copy_from_slice(&DIGITS2[(sod / 60) % 60]);
            p[16] = b':';
            p[17..19].copy_from_slice(&DIGITS2[sod % 60]);
            p[19] = b'.';
            self.sec = sec;
        }
        let mut b = [0u8; 160];
        b[..20].copy_from_slice(&self.prefix);
        let ms = ((r.timestamp_ns / 1_000_000) % 1000) as usize;
        b[20] = b'0' + (ms / 100) as u8;
        b[21..23].copy_from_slice(&DIGITS2[ms % 100]);
        let mut n = Self::lit(&mut b, 23, b"Z NAT44 ");
        n = Self::lit(&mut b, n, event_name(r.nat_event).as_bytes());
        b[n] = b' ';
        n = Self::ipv4(&mut b, n + 1, r.src_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.src_port);
        n = Self::lit(&mut b, n, b" -> ");
        n = Self::ipv4(&mut b, n, r.post_nat_src_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.post_napt_src_port);
        n = Self::lit(&mut b, n, b" proto=");
        n = Self::port(&mut b, n, r.protocol as u16);
        n = Self::lit(&mut b, n, b" dst=");
        n = Self::ipv4(&mut b, n, r.dst_addr);
        b[n] = b':';
        n = Self::port(&mut b, n + 1, r.dst_port);
        b[n] = b'\n';
        out.extend_from_slice(&b[..n + 1]);
    }
}
