mod adapter;
mod binary;
mod overlay;
mod retrieval;
mod watch;
