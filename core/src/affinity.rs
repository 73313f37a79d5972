//! CPU pinning for producer and consumer threads (Linux `sched_setaffinity`).

use std::io;

/// Pins the calling thread to CPU `cpu` (0-based, as in `/proc/cpuinfo`).
///
/// Errors: `InvalidInput` if `cpu` is not below `CPU_SETSIZE` (1024); the OS
/// error (e.g. `EINVAL` for a CPU outside the allowed set) otherwise. On
/// non-Linux targets it returns `Unsupported`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cpu {cpu} is beyond CPU_SETSIZE"),
            ));
        }
        // SAFETY: `cpu_set_t` is plain data for which all-zero bytes is the
        // empty set; CPU_SET writes inside it because cpu < CPU_SETSIZE;
        // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes from it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "CPU pinning needs Linux",
        ))
    }
}

/// Number of CPUs this process may run on (at least 1).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
