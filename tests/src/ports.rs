//! Loopback ports for tests that must name a port before a server binds it (a `--port-base`,
//! a database restarted on its old port): taken below the ephemeral range (32768 and up by
//! default on Linux), which the kernel never hands to another test's `127.0.0.1:0` or to an
//! outgoing connection, so a port found free stays free for the test.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU16, Ordering};

/// Where the ports are looked for: `[FIRST, FIRST + SPAN)`.
const FIRST: u16 = 20_000;
const SPAN: u16 = 12_500;

/// The first of `count` free loopback ports in a row, or `None` when none was found. Each call
/// looks from another place (the process id and a counter), so parallel test binaries rarely
/// probe the same ports.
pub fn free_run(count: u16) -> Option<u16> {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() % u32::from(SPAN)) as u16;
    (0..1_000).find_map(|_| {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let offset = (u32::from(seed) + u32::from(step) * 13) % u32::from(SPAN - count);
        let base = FIRST + offset as u16;
        (0..count)
            .all(|i| TcpListener::bind((Ipv4Addr::LOCALHOST, base + i)).is_ok())
            .then_some(base)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_free_below_the_ephemeral_range_and_never_the_same_twice() {
        let (a, b) = (free_run(5).unwrap(), free_run(5).unwrap());
        assert_ne!(a, b);
        for base in [a, b] {
            assert!((FIRST..FIRST + SPAN - 5).contains(&base));
            for i in 0..5 {
                TcpListener::bind((Ipv4Addr::LOCALHOST, base + i)).unwrap();
            }
        }
    }
}
