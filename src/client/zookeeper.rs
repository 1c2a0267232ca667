//! Backend for real ensembles over the `zookeeper` crate (being built).
