//! `dplog_start`: the consumer threads, their formatters (the configured
//! format compiled for the schemas the handle serves: the registered
//! ones, and the NAT schemas that fit the slot when asked for; and the
//! fault-injection hook of the C tests), the
//! per-type priorities, their sinks and CPUs.

use std::sync::Arc;

use dplog::config::LogConfig;
use dplog::formatters::SchemaFormatter;
use dplog::Schema;

use crate::handle::{dplog_t, logger, Running, State};
use crate::result::{
    config_error, dplog_result, fail, guard, logger_error, DPLOG_ERR_INVALID_ARG, DPLOG_ERR_IO,
    DPLOG_ERR_NULL, DPLOG_OK,
};
use crate::sizes::SchemaSizes;
use crate::slots::AnyLogger;
use crate::tombstone::lock;
use crate::types::DPLOG_CONSUMERS_MAX;

/// Starts the consumer threads (named `dplog-consumer`): one per entry of
/// `cores`, pinned to that CPU, or one when `n_cores == 0` (`cores` may be
/// NULL), pinned to the config's `[ring] consumer_cpu` if set.
///
/// With several consumers, each has its own formatter and its own sink
/// instance and drains its own group of rings: the ring of
/// `dplog_producer_new(h, ring_id, ...)` goes to consumer
/// `ring_id % n_cores` (round-robin over ring ids; choose ids to balance
/// the forwarding cores). Consumer 0 writes the configured sink; consumer
/// `i > 0` writes a file sink's `path` with the suffix `.i` (`nat.log`,
/// `nat.log.1`, `nat.log.2`, ...; in every `[[sink]]` table), an mmap
/// or archive sink's `dir` with the suffix `.i` (a directory that must
/// exist, as `dir` must), and opens its own connection for a syslog or
/// Kafka sink. Records of one ring stay in order; records of
/// rings on different consumers are not ordered with each other.
/// `dplog_stats` and `dplog_close` add the counters of all consumers up;
/// their latency percentiles are the largest of the consumers' (an upper
/// bound). `dplog_flush` and `dplog_reopen` act on every consumer.
///
/// Errors: `DPLOG_ERR_NULL` (handle NULL, or `cores` NULL with
/// `n_cores > 0`), `DPLOG_ERR_INVALID_ARG` (a CPU this process cannot run
/// on, or `n_cores > DPLOG_CONSUMERS_MAX`), `DPLOG_ERR_STATE` (already
/// started), `DPLOG_ERR_CLOSED`, `DPLOG_ERR_CONFIG` (the format or
/// `[ring.priorities]`, see below; ring settings such as a capacity that
/// is not a power of two are refused by `dplog_open` already), `DPLOG_ERR_IO`
/// (thread or sink failure, e.g. `nat.log.1` cannot be created). All or
/// nothing: on error no consumer runs and the handle stays as it was (not
/// started).
///
/// The format is compiled here for the types the handle serves: the
/// registered ones (in registration order), then, if asked for
/// (`dplog_register_nat_schemas` or `[schemas] nat = true`), the NAT
/// schemas that fit the slot; nothing else (a CSV header has only their
/// columns, IPFIX only their templates). `[format] template` applies to
/// the first of them (`nat44Session` when only the NAT schemas are
/// served); `[format.templates]` may name any of them. A template
/// that does not compile or names no such type, and a `[ring.priorities]`
/// entry naming no such type, are `DPLOG_ERR_CONFIG` with the message in
/// `dplog_last_error`.
///
/// Thread-safety: any thread; serialized with other calls on the handle.
///
/// # Safety
/// `h` is NULL or returned by `dplog_open*`; `cores` is NULL or valid for
/// `n_cores` elements.
#[no_mangle]
pub unsafe extern "C" fn dplog_start(
    h: *mut dplog_t,
    cores: *const u32,
    n_cores: usize,
) -> dplog_result {
    guard(|| {
        // SAFETY: caller contract on h.
        let l = match unsafe { logger(h) } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if n_cores > 0 && cores.is_null() {
            return fail(DPLOG_ERR_NULL, "dplog_start: cores is NULL");
        }
        if n_cores > DPLOG_CONSUMERS_MAX {
            return fail(
                DPLOG_ERR_INVALID_ARG,
                format!("dplog_start: {n_cores} consumer cores, at most {DPLOG_CONSUMERS_MAX}"),
            );
        }
        let cpus: Vec<usize> = if n_cores == 0 {
            Vec::new()
        } else {
            // SAFETY: cores is non-NULL (checked) and valid for n_cores
            // elements (caller contract).
            unsafe { core::slice::from_raw_parts(cores, n_cores) }
                .iter()
                .map(|&c| c as usize)
                .collect()
        };
        for &c in &cpus {
            if let Err(e) = cpu_allowed(c) {
                return e;
            }
        }
        let mut st = lock(&l.state);
        let pending = match st.opened("dplog_start: already started") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let slot_bytes = l.slot_bytes;
        // The user's types first: `template` applies to the first schema.
        let all: Vec<&Schema> = crate::handle::served(&pending.schemas, pending.nat, slot_bytes);
        let sizes = Arc::new(SchemaSizes::new(
            all.iter().copied(),
            pending.nat,
            slot_bytes,
        ));
        // Priorities under `degrade` and event times of every record type,
        // with `[ring.priorities]` applied.
        let table = match pending.config.schema_table(&all) {
            Ok(t) => t,
            Err(e) => return config_error(with_nat_hint(e, &pending.config, pending.nat)),
        };
        // Compiled once here so that a bad template fails before any
        // consumer starts; each consumer gets its own compiled copy.
        if let Err(e) = pending.config.format.formatter(&all) {
            return config_error(with_nat_hint(e, &pending.config, pending.nat));
        }
        // The sinks against the record types served (an archive index, a
        // ClickHouse table and record_type), before any consumer starts.
        if let Err(e) = pending.config.check_sinks_for(&all) {
            return config_error(e);
        }
        let panic_after = std::env::var("DPLOG_FAULT_CONSUMER_PANIC_AFTER")
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        let n_consumers = cpus.len().max(1);
        let mut loggers = Vec::with_capacity(n_consumers);
        for i in 0..n_consumers {
            let mut cfg = pending.config.clone();
            if let Some(&c) = cpus.get(i) {
                cfg.ring.consumer_cpu = Some(c);
            }
            let started = match consumer_formatter(&cfg, &all) {
                Ok(formatter) => {
                    // Consumer 0 writes to the sink opened by dplog_open
                    // (the default sink opens here); consumer i > 0 to its
                    // own instance (see dplog_start). A format with a file
                    // header (CSV) needs the record types, known only now:
                    // its sinks are opened again with that header, so a
                    // file appended to by several runs has it once, at its
                    // top (dplog_open opened the sink only to fail fast).
                    let header = cfg.format.spec().file_header(&all).is_some();
                    let sink = match (i, pending.sink.take()) {
                        (0, Some(s)) if !header => Ok(s),
                        (_, early) => {
                            drop(early);
                            cfg.sink
                                .for_consumer(i)
                                .build_for_schema(&cfg.format, &all)
                                .map_err(|e| fail(DPLOG_ERR_IO, format!("cannot open sink: {e}")))
                        }
                    };
                    sink.and_then(|sink| {
                        let mut lc = cfg.logger_config();
                        lc.schemas = table.clone();
                        AnyLogger::start(slot_bytes, lc, formatter, panic_after, sink)
                            .map_err(logger_error)
                    })
                }
                Err(e) => Err(e),
            };
            match started {
                Ok(logger) => loggers.push(logger),
                Err(e) => {
                    // All or nothing: stop the consumers already started.
                    // The sinks went down with them; the next start (or
                    // close) opens them again from the config.
                    for lg in loggers {
                        let _ = lg.shutdown();
                    }
                    return e;
                }
            }
        }
        if let Some(m) = &*lock(&l.shared.metrics) {
            m.attach(&loggers);
        }
        *st = State::Started(Box::new(Running { loggers, sizes }));
        DPLOG_OK
    })
}

/// `e` (a refused template or priority) with, when the config names a
/// NAT schema that the handle does not serve (`nat` false), how to ask
/// for the NAT schemas.
fn with_nat_hint(
    e: dplog::config::ConfigError,
    config: &LogConfig,
    nat: bool,
) -> dplog::config::ConfigError {
    let named = config
        .format
        .templates
        .keys()
        .chain(config.ring.priorities.keys())
        .find(|n| dplog::nat::all().iter().any(|s| s.name() == n.as_str()));
    match (e, named) {
        (dplog::config::ConfigError::Parse(m), Some(n)) if !nat => {
            dplog::config::ConfigError::Parse(format!(
                "{m}; {n} is a built-in NAT schema, which this logger does not serve: call \
                 dplog_register_nat_schemas(h) before dplog_start, or set [schemas] nat = true"
            ))
        }
        (e, _) => e,
    }
}

/// The formatter of one consumer: the configured format for `schemas`.
fn consumer_formatter(
    cfg: &LogConfig,
    schemas: &[&Schema],
) -> Result<SchemaFormatter, dplog_result> {
    cfg.format.formatter(schemas).map_err(config_error)
}

fn cpu_allowed(cpu: usize) -> Result<(), dplog_result> {
    // SAFETY: cpu_set_t is plain data (all-zero is valid); sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    let (rc, set) = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        let rc = libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (rc, set)
    };
    let ok = cpu < libc::CPU_SETSIZE as usize
        && (rc != 0
            // SAFETY: cpu < CPU_SETSIZE, so CPU_ISSET reads inside `set`.
            || unsafe { libc::CPU_ISSET(cpu, &set) });
    if ok {
        Ok(())
    } else {
        Err(fail(
            DPLOG_ERR_INVALID_ARG,
            format!("CPU {cpu} is not in this process's affinity mask"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{dplog_field_desc, DPLOG_FIELD_U32};

    #[test]
    fn ring_priorities_name_user_types_and_reach_the_loggers_table() {
        let text = c"[ring]\nbackpressure = \"degrade\"\n[ring.priorities]\nmyType = 3\n\
                     [sink]\ntype = \"file\"\npath = \"/dev/null\"\n";
        let mut h: *mut dplog_t = core::ptr::null_mut();
        // SAFETY: text is NUL-terminated, h is writable.
        let rc = unsafe { crate::dplog_open_str(text.as_ptr(), &mut h) };
        assert_eq!(rc, DPLOG_OK);
        let fields = [dplog_field_desc {
            name: c"v".as_ptr(),
            offset: 8,
            size: 4,
            kind: DPLOG_FIELD_U32,
            ie_id: 0,
            enum_names: core::ptr::null(),
            enum_count: 0,
        }];
        let mut id = 0u16;
        // SAFETY: h is live; the name and descriptor are valid.
        let r = unsafe {
            crate::dplog_schema_register(h, c"myType".as_ptr(), 16, fields.as_ptr(), 1, &mut id)
        };
        assert_eq!(r, DPLOG_OK);
        // SAFETY: h is live.
        assert_eq!(unsafe { dplog_start(h, core::ptr::null(), 0) }, DPLOG_OK);
        let mut rec = [0u8; 16];
        rec[0..2].copy_from_slice(&16u16.to_ne_bytes());
        rec[2..4].copy_from_slice(&id.to_ne_bytes());
        {
            // SAFETY: h is live (closed below).
            let l = unsafe { logger(h) }.unwrap();
            let st = lock(&l.state);
            let State::Started(run) = &*st else {
                panic!("started")
            };
            assert_eq!(run.loggers[0].schemas().priority(&rec), Some(3));
            // A type without an entry keeps its own rule (none for a
            // user type: the producer then uses PRIORITY_NORMAL).
            let mut other = rec;
            other[2..4].copy_from_slice(&(id + 1).to_ne_bytes());
            assert_eq!(run.loggers[0].schemas().priority(&other), None);
        }
        // SAFETY: h is live; no stats wanted.
        let rc = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, DPLOG_OK);
    }

    #[test]
    fn consumer_i_gets_its_own_file_and_mmap_dir() {
        let cfg = LogConfig::from_toml_str(
            "[[sink]]\ntype = \"file\"\npath = \"/var/log/nat.log\"\n\
             [[sink]]\ntype = \"mmap\"\ndir = \"/var/log/nat-mmap\"\n",
        )
        .unwrap();
        let paths = |c: &dplog::config::SinkConfig| -> Vec<String> {
            match c {
                dplog::config::SinkConfig::Set(v) => v
                    .iter()
                    .map(|s| match s {
                        dplog::config::SinkConfig::File(f) => f.path.display().to_string(),
                        dplog::config::SinkConfig::Mmap(m) => m.dir.display().to_string(),
                        _ => String::new(),
                    })
                    .collect(),
                _ => panic!("two [[sink]] tables make a set"),
            }
        };
        assert_eq!(
            paths(&cfg.sink.for_consumer(0)),
            ["/var/log/nat.log", "/var/log/nat-mmap"]
        );
        assert_eq!(
            paths(&cfg.sink.for_consumer(3)),
            ["/var/log/nat.log.3", "/var/log/nat-mmap.3"]
        );
    }

    /// One run of a C program logging `n` user records (a DNS query type)
    /// as CSV to the file `path` (appended to).
    fn csv_run(path: &std::path::Path, n: u32) {
        use crate::testutil::{log_dns_query, open, register_dns_query, start_with_producer};
        let h = open(&format!(
            "[format]\ntype = \"csv\"\n[sink]\ntype = \"file\"\npath = \"{}\"\n",
            path.display()
        ));
        let id = register_dns_query(h);
        let p = start_with_producer(h);
        for q in 0..n {
            assert_eq!(log_dns_query(p, id, q), DPLOG_OK);
        }
        // SAFETY: p was returned by dplog_producer_new and is freed once.
        assert_eq!(unsafe { crate::dplog_producer_free(p) }, DPLOG_OK);
        // SAFETY: h is live; no stats wanted.
        let rc = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, DPLOG_OK);
    }

    /// Two runs of a C program appending user records to one CSV file:
    /// the header is the file's first line and only there, so every row
    /// is read under its own columns.
    #[test]
    fn a_csv_file_appended_to_by_two_runs_has_one_header_at_its_top() {
        let dir = std::env::temp_dir().join(format!("dplog-ffi-csv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("dns.csv");
        csv_run(&path, 3);
        csv_run(&path, 4);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("recordType,"), "{text}");
        assert_eq!(lines.len(), 1 + 3 + 4, "{text}");
        assert_eq!(
            lines.iter().filter(|l| **l == lines[0]).count(),
            1,
            "one header: {text}"
        );
        assert!(
            lines[1..].iter().all(|l| l.starts_with("dnsQuery,")),
            "{text}"
        );
    }

    /// The sink checks `dplog_start` runs against the types it serves: a
    /// ClickHouse `record_type` no registered type has, and ClickHouse
    /// sinks that leave a served type stored nowhere, are refused with a
    /// configuration error (no server needed: both come before any
    /// connection).
    #[test]
    fn clickhouse_sinks_are_checked_against_the_served_types() {
        use crate::testutil::{last_error, open, register_dns_query, register_one_field};
        let dead = format!("http://127.0.0.1:{}", dplog_testkit::free_tcp_port());
        let start = |record_type: &str, second: bool| {
            let h = open(&format!(
                "[format]\ntype = \"binary\"\n[sink]\ntype = \"clickhouse\"\n\
                 url = \"{dead}\"\ntable = \"t\"\n{record_type}"
            ));
            register_dns_query(h);
            if second {
                register_one_field(
                    h,
                    c"aclDrop",
                    16,
                    c"ruleId",
                    4,
                    crate::types::DPLOG_FIELD_U32,
                );
            }
            // SAFETY: h is live.
            let rc = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
            let msg = last_error();
            // SAFETY: h is live; no stats wanted.
            unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
            (rc, msg)
        };
        let (rc, msg) = start("record_type = \"dnsQueryy\"\n", false);
        assert_eq!(rc, crate::result::DPLOG_ERR_CONFIG, "{msg}");
        assert!(
            msg.contains("record_type = \"dnsQueryy\": the logger serves no such record type (it serves dnsQuery)"),
            "{msg}"
        );
        let (rc, msg) = start("", true);
        assert_eq!(rc, crate::result::DPLOG_ERR_CONFIG, "{msg}");
        assert!(
            msg.contains(
                "stores one record type (dnsQuery), so the records of aclDrop would go to no sink"
            ),
            "{msg}"
        );
    }

    /// A firewall's `fwDrop` and a load balancer's `lbStats`, registered
    /// from C: a field of lbStats that declares (`DPLOG_IE_ENTERPRISE |
    /// id`) the enterprise element id fwDrop's `bytesIn` derives is
    /// refused by `dplog_start` of an IPFIX logger, naming both; two
    /// fields of one type whose derived ids meet are refused by
    /// `dplog_schema_register` itself.
    #[test]
    fn enterprise_element_ids_that_mean_two_fields_are_refused_from_c() {
        use crate::types::{
            DPLOG_FIELD_U16, DPLOG_FIELD_U32, DPLOG_FIELD_U64, DPLOG_IE_ENTERPRISE,
        };
        let field = |name: &'static std::ffi::CStr, offset, size, kind, ie_id| dplog_field_desc {
            name: name.as_ptr(),
            offset,
            size,
            kind,
            ie_id,
            enum_names: core::ptr::null(),
            enum_count: 0,
        };
        let register = |h: *mut dplog_t, name: &std::ffi::CStr, fields: &[dplog_field_desc]| {
            let mut id = 0u16;
            // SAFETY: h is live; the names and descriptors are valid.
            unsafe {
                crate::dplog_schema_register(
                    h,
                    name.as_ptr(),
                    24,
                    fields.as_ptr(),
                    fields.len(),
                    &mut id,
                )
            }
        };
        let h = crate::testutil::open(
            "[format]\ntype = \"ipfix\"\n[sink]\ntype = \"file\"\npath = \"/dev/null\"\n",
        );
        let fw = [
            field(c"ruleId", 8, 4, DPLOG_FIELD_U32, 0),
            field(c"bytesIn", 16, 8, DPLOG_FIELD_U64, 0),
        ];
        assert_eq!(register(h, c"fwDrop", &fw), DPLOG_OK);
        // f116 and f135 derive one id (26276): refused at registration.
        let meet = [
            field(c"f116", 8, 4, DPLOG_FIELD_U32, 0),
            field(c"f135", 12, 2, DPLOG_FIELD_U16, 0),
        ];
        assert_eq!(
            register(h, c"lbMeet", &meet),
            crate::result::DPLOG_ERR_INVALID_ARG
        );
        let msg = crate::testutil::last_error();
        assert!(msg.contains("id 26276") && msg.contains("f116"), "{msg}");
        let stats = [field(
            c"bytesOut",
            8,
            8,
            DPLOG_FIELD_U64,
            DPLOG_IE_ENTERPRISE | 31604,
        )];
        assert_eq!(register(h, c"lbStats", &stats), DPLOG_OK);
        // SAFETY: h is live.
        let rc = unsafe { crate::dplog_start(h, core::ptr::null(), 0) };
        let msg = crate::testutil::last_error();
        // SAFETY: h is live (not started); no stats wanted.
        unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, crate::result::DPLOG_ERR_CONFIG, "{msg}");
        assert!(
            msg.contains(
                "enterprise element 32473/31604 would be field bytesIn (unsigned) of record type \
                 fwDrop and field bytesOut (unsigned) of record type lbStats"
            ),
            "{msg}"
        );
    }

    /// The enterprise element ids of every template record of the IPFIX
    /// messages `b`: `(template id, ids without the enterprise bit)`.
    fn enterprise_ids_of_templates(mut b: &[u8]) -> Vec<(u16, Vec<u16>)> {
        let be16 = |b: &[u8], o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
        let mut out = Vec::new();
        while b.len() >= 16 {
            let (msg, rest) = b.split_at(be16(b, 2) as usize);
            let mut set = &msg[16..];
            while set.len() >= 4 {
                let (s, next) = set.split_at(be16(set, 2) as usize);
                if be16(s, 0) == 2 {
                    let mut o = 4;
                    while o + 4 <= s.len() {
                        let (tid, count) = (be16(s, o), be16(s, o + 2));
                        o += 4;
                        let mut ids = Vec::new();
                        for _ in 0..count {
                            let ie = be16(s, o);
                            o += 4;
                            if ie & 0x8000 != 0 {
                                ids.push(ie & 0x7fff);
                                o += 4;
                            }
                        }
                        out.push((tid, ids));
                    }
                }
                set = next;
            }
            b = rest;
        }
        out
    }

    /// A load balancer's `lbConn` whose `connEvent` is an enum (names
    /// OPEN, CLOSE) and an `lbStats` whose `connEvent` is a plain u8,
    /// registered from C and logged as IPFIX: two enterprise elements
    /// (the enum's id derived with the class `enum`, 18407; the count's
    /// with `unsigned`, 25948), not one that holds codes in one template
    /// and counts in the other.
    #[test]
    fn an_enum_and_a_count_of_one_name_are_two_enterprise_elements_from_c() {
        use crate::types::{dplog_enum_name, DPLOG_FIELD_ENUM, DPLOG_FIELD_U8};
        let dir = std::env::temp_dir().join(format!("dplog-ffi-enum-ie-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("lb.ipfix");
        let h = crate::testutil::open(&format!(
            "[format]\ntype = \"ipfix\"\n[format.ipfix]\nexport_clock = \"record\"\n\
             [sink]\ntype = \"file\"\npath = \"{}\"\n",
            path.display()
        ));
        let names = [
            dplog_enum_name {
                value: 1,
                name: c"OPEN".as_ptr(),
            },
            dplog_enum_name {
                value: 2,
                name: c"CLOSE".as_ptr(),
            },
        ];
        let register = |name: &std::ffi::CStr, kind, enums: &[dplog_enum_name]| {
            let fields = [dplog_field_desc {
                name: c"connEvent".as_ptr(),
                offset: 8,
                size: 1,
                kind,
                ie_id: 0,
                enum_names: if enums.is_empty() {
                    core::ptr::null()
                } else {
                    enums.as_ptr()
                },
                enum_count: enums.len(),
            }];
            let mut id = 0u16;
            // SAFETY: h is live; the names, descriptors and enum table
            // are valid for the call.
            let rc = unsafe {
                crate::dplog_schema_register(h, name.as_ptr(), 16, fields.as_ptr(), 1, &mut id)
            };
            assert_eq!(rc, DPLOG_OK, "{}", crate::testutil::last_error());
            id
        };
        let conn = register(c"lbConn", DPLOG_FIELD_ENUM, &names);
        let stats = register(c"lbStats", DPLOG_FIELD_U8, &[]);
        let p = crate::testutil::start_with_producer(h);
        for (id, v) in [(conn, 1u8), (stats, 7)] {
            let mut rec = [0u8; 16];
            rec[8] = v;
            // SAFETY: p is live; rec holds one 16-byte record.
            let rc = unsafe { crate::dplog_log(p, id, rec.as_ptr().cast(), rec.len()) };
            assert_eq!(rc, DPLOG_OK);
        }
        // SAFETY: p was returned by dplog_producer_new and is freed once.
        assert_eq!(unsafe { crate::dplog_producer_free(p) }, DPLOG_OK);
        // SAFETY: h is live; no stats wanted.
        let rc = unsafe { crate::dplog_close(h, core::ptr::null_mut()) };
        assert_eq!(rc, DPLOG_OK);
        let b = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            enterprise_ids_of_templates(&b),
            [(256, vec![18407]), (257, vec![25948])]
        );
    }
}
