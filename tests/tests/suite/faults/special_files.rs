//! FIFOs, devices, symlink loops and `.git` in any case: every tool answers at once with a
//! typed error naming the argument, and no call leaves a thread behind.

use std::os::unix::fs::symlink;
use std::process::Command;

use ploke_e2e::{LIB_RS, Sandbox};
use ploke_proto::tools::v1::{
    CreateFileArgs, GetFileMetadataArgs, ListDirArgs, ReadFileArgs, ToolErrorCode, tool_call,
    tool_result,
};

use super::tool;

fn metadata(path: &str) -> tool_call::Args {
    tool_call::Args::GetFileMetadata(GetFileMetadataArgs {
        file_path: path.into(),
    })
}

fn read(path: &str) -> tool_call::Args {
    tool_call::Args::ReadFile(ReadFileArgs {
        file: path.into(),
        ..Default::default()
    })
}

#[tokio::test]
async fn fifos_and_devices_are_refused_at_once_and_leave_no_thread_behind() {
    // 600 calls at once queue for 4 blocking slots: on a loaded machine the default 5 s wait
    // for a slot could refuse the last ones (RESOURCE_EXHAUSTED), which is not under test.
    let sandbox = Sandbox::start_with(|c| c.limits.blocking_queue_ms = 60_000)
        .await
        .unwrap();
    sandbox
        .index_files(&[("src/lib.rs", LIB_RS)])
        .await
        .unwrap();
    let ws = sandbox.workspace_root();
    assert!(
        Command::new("mkfifo")
            .arg(ws.join("pipe.rs"))
            .status()
            .unwrap()
            .success()
    );
    // A device node inside the workspace needs root; a symlink to one is refused as outside.
    let device = Command::new("mknod")
        .args([ws.join("zero").to_str().unwrap(), "c", "1", "5"])
        .status()
        .is_ok_and(|s| s.success());
    symlink("/dev/zero", ws.join("zero_link")).unwrap();

    let e = tool(&sandbox, metadata("pipe.rs")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str(), e.message.as_str()),
        (
            ToolErrorCode::InvalidArgument,
            "file_path",
            "pipe.rs is a FIFO, not a regular file"
        )
    );
    let e = tool(&sandbox, read("pipe.rs")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str()),
        (ToolErrorCode::InvalidArgument, "file")
    );
    let e = tool(&sandbox, metadata("zero_link")).await.unwrap_err();
    assert_eq!(e.code(), ToolErrorCode::OutsideWorkspace);
    if device {
        let e = tool(&sandbox, metadata("zero")).await.unwrap_err();
        assert_eq!(
            (e.code(), e.message.as_str()),
            (
                ToolErrorCode::InvalidArgument,
                "zero is a device, not a regular file"
            )
        );
    } else {
        eprintln!("not root: the device-node case is covered by ploke-runtime's /dev/zero test");
    }

    // More calls than tokio has blocking threads by default: each ends, none is stuck.
    let calls = (0..600).map(|i| {
        let sandbox = &sandbox;
        async move {
            let args = if i % 2 == 0 {
                metadata("pipe.rs")
            } else {
                read("pipe.rs")
            };
            tool(sandbox, args).await.unwrap_err().code()
        }
    });
    let codes = futures::future::join_all(calls).await;
    assert!(codes.iter().all(|c| *c == ToolErrorCode::InvalidArgument));
    let listed = tool(&sandbox, tool_call::Args::ListDir(ListDirArgs::default()))
        .await
        .unwrap();
    let Some(tool_result::Result::ListDir(listed)) = listed.result else {
        panic!("{listed:?}")
    };
    assert!(listed.entries.iter().any(|e| e.name == "pipe.rs"));
    let text = tool(&sandbox, read("src/lib.rs")).await.unwrap();
    let Some(tool_result::Result::ReadFile(text)) = text.result else {
        panic!("{text:?}")
    };
    assert_eq!(text.content, LIB_RS);
    sandbox.stop().await.unwrap();
}

#[tokio::test]
async fn loops_and_git_in_any_case_are_typed_errors_naming_the_field() {
    let sandbox = Sandbox::start().await.unwrap();
    let ws = sandbox.workspace_root();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    symlink(ws.join("loop_b"), ws.join("loop_a")).unwrap();
    symlink(ws.join("loop_a"), ws.join("loop_b")).unwrap();

    let e = tool(&sandbox, read("loop_a/x.rs")).await.unwrap_err();
    assert_eq!(
        (e.code(), e.field.as_str(), e.message.as_str()),
        (
            ToolErrorCode::InvalidArgument,
            "file",
            "`loop_a/x.rs` runs into a symlink loop"
        )
    );
    for path in [".GIT/config", ".Git/hooks/pre-commit", ".ploke/state.db"] {
        let e = tool(
            &sandbox,
            tool_call::Args::CreateFile(CreateFileArgs {
                file_path: path.into(),
                content: "x".into(),
                on_exists: None,
            }),
        )
        .await
        .unwrap_err();
        assert_eq!(
            (e.code(), e.field.as_str()),
            (ToolErrorCode::PermissionDenied, "file_path"),
            "{path}: {e:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    sandbox.stop().await.unwrap();
}
