//! Compiles every `.proto` under `ploke/` with protox (no system protoc) and generates the
//! prost messages and tonic clients/servers, plus the encoded descriptor set used by server
//! reflection and the tool registry.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let mut protos = Vec::new();
    collect_protos(&root.join("ploke"), &mut protos)?;
    protos.sort();
    for proto in &protos {
        println!("cargo:rerun-if-changed={}", proto.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    // A proto added (a new package directory) is seen too: cargo scans a directory whole.
    println!("cargo:rerun-if-changed={}", root.join("ploke").display());

    // Source info is kept: field comments become the descriptions the model reads.
    let mut compiler = protox::Compiler::new([&root])?;
    compiler
        .include_imports(true)
        .include_source_info(true)
        .open_files(protos.iter().map(|p| p.strip_prefix(&root).unwrap_or(p)))?;

    // Encoded by protox itself so that custom options (tool rules) survive; prost-types would
    // drop them as unknown fields.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("ploke_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    let fds = compiler.file_descriptor_set();

    // google.protobuf types map to prost-types (prost-build's default extern path).
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
