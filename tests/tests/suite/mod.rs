mod auth;
mod clear_codes;
mod internal_auth;
mod remote_embeddings;
mod session;
mod storage;
mod through_gateway;
mod wiring;
