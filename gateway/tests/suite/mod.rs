mod binary;
mod upstreams;
