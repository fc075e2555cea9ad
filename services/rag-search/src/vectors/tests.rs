use super::*;

fn unit(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

#[test]
fn search_filter_persist_and_model_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
    v.add(1, text_hash("a"), unit(&[1.0, 0.0, 0.0])).unwrap();
    v.add(2, text_hash("b"), unit(&[0.0, 1.0, 0.0])).unwrap();
    v.add(3, text_hash("c"), unit(&[0.9, 0.1, 0.0])).unwrap();
    let q = unit(&[1.0, 0.05, 0.0]);
    let ids: Vec<u64> = v
        .search(&q, 2, |_| true)
        .unwrap()
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ids, vec![1, 3]);
    let ids: Vec<u64> = v
        .search(&q, 2, |k| k != 1)
        .unwrap()
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ids, vec![3, 2]);
    v.remove(3).unwrap();
    let live: HashSet<TextHash> = [text_hash("a"), text_hash("b"), text_hash("c")].into();
    v.save(&live).unwrap();
    drop(v);

    let v = Vectors::open(dir.path(), "m", 3).unwrap();
    assert_eq!(v.len(), 2);
    assert!(v.contains(1) && !v.contains(3));
    assert!(
        v.cached(&text_hash("c")).is_some(),
        "cache keeps removed items' vectors"
    );
    drop(v);

    let v = Vectors::open(dir.path(), "other-model", 3).unwrap();
    assert!(v.is_empty());
    assert!(v.cached(&text_hash("a")).is_none());
}

/// Pseudo-random unit vectors (an LCG: the same on every run).
fn spread(n: u64, dims: usize) -> Vec<Vec<f32>> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|_| {
            let v: Vec<f32> = (0..dims)
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                })
                .collect();
            unit(&v)
        })
        .collect()
}

#[test]
fn a_search_finds_the_true_nearest_whatever_order_the_vectors_came_in() {
    let (n, dims, k) = (2_000u64, 384, 100);
    let vectors = spread(n + 1, dims);
    let query = &vectors[n as usize];
    // What comparing every vector gives (ids 1..=n, odd ones only: the filter).
    let mut truth: Vec<(u64, f32)> = (1..=n)
        .filter(|id| id % 2 == 1)
        .map(|id| {
            let v = &vectors[id as usize - 1];
            (id, v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>())
        })
        .collect();
    truth.sort_by(|a, b| b.1.total_cmp(&a.1));
    let truth: Vec<u64> = truth.iter().take(k).map(|t| t.0).collect();

    // One index gets the vectors in order; the other in reverse, with a tenth removed and
    // added again (a refresh), as two replicas of one tree might.
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = Vectors::open(a_dir.path(), "m", dims).unwrap();
    let mut b = Vectors::open(b_dir.path(), "m", dims).unwrap();
    for id in 1..=n {
        a.add(
            id,
            text_hash(&id.to_string()),
            vectors[id as usize - 1].clone(),
        )
        .unwrap();
    }
    for id in (1..=n).rev() {
        b.add(
            id,
            text_hash(&id.to_string()),
            vectors[id as usize - 1].clone(),
        )
        .unwrap();
    }
    for id in (1..=n).step_by(10) {
        b.remove(id).unwrap();
    }
    for id in (1..=n).step_by(10) {
        b.add(
            id,
            text_hash(&id.to_string()),
            vectors[id as usize - 1].clone(),
        )
        .unwrap();
    }
    let ids = |v: &Vectors| -> Vec<u64> {
        v.search(query, k, |id| id % 2 == 1)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(ids(&a), truth);
    assert_eq!(ids(&b), truth);
}

#[test]
fn identical_vectors_at_the_cut_all_come_back_for_the_ranking_to_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
    // Six copies of one vector (the same item text in six files), one other vector.
    for id in 1..=6u64 {
        v.add(id, text_hash(&id.to_string()), unit(&[1.0, 0.2, 0.0]))
            .unwrap();
    }
    v.add(7, text_hash("7"), unit(&[0.0, 1.0, 0.0])).unwrap();
    let mut ids: Vec<u64> = v
        .search(&unit(&[1.0, 0.0, 0.0]), 2, |_| true)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
}

/// usearch keeps one search context per thread it reserved (the core count by default) and
/// fails a search when none is free; more searches than that run at once here, on an index
/// freshly built and on one loaded from disk (a restarted service). Each search holds its
/// context a millisecond longer (its filter waits once), as a search of a large index does.
#[test]
fn more_concurrent_searches_than_cores_all_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
    for id in 0..200u64 {
        let x = id as f32;
        v.add(id, text_hash(&id.to_string()), unit(&[1.0, x, x * x + 1.0]))
            .unwrap();
    }
    let searches = |v: &Vectors| {
        let threads = 4 * std::thread::available_parallelism().map_or(4, |n| n.get());
        let start = std::sync::Barrier::new(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        (0..20)
                            .map(|i| {
                                let q = unit(&[1.0, (t * 20 + i) as f32, 3.0]);
                                let first = std::cell::Cell::new(true);
                                let slow = |_| {
                                    if first.replace(false) {
                                        std::thread::sleep(std::time::Duration::from_millis(1));
                                    }
                                    true
                                };
                                v.search(&q, 5, slow).map(|hits| hits.len())
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                for found in h.join().unwrap() {
                    assert_eq!(found.unwrap(), 5);
                }
            }
        });
    };
    searches(&v);
    v.save(&HashSet::new()).unwrap();
    drop(v);
    let v = Vectors::open(dir.path(), "m", 3).unwrap();
    assert_eq!(v.len(), 200);
    searches(&v);
}

#[test]
fn kept_embeddings_survive_a_run_that_never_saved_and_a_torn_record_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
    v.add(1, text_hash("a"), unit(&[1.0, 0.0, 0.0])).unwrap();
    v.add(2, text_hash("b"), unit(&[0.0, 1.0, 0.0])).unwrap();
    v.keep(&[text_hash("a"), text_hash("b")]).unwrap();
    drop(v); // interrupted: no save
    // A crash in the middle of the next append leaves half a record.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(JOURNAL))
        .unwrap();
    f.write_all(&[7u8; 40]).unwrap();
    drop(f);

    let mut v = Vectors::open(dir.path(), "m", 3).unwrap();
    assert!(
        v.is_empty(),
        "item vectors come back from the cache, not the journal"
    );
    assert_eq!(v.cached(&text_hash("a")), Some(&unit(&[1.0, 0.0, 0.0])));
    assert_eq!(v.cached(&text_hash("b")), Some(&unit(&[0.0, 1.0, 0.0])));
    let live: HashSet<TextHash> = [text_hash("a")].into();
    v.save(&live).unwrap();
    assert!(
        !dir.path().join(JOURNAL).exists(),
        "save folds the journal in"
    );
    drop(v);
    let v = Vectors::open(dir.path(), "m", 3).unwrap();
    assert!(v.cached(&text_hash("a")).is_some());
    assert!(v.cached(&text_hash("b")).is_none());
}
