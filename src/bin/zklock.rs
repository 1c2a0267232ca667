//! `zklock`: run a command while holding a ZooKeeper lock (being built).
fn main() {
    eprintln!("zklock: not built yet");
    std::process::exit(2);
}
