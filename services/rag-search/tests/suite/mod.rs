mod adapter;
mod binary;
mod retrieval;
mod watch;
