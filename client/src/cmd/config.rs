//! `ploke config`: the configuration the in-process services of this workspace would run
//! with, every setting with where it came from (a file, the environment, a flag, ploke
//! itself, or the default), and the files looked for.

use std::io::Write as _;

use super::{Target, providers, up};

/// Prints the effective configuration for `target`'s workspace.
pub(crate) async fn config(target: &Target) -> anyhow::Result<()> {
    let workspace = up::workspace(target.workspace.clone())?;
    let files = up::config_files(&workspace, target.config.clone());
    let (layers, effective, provider) =
        up::embedded_layers(&workspace, target.config.clone()).await?;
    println!("# ploke config for {}", workspace.display());
    println!("# files, lowest first (a later one wins key by key):");
    for (file, found) in &files {
        let state = if *found { "" } else { "  (not found)" };
        println!("#   {}{state}", file.display());
    }
    match provider {
        Some(p) => println!("# model provider: {p}"),
        None => println!("# model provider: none ({})", providers::NONE_HINT),
    }
    if let Some(url) = &target.gateway {
        println!(
            "# note: --gateway {url} is a remote gateway; this is what `ploke up` here would use"
        );
    }
    let explained = layers.explain(&effective);
    let width = explained
        .iter()
        .map(|e| crate::describe::width(&e.key) + crate::describe::width(&e.value) + 3)
        .max()
        .unwrap_or(0)
        .min(72);
    // Written by hand, not println!: `ploke config | head` closes the pipe early, which is
    // no error.
    let mut out = std::io::stdout().lock();
    for e in explained {
        let line = format!("{} = {}", e.key, e.value);
        // Padded by the cells it takes: a path in Chinese is twice as wide as its characters.
        let pad = " ".repeat(width.saturating_sub(crate::describe::width(&line)));
        if let Err(err) = writeln!(out, "{line}{pad}  # {}", e.source) {
            if err.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(err.into());
        }
    }
    Ok(())
}
