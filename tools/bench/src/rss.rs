//! Resident memory of this process, from `/proc/self/status` (Linux).

/// Reads a `kB` field of `/proc/self/status` in bytes; `None` where it is not available.
fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_field(&status, name)
}

fn parse_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..]
        .trim_start_matches(':')
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Current resident set size in bytes (0 where unknown).
pub fn current() -> u64 {
    status_field("VmRSS").unwrap_or(0)
}

/// Peak resident set size of the process so far, in bytes (0 where unknown).
pub fn peak() -> u64 {
    status_field("VmHWM").unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        let text = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(parse_field(text, "VmRSS"), Some(1024 * 1024));
        assert_eq!(parse_field(text, "VmHWM"), Some(2048 * 1024));
        assert_eq!(parse_field(text, "VmSwap"), None);
    }

    #[test]
    fn this_process_has_memory() {
        assert!(current() > 0);
        assert!(peak() >= current() / 2);
    }
}
