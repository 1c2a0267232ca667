window.ALL_CRATES = ["zk_locks","zklock"];
//{"start":21,"fragment_lengths":[10,9]}