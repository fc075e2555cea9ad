mod adapter;
mod binary;
mod retrieval;
