//! Run metadata printed beside every figure and stored in `results.json`: the command line,
//! the commit of the source tree, the machine and its load, the time.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The machine a run was measured on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `model name` of the first CPU in /proc/cpuinfo.
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// Total memory in bytes (/proc/meminfo).
    pub memory_bytes: u64,
    /// The 1-minute load average when the run started: other work competing for the cores.
    pub load_average: f64,
    /// A cache line's round trip between two threads when the run started, in ns (see
    /// [`crate::cross_core`]); `None` with one core.
    pub cross_core_round_trip_ns: Option<f64>,
    /// `PRETTY_NAME` of /etc/os-release.
    pub os: String,
    /// Kernel release.
    pub kernel: String,
}

/// Who, what, where and when of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunMeta {
    /// The tool's command line, as run.
    pub command: String,
    /// The tool's version.
    pub tool_version: String,
    /// `git describe --always --dirty` of the source tree, or "unknown" outside a git clone.
    pub commit: String,
    /// The machine.
    pub machine: Machine,
    /// Start of the run, UTC, ISO 8601.
    pub started_utc: String,
    /// Whether this is an optimized build (figures of a debug build mean little).
    pub release_build: bool,
}

impl RunMeta {
    /// Collects the metadata of the run starting now; `repo` is the source tree.
    pub fn collect(repo: &Path) -> Self {
        let command = std::env::args()
            .map(|a| {
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                    format!("'{}'", a.replace('\'', r"'\''"))
                } else {
                    a
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            command,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: commit(repo),
            machine: machine(),
            started_utc: utc_now(),
            release_build: !cfg!(debug_assertions),
        }
    }

    /// The console's last line of a run: [`RunMeta::line`], then the load average and the
    /// cross-core round trip at the run's end.
    pub fn measured_line(&self, load_at_end: f64, round_trip_at_end: Option<f64>) -> String {
        format!(
            "measured: {}; load average {load_at_end:.2} and cross-core round trip {} at end",
            self.line(),
            crate::cross_core::shown(round_trip_at_end)
        )
    }

    /// One line for the console: commit, machine and load.
    pub fn line(&self) -> String {
        format!(
            "commit {}; {} x {} cores, {:.0} GiB, load average {:.2} and cross-core round trip \
             {} at start; {}{}",
            self.commit,
            self.machine.cpu,
            self.machine.cores,
            self.machine.memory_bytes as f64 / (1u64 << 30) as f64,
            self.machine.load_average,
            crate::cross_core::shown(self.machine.cross_core_round_trip_ns),
            self.machine.os,
            if self.release_build {
                ""
            } else {
                "; DEBUG BUILD (figures meaningless)"
            }
        )
    }
}

fn commit(repo: &Path) -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The value after `key` and a colon (or `=`) on the first line that starts with `key`.
fn field<'a>(text: &'a str, key: &str, sep: char) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(sep))
        .map(|(_, v)| v.trim().trim_matches('"'))
}

/// The 1-minute load average now (/proc/loadavg; 0 where there is none).
pub fn load_average() -> f64 {
    read("/proc/loadavg")
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn machine() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let meminfo = read("/proc/meminfo");
    let memory_kib: u64 = field(&meminfo, "MemTotal", ':')
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Machine {
        cpu: field(&cpuinfo, "model name", ':')
            .unwrap_or("unknown CPU")
            .to_string(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_bytes: memory_kib * 1024,
        load_average: load_average(),
        cross_core_round_trip_ns: crate::cross_core::round_trip_ns(),
        os: field(&read("/etc/os-release"), "PRETTY_NAME", '=')
            .unwrap_or(std::env::consts::OS)
            .to_string(),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
    }
}

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar).
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_000_000), "2026-11-18T11:06:40Z");
    }

    #[test]
    fn metadata_names_the_machine_and_the_command() {
        let m = RunMeta::collect(Path::new(env!("CARGO_MANIFEST_DIR")));
        assert!(m.machine.cores >= 1);
        assert!(!m.command.is_empty() && !m.commit.is_empty());
        assert!(m.line().contains("cores"));
        let end = m.measured_line(0.5, None);
        assert!(end.starts_with("measured: commit "), "{end}");
        assert!(
            end.ends_with("load average 0.50 and cross-core round trip n/a at end"),
            "{end}"
        );
        assert_eq!(
            field("a: 1\nmodel name\t: X Y\n", "model name", ':'),
            Some("X Y")
        );
    }
}
