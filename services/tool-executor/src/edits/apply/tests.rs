use super::*;

fn write(dir: &Path, rel: &str, base: Option<&str>, content: &str) -> FileWrite {
    FileWrite {
        abs: dir.join(rel),
        rel: rel.into(),
        base_hash: base.map(|b| blake3::hash(b.as_bytes()).to_hex().to_string()),
        content: content.into(),
    }
}

#[test]
fn writes_every_file_and_removes_the_record() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "a\n").unwrap();
    let writes = [
        write(dir.path(), "a.rs", Some("a\n"), "A\n"),
        write(dir.path(), "new/b.rs", None, "B\n"),
    ];
    let originals = check(&writes).unwrap();
    let record = dir.path().join("undo/p.json");
    write_all(&writes, originals, &record, &|_| Ok(())).unwrap();
    assert_eq!(fs::read_to_string(dir.path().join("a.rs")).unwrap(), "A\n");
    assert_eq!(
        fs::read_to_string(dir.path().join("new/b.rs")).unwrap(),
        "B\n"
    );
    assert!(record.exists());
    discard(&record);
    assert!(!record.exists());
}

#[test]
fn a_written_file_keeps_its_owner_and_mode() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.rs");
    fs::write(&file, "a\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    // Another user's file (the tests run as root; elsewhere there is nothing to check).
    if std::os::unix::fs::chown(&file, Some(4321), Some(4322)).is_err() {
        return;
    }
    let writes = [write(dir.path(), "a.rs", Some("a\n"), "A\n")];
    let originals = check(&writes).unwrap();
    write_all(&writes, originals, &dir.path().join("undo/p.json"), &|_| {
        Ok(())
    })
    .unwrap();
    let after = fs::metadata(&file).unwrap();
    assert_eq!(
        (after.uid(), after.gid(), after.mode() & 0o7777),
        (4321, 4322, 0o640)
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "A\n");
}

#[test]
fn a_save_between_the_check_and_the_write_is_kept_and_the_edit_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.rs"), dir.path().join("b.rs"));
    fs::write(&a, "a\n").unwrap();
    fs::write(&b, "b\n").unwrap();
    let writes = [
        write(dir.path(), "a.rs", Some("a\n"), "A\n"),
        write(dir.path(), "b.rs", Some("b\n"), "B\n"),
    ];
    let record = dir.path().join("undo/p.json");
    // The developer saves b.rs after the check, just before its write.
    let originals = check(&writes).unwrap();
    let e = write_all(&writes, originals, &record, &|i| {
        if i == 1 {
            fs::write(&b, "saved by the developer\n")?;
        }
        Ok(())
    })
    .unwrap_err();
    assert_eq!(
        e,
        ApplyError::Stale {
            file: "b.rs".into(),
            why: "changed"
        }
    );
    assert_eq!(
        (
            fs::read_to_string(&a).unwrap(),
            fs::read_to_string(&b).unwrap()
        ),
        ("a\n".into(), "saved by the developer\n".into())
    );
    // A file created meanwhile where the edit creates one is not replaced either.
    let c = dir.path().join("c.rs");
    let writes = [write(dir.path(), "c.rs", None, "C\n")];
    let originals = check(&writes).unwrap();
    let e = write_all(&writes, originals, &record, &|_| fs::write(&c, "mine\n")).unwrap_err();
    assert_eq!(
        e,
        ApplyError::Stale {
            file: "c.rs".into(),
            why: "was created"
        }
    );
    assert_eq!(fs::read_to_string(&c).unwrap(), "mine\n");
    // Nothing of the attempts is left behind.
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["a.rs", "b.rs", "c.rs", "undo"]);
}

#[test]
fn a_read_only_file_is_refused_and_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.rs"), dir.path().join("b.rs"));
    fs::write(&a, "a\n").unwrap();
    fs::write(&b, "b\n").unwrap();
    fs::set_permissions(&b, fs::Permissions::from_mode(0o444)).unwrap();
    let writes = [
        write(dir.path(), "a.rs", Some("a\n"), "A\n"),
        write(dir.path(), "b.rs", Some("b\n"), "B\n"),
    ];
    let e = check(&writes).unwrap_err();
    assert_eq!(
        e,
        ApplyError::ReadOnly {
            file: "b.rs".into(),
            mode: 0o444
        }
    );
    assert_eq!(
        e.to_string(),
        "b.rs is read-only (mode 444); nothing was written: make it writable (chmod u+w) to \
         edit it"
    );
    assert_eq!(
        (
            fs::read_to_string(&a).unwrap(),
            fs::read_to_string(&b).unwrap()
        ),
        ("a\n".into(), "b\n".into())
    );
    // Writable by its owner only is writable.
    fs::set_permissions(&b, fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(read_only(&b), None);
    assert!(check(&writes).is_ok());
}

#[test]
fn a_changed_or_created_file_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "changed\n").unwrap();
    let e = check(&[write(dir.path(), "a.rs", Some("a\n"), "A\n")]).unwrap_err();
    assert_eq!(
        e,
        ApplyError::Stale {
            file: "a.rs".into(),
            why: "changed"
        }
    );
    let e = check(&[write(dir.path(), "a.rs", None, "A\n")]).unwrap_err();
    assert_eq!(
        e,
        ApplyError::Stale {
            file: "a.rs".into(),
            why: "was created"
        }
    );
}

#[test]
fn a_failure_between_two_writes_restores_both_files() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "a\n").unwrap();
    fs::write(dir.path().join("b.rs"), "b\n").unwrap();
    let writes = [
        write(dir.path(), "a.rs", Some("a\n"), "A\n"),
        write(dir.path(), "b.rs", Some("b\n"), "B\n"),
        write(dir.path(), "c.rs", None, "C\n"),
    ];
    let originals = check(&writes).unwrap();
    let record = dir.path().join("undo/p.json");
    let e = write_all(&writes, originals, &record, &|i| {
        if i == 2 {
            Err(std::io::Error::other("disk full"))
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!(
        e,
        ApplyError::Failed {
            file: "c.rs".into(),
            reason: "disk full".into()
        }
    );
    assert_eq!(fs::read_to_string(dir.path().join("a.rs")).unwrap(), "a\n");
    assert_eq!(fs::read_to_string(dir.path().join("b.rs")).unwrap(), "b\n");
    assert!(!dir.path().join("c.rs").exists());
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 3, "{leftovers:?}"); // a.rs, b.rs, undo/
    assert!(!record.exists());
}

#[test]
fn a_file_never_replaced_is_not_written_again() {
    // The write of the only file fails before its rename (a full disk): nothing was
    // replaced, so nothing is restored (the restore's own write would fail there too and
    // be reported as a failed restore).
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "a\n").unwrap();
    let inode = || fs::metadata(dir.path().join("a.rs")).unwrap().ino();
    let before = inode();
    let writes = [write(dir.path(), "a.rs", Some("a\n"), "A\n")];
    let originals = check(&writes).unwrap();
    let record = dir.path().join("undo/p.json");
    let e = write_all(&writes, originals, &record, &|_| {
        Err(std::io::Error::other("no space left"))
    })
    .unwrap_err();
    assert_eq!(
        e,
        ApplyError::Failed {
            file: "a.rs".into(),
            reason: "no space left".into()
        }
    );
    assert_eq!(
        (
            inode(),
            fs::read_to_string(dir.path().join("a.rs")).unwrap()
        ),
        (before, "a\n".into())
    );
    assert!(!record.exists());
}

#[test]
fn an_interrupted_apply_is_rolled_back_at_start() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.rs"), "half-written\n").unwrap();
    fs::write(dir.path().join("n.rs"), "new\n").unwrap();
    let record = dir.path().join("undo/p.json");
    write_record(
        &record,
        &UndoRecord {
            files: vec![
                (dir.path().join("a.rs"), Some("a\n".into())),
                (dir.path().join("n.rs"), None),
            ],
        },
    )
    .unwrap();
    // What a process killed mid-apply leaves: a temporary sibling of the file it was
    // writing, and a half-written record of another apply.
    fs::write(dir.path().join(".a.rs.ploke-4242.tmp"), "A\n").unwrap();
    fs::write(dir.path().join("undo/.q.json.ploke-4242.tmp"), "{\"fi").unwrap();
    fs::write(dir.path().join(".keep.ploke-notes.tmp"), "mine").unwrap();
    assert!(recover(&record).unwrap());
    assert_eq!(sweep_temp_files(&dir.path().join("undo")), 1);
    assert_eq!(fs::read_to_string(dir.path().join("a.rs")).unwrap(), "a\n");
    assert!(!dir.path().join("n.rs").exists());
    assert!(!recover(&record).unwrap());
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".keep.ploke-notes.tmp", "a.rs", "undo"]);
    assert_eq!(fs::read_dir(dir.path().join("undo")).unwrap().count(), 0);
}

#[test]
fn temp_names_are_recognised_exactly() {
    assert!(is_temp_name(".a.rs.ploke-12.tmp", Some("a.rs")));
    assert!(is_temp_name(".a.rs.ploke-12.tmp", None));
    assert!(!is_temp_name(".a.rs.ploke-12.tmp", Some("b.rs")));
    assert!(!is_temp_name(".a.rs.ploke-.tmp", None));
    assert!(!is_temp_name("a.rs.ploke-12.tmp", None));
    assert!(!is_temp_name(".a.rs.ploke-12", None));
}
