mod binary;
mod storage;
