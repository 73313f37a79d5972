//! What the host gives a run: the CPUs this process may be pinned to
//! (checked before any thread is), and the memory its rings must fit in.

use dplog::config::ConfigError;
use dplog::nat::NatRecord;

use super::{plural, AppConfig, RunError};

/// The CPUs this process may run on (its affinity mask, read from
/// `Cpus_allowed_list` in `/proc/self/status`, see proc(5)), ascending.
/// Falls back to `0..available_parallelism` if that cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(|l| parse_cpu_list(l.trim()))
        })
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| (0..dplog::affinity::available_cpus()).collect())
}

/// Parses a kernel CPU list such as `0-3,6` (proc(5), cpuset(7)); `None`
/// if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Parses a CPU list as `--worker-cpus` takes it: comma-separated CPUs
/// and ranges (`0-1`, `2,0`, `0-1,4-5`, the shape [`cpu_list`] prints),
/// expanded in the order given (worker `i` gets the `i`th CPU) and not
/// deduplicated (a CPU listed twice is refused later, by
/// [`check_worker_cpus`], with a clear error). Errors: an empty list, an
/// empty item, a non-number, a descending range, or a range of more than
/// 65 536 CPUs.
pub fn parse_cpu_sequence(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    let num = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("'{}' is not a CPU number", t.trim()))
    };
    if s.trim().is_empty() {
        return Err("empty CPU list (give CPUs like 0,1 or 0-1)".into());
    }
    for part in s.split(',') {
        if part.trim().is_empty() {
            return Err(format!("empty item in CPU list '{s}'"));
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(format!("CPU range '{}' runs backwards", part.trim()));
                }
                if b - a > 1 << 16 {
                    return Err(format!("CPU range '{}' is too long", part.trim()));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// `cpus` as ranges, e.g. `0-3,6`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// Checks that `cpu`, set by `what` (a flag or a config key), is one this
/// process may run on.
///
/// Errors: a message naming `what`, the CPU and the CPUs available, e.g.
/// `--worker-cpus: CPU 99 is not available; this process may run on CPUs 0-1`.
pub fn check_cpu(what: &str, cpu: usize) -> Result<(), String> {
    let allowed = allowed_cpus();
    if allowed.contains(&cpu) {
        Ok(())
    } else {
        Err(format!(
            "{what}: CPU {cpu} is not available; this process may run on CPUs {}",
            cpu_list(&allowed)
        ))
    }
}

/// Checks every CPU the configuration pins a thread to (`producer_cpu`,
/// `[dataplane] worker_cpus`, `[ring] consumer_cpu`) with [`check_cpu`].
///
/// Errors: [`RunError::Dataplane`] naming the key, the CPU and the CPUs
/// available.
pub fn check_cpus(cfg: &AppConfig) -> Result<(), RunError> {
    if let Some(c) = cfg.producer_cpu {
        check_cpu("producer_cpu", c).map_err(RunError::Dataplane)?;
    }
    for &c in &cfg.dataplane.worker_cpus {
        check_cpu("worker_cpus", c).map_err(RunError::Dataplane)?;
    }
    check_worker_cpus(
        "worker_cpus",
        &cfg.dataplane.worker_cpus,
        cfg.dataplane.workers,
    )
    .map_err(RunError::Dataplane)?;
    if let Some(c) = cfg.ring.consumer_cpu {
        check_cpu("[ring] consumer_cpu", c).map_err(RunError::Dataplane)?;
    }
    Ok(())
}

/// Checks a worker CPU list (`what` names the flag or key) against the
/// worker count: empty (workers not pinned) or exactly one CPU per worker,
/// no CPU twice (two workers pinned to one CPU share it and defeat the
/// pinning).
///
/// Errors: a message naming `what` and the counts, or the repeated CPU.
pub fn check_worker_cpus(what: &str, cpus: &[usize], workers: usize) -> Result<(), String> {
    if !cpus.is_empty() && cpus.len() != workers {
        let plural = |n: usize, noun: &str| format!("{n} {noun}{}", if n == 1 { "" } else { "s" });
        return Err(format!(
            "{what}: {} for {}; give one CPU per worker (or none)",
            plural(cpus.len(), "CPU"),
            plural(workers, "worker")
        ));
    }
    for (i, c) in cpus.iter().enumerate() {
        if cpus[..i].contains(c) {
            return Err(format!(
                "{what}: CPU {c} is listed twice; each worker needs a CPU of its own"
            ));
        }
    }
    Ok(())
}

/// The memory the system can give without swapping, in bytes
/// (`MemAvailable` in `/proc/meminfo`, see proc(5)); `None` if unknown.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Checks that the rings of `workers` workers, `capacity` slots each, fit
/// in `available` bytes of memory (unchecked when `None`): every ring's
/// slots are allocated and touched at start, so rings larger than the
/// memory would end in the OOM killer, not an error.
///
/// Errors: [`RunError::Config`] naming `[ring] capacity`, the memory per
/// ring, in all, and the memory available.
pub fn check_ring_memory(
    capacity: usize,
    workers: usize,
    available: Option<u64>,
) -> Result<(), RunError> {
    let slot = std::mem::size_of::<NatRecord>();
    let total = capacity as u128 * slot as u128 * workers as u128;
    match available {
        Some(avail) if total > u128::from(avail) => Err(RunError::Config(ConfigError::Parse(format!(
            "[ring] capacity = {} x {workers} {} = {} of rings, more than the {} of memory available \
             (MemAvailable in /proc/meminfo); give a smaller capacity",
            dplog::runtime::ring_memory(capacity, slot),
            plural(workers as u64, "worker", "workers"),
            dplog::runtime::human_bytes(total),
            dplog::runtime::human_bytes(u128::from(avail))
        )))),
        _ => Ok(()),
    }
}

pub(super) fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // Best effort, like the consumer's pinning.
        let _ = dplog::affinity::pin_current_thread(cpu);
    }
}
