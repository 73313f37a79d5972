//! The `dplog-nat` application: configuration, the run loop that feeds a
//! capture or the synthetic mix through [`Nat44`] into a dplog ring, and the
//! summary.
//!
//! Configuration is a TOML file (see `reference-nat/dplog-nat.toml`); every
//! key is optional, unknown keys are errors that name the key, and command
//! line flags override the file.
//!
//! The parts:
//!
//! * `config`: [`AppConfig`], the TOML file's sections, and the NAT and
//!   synthetic settings derived from them;
//! * `run`: the run modes ([`run`], [`run_live`], [`run_serving`],
//!   [`run_live_serving`]): checks, the engines, the logger, the worker
//!   threads and the dispatcher that shards the input to them;
//! * `worker`: the worker threads' loops over [`crate::pipeline`]
//!   (capture batches, the synthetic mix);
//! * `logger`: starting the dplog logger and its per-worker producers,
//!   and its bounded shutdown;
//! * `stop`: stop requests (SIGINT/SIGTERM) and the SIGHUP note;
//! * `host`: the CPUs and memory the host gives (pinning, ring memory);
//! * `summary`: what a run did ([`Summary`]), as text or JSON;
//! * `live`: the one-line live view;
//! * `error`: [`RunError`].
//!
//! [`Nat44`]: crate::Nat44

mod config;
mod error;
mod host;
mod live;
mod logger;
mod run;
mod stop;
mod summary;
mod worker;

pub use config::{
    AppConfig, DataplaneSection, InputSection, NatSection, NetRingPort, PortAllocationName,
    DEFAULT_OUTPUT, MAX_WORKERS,
};
pub use error::RunError;
pub use host::{
    allowed_cpus, check_cpu, check_cpus, check_ring_memory, check_worker_cpus, cpu_list,
    mem_available, parse_cpu_list, parse_cpu_sequence,
};
pub use live::live_line;
pub(crate) use logger::{input_start_ns, log_deterministic_mapping, worker_producers};
pub use logger::{shutdown_bounded, wall_clock_ns};
pub use run::{run, run_live, run_live_serving, run_serving, worker_engines};
pub use stop::{
    reopens_on_sighup, request_stop, sighup_watcher, stop_flag_watcher, stop_requested,
    stopped_for, SIGHUP_NOTE,
};
pub use summary::{input_name, plural, summary_of, RecordSummary, Summary, WorkerSummary};
