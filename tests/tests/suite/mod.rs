mod auth;
mod wiring;
