//! A bounded pool for blocking work (file reads, index searches): at most `threads` tasks run
//! at once on tokio's blocking threads, a caller waits at most `queue_wait` for a slot and is
//! otherwise told the server is saturated. The slot stays taken until the work itself ends,
//! even when the caller has given up, so work that outlives its caller still counts: the pool
//! can fill up but never grows past its size, and memory (a thread stack and an allocator heap
//! per thread) stays bounded under any load.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Semaphore;

/// Blocking work could not run or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockingError {
    /// Every slot stayed taken for the whole wait.
    #[error(
        "the server is saturated: all {threads} worker slots stayed busy for {waited_ms} ms; retry later"
    )]
    Saturated {
        /// Pool size.
        threads: usize,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The work panicked (a bug).
    #[error("a worker task failed: {0}")]
    Panicked(String),
}

/// Size and wait of a [`BlockingPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSize {
    /// Tasks running at once.
    pub threads: usize,
    /// Longest wait for a slot.
    pub queue_wait: Duration,
}

impl PoolSize {
    /// `threads` slots (0 = two per core, at least 4), waiting at most `queue_wait_ms`.
    pub fn new(threads: usize, queue_wait_ms: u64) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism()
                .map_or(4, |n| n.get() * 2)
                .max(4)
        } else {
            threads
        };
        Self {
            threads,
            queue_wait: Duration::from_millis(queue_wait_ms),
        }
    }
}

/// The pool; clones share the slots.
#[derive(Debug, Clone)]
pub struct BlockingPool {
    slots: Arc<Semaphore>,
    size: PoolSize,
    gauges: Arc<Gauges>,
}

/// What the pool reports as metrics once [`BlockingPool::watch`] named its service.
#[derive(Debug, Default)]
struct Gauges {
    service: OnceLock<String>,
    queued: AtomicUsize,
    /// Work running now. Counted, not read off the semaphore: a slot handed straight to a
    /// waiter that only probes (`responsive`) would read as busy after the work ended.
    running: AtomicUsize,
}

/// Work running on the pool, counted in the busy gauge while it lives.
struct Running(Arc<Gauges>, usize);

impl Running {
    fn start(gauges: Arc<Gauges>, size: usize) -> Self {
        gauges.running.fetch_add(1, Ordering::Relaxed);
        Self(gauges, size)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
        self.0.report(self.1);
    }
}

/// One caller waiting for a slot, counted in the queue gauge while it lives.
struct Queued<'a>(&'a BlockingPool);

impl<'a> Queued<'a> {
    fn enter(pool: &'a BlockingPool) -> Self {
        pool.gauges.queued.fetch_add(1, Ordering::Relaxed);
        pool.gauges.report(pool.size.threads.max(1));
        Self(pool)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let pool = self.0;
        pool.gauges.queued.fetch_sub(1, Ordering::Relaxed);
        pool.gauges.report(pool.size.threads.max(1));
    }
}

impl Gauges {
    fn report(&self, size: usize) {
        if !crate::metrics::enabled() {
            return;
        }
        if let Some(service) = self.service.get() {
            let busy = self.running.load(Ordering::Relaxed);
            let queued = self.queued.load(Ordering::Relaxed);
            crate::metrics::record::pool_state(service, size, busy, queued);
        }
    }
}

impl BlockingPool {
    /// A pool of `size`.
    pub fn new(size: PoolSize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(size.threads.max(1))),
            size,
            gauges: Arc::default(),
        }
    }

    /// Its size.
    pub fn size(&self) -> PoolSize {
        self.size
    }

    /// Slots free right now.
    pub fn idle(&self) -> usize {
        self.slots.available_permits()
    }

    /// Runs `f` on a blocking thread once a slot is free (waiting at most the pool's
    /// `queue_wait`).
    pub async fn run<T, F>(&self, f: F) -> Result<T, BlockingError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let wait = self.size.queue_wait;
        let size = self.size.threads.max(1);
        let queued = Queued::enter(self);
        let acquired = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await;
        // A caller that gives up while waiting leaves the queue too (the guard drops).
        drop(queued);
        let permit = match acquired {
            Ok(Ok(permit)) => permit,
            // The semaphore is never closed; a closed one is as good as saturated.
            Ok(Err(_)) | Err(_) => {
                if let Some(service) = self.gauges.service.get() {
                    crate::metrics::record::pool_rejected(service);
                }
                return Err(BlockingError::Saturated {
                    threads: self.size.threads,
                    waited_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                });
            }
        };
        let running = Running::start(self.gauges.clone(), size);
        tokio::task::spawn_blocking(move || {
            let out = f();
            // Counted out (and reported) even when `f` panics: the guard drops on unwind.
            drop(running);
            drop(permit);
            out
        })
        .await
        .map_err(|e| BlockingError::Panicked(e.to_string()))
    }

    /// Whether a slot can be had within `within`: false when the pool is wedged (every slot
    /// held by work that does not end). Takes and returns a slot without running anything.
    pub async fn responsive(&self, within: Duration) -> bool {
        matches!(
            tokio::time::timeout(within, self.slots.acquire()).await,
            Ok(Ok(_))
        )
    }
}

/// How often services check that their pool can still take work.
pub const WATCH_PERIOD: Duration = Duration::from_secs(2);

/// Watches a pool for as long as it lives (dropping it stops the watch).
#[derive(Debug)]
pub struct PoolWatch(tokio::task::JoinHandle<()>);

impl Drop for PoolWatch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl BlockingPool {
    /// Every `period`, checks that a slot can be had within the pool's queue wait, and raises
    /// the `blocking_pool` fault on `readiness` (health NOT_SERVING) while it cannot: every
    /// slot is held by work that does not end, or the queue is longer than callers may wait,
    /// so calls are being refused anyway. The fault clears once a slot can be had again.
    /// From now on the pool reports its size, busy slots, waiting callers and refusals as
    /// metrics labelled with the server's service name.
    pub fn watch(&self, readiness: crate::server::Readiness, period: Duration) -> PoolWatch {
        let pool = self.clone();
        let service = readiness.service_name().to_owned();
        crate::metrics::record::from_zero(
            crate::metrics::record::POOL_REJECTED,
            [vec![("service", service.clone())]],
        );
        let _ = pool.gauges.service.set(service);
        PoolWatch(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                pool.gauges.report(pool.size.threads.max(1));
                let wait = pool.size.queue_wait;
                let fault = (!pool.responsive(wait).await).then(|| {
                    format!(
                        "all {} blocking worker slots stayed busy for {} ms",
                        pool.size.threads,
                        wait.as_millis()
                    )
                });
                readiness.set_fault("blocking_pool", fault).await;
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_work_and_sheds_when_every_slot_is_held() {
        let pool = BlockingPool::new(PoolSize::new(2, 50));
        assert_eq!(pool.run(|| 21 * 2).await, Ok(42));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(std::sync::Mutex::new(held));
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let mut running = Vec::new();
        for _ in 0..2 {
            let (pool, held, started_tx) = (pool.clone(), held.clone(), started_tx.clone());
            running.push(tokio::spawn(async move {
                pool.run(move || {
                    started_tx.send(()).unwrap();
                    let _ = held.lock().unwrap().recv();
                })
                .await
            }));
        }
        started.recv().await.unwrap();
        started.recv().await.unwrap();
        assert_eq!(pool.idle(), 0);
        assert!(!pool.responsive(Duration::from_millis(20)).await);
        assert_eq!(
            pool.run(|| ()).await,
            Err(BlockingError::Saturated {
                threads: 2,
                waited_ms: 50
            })
        );
        release.send(()).unwrap();
        release.send(()).unwrap();
        for r in running {
            assert_eq!(r.await.unwrap(), Ok(()));
        }
        assert!(pool.responsive(Duration::from_millis(20)).await);
        assert_eq!(pool.idle(), 2);
    }

    #[tokio::test]
    async fn a_slot_stays_taken_until_abandoned_work_ends() {
        let pool = BlockingPool::new(PoolSize::new(1, 10));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let caller = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run(move || {
                    started_tx.send(()).unwrap();
                    let _ = held.recv();
                })
                .await
            })
        };
        started.await.unwrap();
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        assert_eq!(pool.idle(), 0, "the abandoned work still holds its slot");
        release.send(()).unwrap();
        assert!(pool.responsive(Duration::from_secs(10)).await);
    }

    async fn until(what: &str, mut holds: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !holds() {
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_wedged_pool_turns_health_not_serving_until_it_recovers() {
        let host =
            crate::server::ServiceHost::new(crate::config::LimitsConfig::default(), &["t.v1.T"])
                .await;
        let readiness = host.readiness();
        readiness.set_serving().await;
        let pool = BlockingPool::new(PoolSize::new(1, 20));
        let _watch = pool.watch(readiness.clone(), Duration::from_millis(10));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let stuck = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.run(move || held.recv()).await })
        };
        until("the fault is raised", || {
            readiness.faults().first().map(|f| f.name) == Some("blocking_pool")
        })
        .await;
        release.send(()).unwrap();
        assert_eq!(stuck.await.unwrap(), Ok(Ok(())));
        until("the fault clears", || readiness.faults().is_empty()).await;
    }

    #[tokio::test]
    async fn a_panic_is_an_error() {
        let pool = BlockingPool::new(PoolSize::new(1, 10));
        let r: Result<(), _> = pool.run(|| panic!("boom")).await;
        assert!(matches!(r, Err(BlockingError::Panicked(_))));
        assert_eq!(pool.run(|| 1).await, Ok(1));
    }
}
