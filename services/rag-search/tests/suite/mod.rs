mod adapter;
mod binary;
