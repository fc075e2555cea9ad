//! What resolving one path through the path policy costs, for a workspace root without a link
//! and for one below a link (a deploy's `current`): `cargo bench -p ploke-runtime --bench
//! path_resolve`. Five rounds of 100,000 resolutions of `src/handlers/users.rs` each; the
//! median round is reported. Results: docs/PERFORMANCE.md.

use std::path::Path;
use std::time::Instant;

use ploke_runtime::path_policy::resolve;

const ROUNDS: usize = 5;
const PER_ROUND: u32 = 100_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let top = std::fs::canonicalize(dir.path())?;
    let tree = top.join("srv/releases/one");
    std::fs::create_dir_all(tree.join("services/api/src/handlers"))?;
    std::fs::write(
        tree.join("services/api/src/handlers/users.rs"),
        "fn users() {}\n",
    )?;
    std::os::unix::fs::symlink(&tree, top.join("srv/current"))?;
    let roots = [
        ("no link", tree.join("services/api")),
        ("below a link", top.join("srv/current/services/api")),
    ];
    for (name, root) in &roots {
        println!("{name}: {:.1} µs per path", median_micros(root)?);
    }
    Ok(())
}

fn median_micros(root: &Path) -> Result<f64, Box<dyn std::error::Error>> {
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..PER_ROUND {
            std::hint::black_box(resolve(root, "src/handlers/users.rs")?);
        }
        rounds.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(PER_ROUND));
    }
    rounds.sort_by(f64::total_cmp);
    Ok(rounds[ROUNDS / 2])
}
