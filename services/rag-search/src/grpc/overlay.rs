//! Conversions of the overlay RPCs (SyncOverlay, PutOverlayFiles, GetOverlay, DropOverlay).
//! Field validation (session id, paths, hashes, contents) is the domain's: it names the
//! request's fields, and the adapter maps its errors like every other.

use ploke_proto::rag::v1::{self as pb};
use tonic::Status;

use crate::service::{ManifestFile, OverlayEntryState, OverlayInfo, OverlayPut, Put, Synced};

pub(super) fn manifest(files: Vec<pb::ManifestEntry>) -> Vec<ManifestFile> {
    files
        .into_iter()
        .map(|f| ManifestFile {
            path: f.path,
            hash: f.hash,
        })
        .collect()
}

pub(super) fn puts(files: Vec<pb::OverlayFile>) -> Vec<OverlayPut> {
    files
        .into_iter()
        .map(|f| OverlayPut {
            path: f.path,
            content: f.content,
            expected_hash: f.expected_hash,
        })
        .collect()
}

pub(super) fn synced_to_pb(s: Synced) -> pb::SyncOverlayResponse {
    pb::SyncOverlayResponse {
        need: s.need,
        changed: s.changed,
        added: s.added,
        deleted: s.deleted,
        unchanged: s.unchanged,
        version: s.version,
        bytes: s.bytes,
        max_bytes: s.max_bytes,
    }
}

pub(super) fn put_to_pb(p: Put) -> pb::PutOverlayFilesResponse {
    pb::PutOverlayFilesResponse {
        version: p.version,
        pending: p.pending,
        items: p.items,
    }
}

/// The overlay as the proto has it; refused with RESOURCE_EXHAUSTED (ask for fewer contents)
/// when it would not fit in one message of `max_bytes`.
pub(super) fn overlay_to_pb(o: OverlayInfo, max_bytes: usize) -> Result<pb::Overlay, Status> {
    let out = pb::Overlay {
        session_id: o.session_id,
        workspace_root: o.root.map(|r| r.display().to_string()).unwrap_or_default(),
        version: o.version,
        owner: o.owner,
        entries: o
            .entries
            .into_iter()
            .map(|e| {
                let (state, hash, size) = match e.entry {
                    OverlayEntryState::Changed { hash, size } => {
                        (pb::OverlayEntryState::Changed, hash, size)
                    }
                    OverlayEntryState::Deleted => {
                        (pb::OverlayEntryState::Deleted, String::new(), 0)
                    }
                    OverlayEntryState::Pending { hash } => {
                        (pb::OverlayEntryState::Pending, hash, 0)
                    }
                };
                pb::OverlayEntry {
                    path: e.path,
                    state: state as i32,
                    hash,
                    size,
                    content: e.content.unwrap_or_default(),
                }
            })
            .collect(),
    };
    let len = prost::Message::encoded_len(&out);
    if len > max_bytes {
        return Err(Status::resource_exhausted(format!(
            "the overlay with the contents asked for is {len} bytes, over the {max_bytes} bytes of one message; ask for fewer `paths` at a time"
        )));
    }
    Ok(out)
}
