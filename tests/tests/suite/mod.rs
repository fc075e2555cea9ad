mod auth;
mod session;
mod through_gateway;
mod wiring;
