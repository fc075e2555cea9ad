mod binary;
mod retention;
mod storage;
