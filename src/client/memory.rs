//! In-memory ZooKeeper ensemble with fault injection (being built).
