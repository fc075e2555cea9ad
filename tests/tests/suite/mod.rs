mod auth;
mod session;
mod wiring;
