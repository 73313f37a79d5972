//! `[consumers]` and the `start*` functions that check a configuration
//! and start its loggers.

use super::*;

/// `[consumers]`: several consumer threads, each with its own formatter,
/// its own sink instance and its own group of rings, for
/// [`LogConfig::start_consumers`] (the C ABI's `dplog_start` takes the same
/// choice as its CPU list).
///
/// ```toml
/// [consumers]
/// cpus = [2, 3]   # one consumer pinned to each; or
/// # count = 2     # that many consumers, not pinned
/// ```
///
/// Consumer 0 writes the configured sink; consumer `i > 0` a file sink's
/// `path` with the suffix `.i` (`nat.log`, `nat.log.1`, ...), an mmap
/// sink's `dir` with the suffix `.i`, and its own connection for syslog or
/// Kafka ([`SinkConfig::for_consumer`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ConsumersConfig {
    /// CPUs to pin the consumers to, one consumer per CPU. Overrides
    /// `[ring] consumer_cpu`.
    pub cpus: Vec<usize>,
    /// Number of consumers when `cpus` is empty. Default 1.
    pub count: Option<usize>,
}

impl ConsumersConfig {
    /// Most consumers one logger group runs.
    pub const MAX: usize = 64;

    /// How many consumers these settings start.
    ///
    /// Errors: [`ConfigError::Parse`] for 0, more than [`Self::MAX`], or
    /// both `cpus` and `count` set.
    pub fn count(&self) -> Result<usize, ConfigError> {
        let n = match (self.cpus.len(), self.count) {
            (0, c) => c.unwrap_or(1),
            (n, None) => n,
            (_, Some(_)) => {
                return Err(ConfigError::Parse(
                    "[consumers]: set either `cpus` or `count`, not both".into(),
                ))
            }
        };
        if n == 0 || n > Self::MAX {
            return Err(ConfigError::Parse(format!(
                "[consumers]: {n} consumers: must be 1 to {}",
                Self::MAX
            )));
        }
        Ok(n)
    }
}

/// A group of loggers started by [`LogConfig::start_consumers`]: one
/// consumer thread each, the rings spread over them by ring number.
///
/// # Examples
///
/// Two consumers, each writing its own file (`probes.log`,
/// `probes.log.1`); ring `r` is drained by consumer `r % 2`:
///
/// ```
/// # use std::sync::OnceLock;
/// # use dplog::schema::{HasSchema, Schema};
/// # use dplog::{schema, Record, RecordHeader};
/// # #[repr(C)]
/// # #[derive(Clone, Copy)]
/// # struct Probe { header: RecordHeader, time_ns: u64, seq: u32, ttl: u8, _pad: [u8; 3] }
/// # impl Record for Probe {
/// #     const SCHEMA_ID: u16 = 500;
/// #     fn header(&self) -> &RecordHeader { &self.header }
/// # }
/// # // SAFETY: repr(C), 24 bytes without padding; schema from its offsets.
/// # unsafe impl HasSchema for Probe {
/// #     fn schema() -> &'static Schema {
/// #         static S: OnceLock<Schema> = OnceLock::new();
/// #         S.get_or_init(|| schema!(Probe, id = 500, name = "probe", [
/// #             time_ns => "time": NsTimestamp, ie 0;
/// #             seq => "seq": U32, ie 0;
/// #             ttl => "ttl": U8, ie 0;
/// #         ]).unwrap())
/// #     }
/// # }
/// # fn probe(seq: u32) -> Probe {
/// #     Probe { header: RecordHeader::of::<Probe>(), time_ns: 1_767_225_600_000_000_000, seq, ttl: 64, _pad: [0; 3] }
/// # }
/// # let dir = tempfile::tempdir()?;
/// # std::env::set_current_dir(dir.path())?;
/// use dplog::config::LogConfig;
///
/// let cfg = LogConfig::from_toml_str("[consumers]\ncount = 2\n[sink]\ntype = \"file\"\npath = \"probes.log\"\n")?;
/// let group = cfg.start_consumers::<Probe>()?;
/// for ring in 0..2 {
///     let mut producer = group.producer(ring)?;
///     producer.log(probe(ring as u32));
/// }
/// for result in group.shutdown() {
///     assert_eq!(result.map_err(|(_, e)| e)?.written_records, 1);
/// }
/// assert_eq!(std::fs::read_to_string("probes.log.1")?.lines().count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Consumers<R: crate::Record> {
    loggers: Vec<Logger<R>>,
}

impl<R: crate::Record> std::fmt::Debug for Consumers<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumers")
            .field("consumers", &self.loggers.len())
            .finish_non_exhaustive()
    }
}

impl<R: crate::Record> Consumers<R> {
    /// The consumers' loggers, consumer 0 first.
    pub fn loggers(&self) -> &[Logger<R>] {
        &self.loggers
    }

    /// A producer on a new ring of consumer `ring % n` (number the rings
    /// 0, 1, 2, ... — e.g. by forwarding core — to balance them).
    ///
    /// Errors: as [`Logger::producer`].
    pub fn producer(&self, ring: usize) -> Result<crate::LogProducer<R>, LoggerError> {
        self.loggers[ring % self.loggers.len()].producer()
    }

    /// A shared (MPSC) producer on a new ring of consumer `ring % n`.
    ///
    /// Errors: as [`Logger::shared_producer`].
    pub fn shared_producer(&self, ring: usize) -> Result<crate::SharedProducer<R>, LoggerError> {
        self.loggers[ring % self.loggers.len()].shared_producer()
    }

    /// Shuts every consumer down (see [`Logger::shutdown`]); their results
    /// in consumer order.
    #[allow(clippy::result_large_err)]
    pub fn shutdown(self) -> Vec<Result<crate::Stats, (crate::Stats, LoggerError)>> {
        self.loggers.into_iter().map(Logger::shutdown).collect()
    }
}

impl LogConfig {
    /// Parses a TOML document; see the module docs for the keys.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        parse_toml(text)
    }

    /// The record types a logger of `slot_bytes`-byte slots serves for
    /// the program's `declared` types: those, in order, then the NAT
    /// schemas that fit the slot when `[schemas] nat = true`
    /// ([`SchemasConfig`]); nothing else. The first one takes `[format]
    /// template`.
    pub fn record_types<'a>(&self, declared: &[&'a Schema], slot_bytes: usize) -> Vec<&'a Schema> {
        let mut v = declared.to_vec();
        if self.schemas.nat {
            v.extend(
                crate::nat::all()
                    .into_iter()
                    .filter(|s| s.size() <= slot_bytes),
            );
        }
        v
    }

    /// The runtime settings of `[ring]`.
    pub fn logger_config(&self) -> LoggerConfig {
        LoggerConfig {
            ring_capacity: self.ring.capacity,
            backpressure: self.ring.backpressure,
            burst: self.ring.burst,
            batch_bytes: self.ring.batch_bytes,
            consumer_cpu: self.ring.consumer_cpu,
            block_spins: self.ring.block_spins,
            drop_reports: self.ring.drop_reports,
            degrade: self.ring.degrade,
            reorder_window_ns: self.ring.reorder_window_ns,
            reorder_idle_ms: self.ring.reorder_idle_ms,
            shutdown_timeout_ms: self.ring.shutdown_timeout_ms,
            sink_retry_timeout_ms: self.ring.sink_retry_timeout_ms,
            publish_every: self.ring.publish_every.unwrap_or(1),
            poll_gap_max_us: self.ring.poll_gap_max_us,
            ..LoggerConfig::default()
        }
    }

    /// Checks the `[ring]` settings for rings of `slot_bytes`-byte records
    /// (`size_of::<R>()`) with [`LoggerConfig::validate`], without opening
    /// anything: a refused configuration creates no file.
    ///
    /// Errors: [`ConfigError::Logger`] naming the key, its value and the
    /// bound (for `capacity`, the memory the ring would take).
    pub fn check_ring(&self, slot_bytes: usize) -> Result<(), ConfigError> {
        self.logger_config()
            .validate(slot_bytes)
            .map_err(ConfigError::Logger)
    }

    /// The per-type table for `schemas` with `[ring.priorities]` applied.
    ///
    /// Errors: [`ConfigError::Parse`] naming `[ring.priorities]` for a
    /// record type that is not among `schemas`.
    pub fn schema_table(&self, schemas: &[&Schema]) -> Result<SchemaTable, ConfigError> {
        let mut t = SchemaTable::new(schemas.iter().copied());
        for (name, &p) in &self.ring.priorities {
            t = t.with_priority(schemas, name, p).map_err(|e| {
                ConfigError::Parse(format!(
                    "[ring.priorities] {name} = {p}: {e}; record types: {}",
                    schemas
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        }
        Ok(t)
    }

    /// The checks of the sinks against the record types a logger serves,
    /// without opening anything: an archive `index` naming no field of
    /// them; ClickHouse sinks whose `record_type` none of them is, whose
    /// table the server says does not hold it (`DESCRIBE TABLE`; a
    /// server that cannot be reached is not refused), or that leave a
    /// record type stored nowhere. Every `start*` runs them; the C ABI's
    /// `dplog_start` calls this.
    ///
    /// Errors: [`ConfigError::Parse`] naming the sink key and why.
    pub fn check_sinks_for(&self, schemas: &[&Schema]) -> Result<(), ConfigError> {
        check_archive_index(&self.sink, schemas)?;
        check_clickhouse(&self.sink, schemas)
    }

    /// Starts a logger of records of `schemas` (each ring of `R`): checks
    /// everything first, so a refused configuration opens no sink and
    /// creates no file.
    fn start_for<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        header: Option<&Schema>,
        rules: RecordRules<R>,
    ) -> Result<Logger<R>, ConfigError> {
        self.start_consumer(schemas, header, rules, &self.sink, self.ring.consumer_cpu)
    }

    /// One consumer of `schemas` writing to `sink`, pinned to `cpu`.
    fn start_consumer<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        header: Option<&Schema>,
        rules: RecordRules<R>,
        sink: &SinkConfig,
        cpu: Option<usize>,
    ) -> Result<Logger<R>, ConfigError> {
        self.check_ring(core::mem::size_of::<R>())?;
        let formatter = self.format.formatter(schemas)?;
        check_archive_index(sink, schemas)?;
        check_clickhouse(sink, schemas)?;
        let mut cfg = self.logger_config();
        cfg.schemas = self.schema_table(schemas)?;
        cfg.consumer_cpu = cpu;
        let sink = match header {
            Some(_) => sink.build_for_schema(&self.format, schemas),
            None => sink.build(),
        }
        .map_err(ConfigError::Sink)?;
        Logger::start_with_rules(cfg, rules, formatter, sink).map_err(ConfigError::Logger)
    }

    /// Starts the `[consumers]` of records of type `R`: each consumer has
    /// its own formatter, sink instance ([`SinkConfig::for_consumer`]) and
    /// rings. All or nothing: if one cannot start, the ones started are
    /// shut down and the error returned.
    ///
    /// Errors: as [`start`](Self::start), and `[consumers]`'s
    /// ([`ConsumersConfig::count`]).
    pub fn start_consumers<R: HasSchema>(&self) -> Result<Consumers<R>, ConfigError> {
        check_record_type::<R>()?;
        self.start_group(&[R::schema()], RecordRules::by_schema())
    }

    /// [`start_consumers`](Self::start_consumers) for rings of slots of
    /// several record types; see [`start_slots`](Self::start_slots).
    ///
    /// Errors: as [`start_slots`](Self::start_slots) and
    /// [`start_consumers`](Self::start_consumers).
    pub fn start_slot_consumers<S: Slot>(
        &self,
        schemas: &[&Schema],
    ) -> Result<Consumers<S>, ConfigError> {
        check_slots(self.ring.slot_bytes, S::BYTES, schemas)?;
        self.start_group(&self.record_types(schemas, S::BYTES), RecordRules::own())
    }

    fn start_group<R: RecordBytes>(
        &self,
        schemas: &[&Schema],
        rules: RecordRules<R>,
    ) -> Result<Consumers<R>, ConfigError> {
        let n = self.consumers.count()?;
        // Every setting first, so a refused configuration opens nothing.
        self.check_ring(core::mem::size_of::<R>())?;
        self.format.formatter(schemas)?;
        self.schema_table(schemas)?;
        let mut loggers = Vec::with_capacity(n);
        for i in 0..n {
            let cpu = self
                .consumers
                .cpus
                .get(i)
                .copied()
                .or(self.ring.consumer_cpu.filter(|_| n == 1));
            let sink = self.sink.for_consumer(i);
            match self.start_consumer(schemas, schemas.first().copied(), rules, &sink, cpu) {
                Ok(l) => loggers.push(l),
                Err(e) => {
                    for l in loggers {
                        let _ = l.shutdown();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Consumers { loggers })
    }

    /// Opens the sink, builds the formatter and starts a consumer thread
    /// for records of type `R` (one record type, its [`HasSchema::schema`];
    /// each producer's ring holds `R`s). The `[ring]` settings, priorities
    /// and the format are checked first ([`check_ring`](Self::check_ring)),
    /// so a refused configuration opens no sink and creates no file.
    ///
    /// Under `backpressure = "degrade"` a record's priority is
    /// `[ring.priorities]`'s for its type when set, else its schema's
    /// [`with_priority`](crate::Schema::with_priority) rule, read from the
    /// record's bytes ([`RecordRules::by_schema`]); its event time is the
    /// schema's event-time field.
    ///
    /// Errors: [`ConfigError::Logger`] for a `[ring]` setting,
    /// [`ConfigError::Parse`] for the format or `[ring.priorities]`, or a
    /// record type whose [`Record::SCHEMA_ID`](crate::Record::SCHEMA_ID)
    /// is not its schema's id (every record would be written under an id
    /// the formatter does not know, and none would be printed) or that is
    /// larger than 128 bytes (a ring slot's limit; refused before the sink
    /// opens), [`ConfigError::Sink`] if the sink cannot be opened.
    pub fn start<R: HasSchema>(&self) -> Result<Logger<R>, ConfigError> {
        check_record_type::<R>()?;
        self.start_for(&[R::schema()], Some(R::schema()), RecordRules::by_schema())
    }

    /// Starts a logger whose rings carry records of several types in
    /// slots of `S` (32, 64 or 128 bytes, [`crate::Slot32`] & co): pack
    /// records with `S::pack_record` (or `Slot64::pack`). `schemas` are
    /// the record types; each must fit the slot, and `[ring] slot_bytes`,
    /// if set, must be `S`'s size.
    ///
    /// Errors: as [`start`](Self::start); [`ConfigError::Parse`] naming
    /// `[ring] slot_bytes` for a slot size other than `S`'s or a record
    /// type larger than the slot.
    pub fn start_slots<S: Slot>(&self, schemas: &[&Schema]) -> Result<Logger<S>, ConfigError> {
        check_slots(self.ring.slot_bytes, S::BYTES, schemas)?;
        let all = self.record_types(schemas, S::BYTES);
        self.start_for(&all, all.first().copied(), RecordRules::own())
    }

    /// Starts a logger of NAT44 session records only (formatted with every
    /// NAT schema; see [`start`](Self::start)). A NAT logger by name: it
    /// serves the NAT schemas whatever `[schemas] nat` says.
    pub fn start_nat44(&self) -> Result<Logger<Nat44SessionRecord>, ConfigError> {
        self.start_for(
            &crate::nat::all(),
            Some(crate::nat::all()[0]),
            RecordRules::by_schema(),
        )
    }

    /// Starts a logger of every NAT record type in 64-byte slots
    /// ([`NatRecord`]); see [`start_slots`](Self::start_slots). A NAT
    /// logger by name: it serves the NAT schemas whatever `[schemas] nat`
    /// says.
    pub fn start_nat(&self) -> Result<Logger<NatRecord>, ConfigError> {
        let nat = crate::nat::all();
        check_slots(self.ring.slot_bytes, NatRecord::BYTES, &nat)?;
        self.start_for(&nat, nat.first().copied(), RecordRules::own())
    }
}

/// Refuses a record type larger than a ring slot's 128 bytes (its
/// producers could never be made), and one whose header id
/// ([`Record::SCHEMA_ID`], written by
/// [`RecordHeader::of`](crate::RecordHeader::of)) is not the id of the
/// schema it declares ([`HasSchema::schema`]): the consumer looks records
/// up by that id, so it would format none of them.
fn check_record_type<R: HasSchema>() -> Result<(), ConfigError> {
    let s = R::schema();
    let size = core::mem::size_of::<R>();
    if size > 128 {
        return Err(ConfigError::Parse(format!(
            "record type {}: {size} bytes, larger than the 128-byte limit of a ring slot \
             (header included); split it or move long values out of the record",
            core::any::type_name::<R>()
        )));
    }
    if s.id() == R::SCHEMA_ID {
        return Ok(());
    }
    Err(ConfigError::Parse(format!(
        "record type {}: its Record::SCHEMA_ID is {} but its schema {:?} has id {}; \
         the two must be the same (records are matched to their schema by the id in their header)",
        core::any::type_name::<R>(),
        R::SCHEMA_ID,
        s.name(),
        s.id()
    )))
}

/// Refuses, before any sink opens, an archive sink whose `index` names a
/// field that none of the logger's record types has (a typo would
/// otherwise be found at the first batch, which the sink then refuses).
fn check_archive_index(sink: &SinkConfig, schemas: &[&Schema]) -> Result<(), ConfigError> {
    each_sink(sink, &mut |s, table| match s {
        SinkConfig::Archive(a) => a
            .options()
            .check_index(schemas)
            .map_err(|e| ConfigError::Parse(format!("{table} index: {e}"))),
        _ => Ok(()),
    })
}

/// Runs `f` on each sink of `sink` (itself, or each of a `[[sink]]` set)
/// with the table it was written in, as parse errors name it: `[sink]`,
/// or `[[sink]] #N` (from 1).
fn each_sink(
    sink: &SinkConfig,
    f: &mut dyn FnMut(&SinkConfig, &str) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    match sink {
        SinkConfig::Set(v) => v
            .iter()
            .enumerate()
            .try_for_each(|(i, s)| f(s, &format!("[[sink]] #{}", i + 1))),
        s => f(s, "[sink]"),
    }
}

/// Refuses, before any sink opens, ClickHouse sinks that leave a record
/// type of the logger stored nowhere, a ClickHouse sink whose
/// `record_type` none of the logger's record types is, or whose table
/// the server says is missing or does not match the record type
/// (`DESCRIBE TABLE`, see [`ClickHouseSink`](crate::sinks::ClickHouseSink)).
/// A server that cannot be reached is not refused: the sink checks again
/// before its first insert.
fn check_clickhouse(sink: &SinkConfig, schemas: &[&Schema]) -> Result<(), ConfigError> {
    check_clickhouse_tables(sink, schemas)?;
    check_clickhouse_coverage(sink, schemas)
}

/// The record types a sink (or set) made only of ClickHouse sinks stores:
/// each sink's `record_type`, else the first served; `None` when another
/// kind of sink is among them (it takes every record type).
fn clickhouse_only(sink: &SinkConfig, schemas: &[&Schema]) -> Option<Vec<String>> {
    match sink {
        SinkConfig::Clickhouse(c) => Some(
            c.record_type
                .clone()
                .or_else(|| schemas.first().map(|s| s.name().to_string()))
                .into_iter()
                .collect(),
        ),
        SinkConfig::Set(v) => v.iter().try_fold(Vec::new(), |mut all, s| {
            all.extend(clickhouse_only(s, schemas)?);
            Some(all)
        }),
        _ => None,
    }
}

/// Refuses a logger whose sinks are all ClickHouse sinks when a record
/// type it serves is none of their `record_type`s: its records would be
/// counted written (a ClickHouse sink passes over other types) and stored
/// nowhere.
fn check_clickhouse_coverage(sink: &SinkConfig, schemas: &[&Schema]) -> Result<(), ConfigError> {
    let Some(stored) = clickhouse_only(sink, schemas) else {
        return Ok(());
    };
    let missing: Vec<&str> = schemas
        .iter()
        .map(|s| s.name())
        .filter(|n| !stored.iter().any(|t| t == n))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ConfigError::Parse(format!(
        "[sink] record_type: a clickhouse sink stores one record type ({}), so the records of \
         {} would go to no sink; give each record type its own clickhouse sink in a [[sink]] \
         set, or add a sink that takes every type (file, archive)",
        stored.join(", "),
        missing.join(", ")
    )))
}

/// The `DESCRIBE TABLE` check of every ClickHouse sink (see
/// [`check_clickhouse`]).
fn check_clickhouse_tables(sink: &SinkConfig, schemas: &[&Schema]) -> Result<(), ConfigError> {
    each_sink(sink, &mut |s, table| match s {
        SinkConfig::Clickhouse(c) => {
            let o = c.options();
            let s = match &o.record_type {
                Some(n) => schemas.iter().find(|s| s.name() == n).ok_or_else(|| {
                    let names: Vec<&str> = schemas.iter().map(|s| s.name()).collect();
                    ConfigError::Parse(format!(
                        "{table} record_type = {n:?}: the logger serves no such record type \
                         (it serves {})",
                        names.join(", ")
                    ))
                })?,
                None => match schemas.first() {
                    Some(s) => s,
                    None => return Ok(()),
                },
            };
            let client = crate::sinks::clickhouse::Client::new(&o).map_err(ConfigError::Sink)?;
            match client.check_table(&o.table, s) {
                Err(Ok(why)) => Err(ConfigError::Parse(format!("{table} table: {why}"))),
                Ok(_) | Err(Err(_)) => Ok(()),
            }
        }
        _ => Ok(()),
    })
}
