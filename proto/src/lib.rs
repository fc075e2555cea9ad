//! Every ploke protobuf contract: generated messages, gRPC clients and servers, the encoded
//! descriptor set for reflection, and the typed tool registry.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated {
    pub(crate) mod ploke {
        pub mod common {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.common.v1.rs"));
            }
        }
        pub mod rag {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.rag.v1.rs"));
            }
        }
        pub mod tools {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.tools.v1.rs"));
            }
        }
        pub mod session {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.session.v1.rs"));
            }
        }
        pub mod gateway {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.gateway.v1.rs"));
            }
        }
        pub mod runtime {
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/ploke.runtime.v1.rs"));
            }
        }
    }
}

pub use generated::ploke::{common, gateway, rag, runtime, session, tools};

/// Encoded `FileDescriptorSet` of every ploke proto and its imports, with source info.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ploke_descriptor.bin"));

pub mod registry;
pub mod snippet;
pub mod status;
pub mod tool_text;
