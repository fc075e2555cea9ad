mod auth;
mod remote_embeddings;
mod session;
mod through_gateway;
mod wiring;
