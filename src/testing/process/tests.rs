use super::*;

fn zoo_cfg(timing: Timing) -> String {
    let node = Node::create(NodeConfig {
        host: Ipv4Addr::LOCALHOST,
        netns: None,
        timing,
        client_port: 1,
        quorum: None,
        secure_port: None,
    })
    .unwrap();
    fs::read_to_string(node.dir.join("zoo.cfg")).unwrap()
}

/// Unstated session bounds are not written (ZooKeeper's own: 2 and 20 ticks); stated
/// ones are, in whole milliseconds.
#[test]
fn session_bounds_are_written_only_when_stated() {
    let cfg = zoo_cfg(Timing::default());
    assert!(!cfg.contains("SessionTimeout"), "{cfg}");
    assert!(cfg.contains("maxClientCnxns=0\n4lw."), "{cfg}");
    let cfg = zoo_cfg(Timing {
        min_session_timeout: Some(Duration::from_millis(1000)),
        max_session_timeout: Some(Duration::from_secs(60)),
        ..Timing::default()
    });
    assert!(
        cfg.contains("minSessionTimeout=1000\nmaxSessionTimeout=60000\n4lw."),
        "{cfg}"
    );
}

#[test]
fn a_least_session_above_the_longest_is_refused() {
    let timing = |min: u64, max: Option<u64>| Timing {
        min_session_timeout: Some(Duration::from_millis(min)),
        max_session_timeout: max.map(Duration::from_millis),
        ..Timing::default()
    };
    assert_eq!(timing(1000, Some(60000)).invalid(), None);
    assert!(timing(2000, Some(1000)).invalid().is_some());
    // Unstated, the longest is twenty ticks (10 s at 500 ms).
    assert!(timing(11000, None).invalid().is_some());
    assert!(timing(0, None).invalid().is_some());
    assert_eq!(Timing::default().invalid(), None);
}
