//! Waiting between tries of an HTTP call to an upstream (LLM providers, embedding endpoints):
//! exponential backoff with jitter, and the server's `Retry-After` when it sends one.

use std::time::Duration;

/// The wait before try `attempt + 1` (`attempt` ≥ 1): Retry-After when given, else
/// base·2^(attempt−1) with jitter (between half and all of the step); never more than `max_ms`.
pub fn backoff(base_ms: u64, max_ms: u64, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let cap = Duration::from_millis(max_ms);
    if let Some(r) = retry_after {
        return r.min(cap);
    }
    let exp = base_ms
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(16))
        .min(max_ms);
    let jitter = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        h.finish()
    };
    let half = exp / 2;
    Duration::from_millis(
        half + if half == 0 {
            0
        } else {
            jitter % (exp - half + 1)
        },
    )
}

/// `Retry-After` in seconds (an HTTP date is treated as "soon": 1 s).
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    Some(match v.parse::<f64>() {
        // A value too large for a Duration is "a very long time" (callers cap their waits).
        Ok(secs) if secs >= 0.0 => Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX),
        _ => Duration::from_secs(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_honours_retry_after() {
        for attempt in 1..=4u32 {
            let step = 100u64 << (attempt - 1);
            let d = backoff(100, 10_000, attempt, None).as_millis() as u64;
            assert!((step / 2..=step).contains(&d), "attempt {attempt}: {d}");
        }
        assert!(backoff(100, 500, 10, None) <= Duration::from_millis(500));
        assert_eq!(
            backoff(100, 10_000, 1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            backoff(100, 2_000, 1, Some(Duration::from_secs(30))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_treats_dates_as_soon() {
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("2.5"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_millis(2500)));
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        h.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1e20"),
        );
        assert_eq!(retry_after(&h), Some(Duration::MAX));
        assert_eq!(
            backoff(100, 2_000, 1, retry_after(&h)),
            Duration::from_secs(2)
        );
    }
}
