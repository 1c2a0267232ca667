//! Conformance of watches and of closing: what fires, once, in which case, and what a closed
//! session leaves behind.

use std::time::Duration;

use zk_locks::client::EventType;
use zk_locks::testing::harness::Backend;
use zk_locks::{ConnectionState, CreateMode, ZkError};

use super::support::{event, sorted, Ctx, Events};

pub fn data_watch_fires_on_change(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.persistent("a");
    let watcher = f.connect();
    let events = Events::new();
    watcher.get_data(&a, Some(events.watcher())).unwrap();
    c.client.set_data(&a, b"new", None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeDataChanged, &a));
}

pub fn data_watch_fires_on_delete(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.path("a");
    c.client.create(&a, b"", CreateMode::Ephemeral).unwrap();
    let events = Events::new();
    // Also a watch set by the node's own session.
    c.client.get_data(&a, Some(events.watcher())).unwrap();
    c.client.delete(&a, None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeDeleted, &a));
}

pub fn child_watch_fires_on_create_and_delete(f: &dyn Backend) {
    let c = Ctx::new(f);
    let watcher = f.connect();
    let events = Events::new();
    assert!(watcher
        .get_children(&c.dir, Some(events.watcher()))
        .unwrap()
        .is_empty());
    c.client
        .create(&c.path("x-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    assert_eq!(events.next(), event(EventType::NodeChildrenChanged, &c.dir));
    assert_eq!(
        watcher
            .get_children(&c.dir, Some(events.watcher()))
            .unwrap(),
        vec!["x-0000000000"]
    );
    // Data changes of a child do not fire a child watch.
    c.client
        .set_data(&c.path("x-0000000000"), b"d", None)
        .unwrap();
    c.client.delete(&c.path("x-0000000000"), None).unwrap();
    assert_eq!(events.next(), event(EventType::NodeChildrenChanged, &c.dir));
    c.barrier(watcher.as_ref());
    events.assert_none();
}

pub fn child_watch_fires_on_parent_delete(f: &dyn Backend) {
    let c = Ctx::new(f);
    let parent = c.persistent("parent");
    let watcher = f.connect();
    let children = Events::new();
    let data = Events::new();
    let dir_children = Events::new();
    watcher
        .get_children(&parent, Some(children.watcher()))
        .unwrap();
    watcher.get_data(&parent, Some(data.watcher())).unwrap();
    watcher
        .get_children(&c.dir, Some(dir_children.watcher()))
        .unwrap();
    c.client.delete(&parent, None).unwrap();
    assert_eq!(children.next(), event(EventType::NodeDeleted, &parent));
    assert_eq!(data.next(), event(EventType::NodeDeleted, &parent));
    assert_eq!(
        dir_children.next(),
        event(EventType::NodeChildrenChanged, &c.dir)
    );
    c.barrier(watcher.as_ref());
    children.assert_none();
    data.assert_none();
}

pub fn watches_are_one_shot(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.persistent("a");
    let watcher = f.connect();
    let data = Events::new();
    let children = Events::new();
    watcher.get_data(&a, Some(data.watcher())).unwrap();
    watcher.get_children(&a, Some(children.watcher())).unwrap();
    c.client.set_data(&a, b"1", None).unwrap();
    c.persistent("a/k");
    assert_eq!(data.next(), event(EventType::NodeDataChanged, &a));
    assert_eq!(children.next(), event(EventType::NodeChildrenChanged, &a));
    c.client.set_data(&a, b"2", None).unwrap();
    c.client.delete(&c.path("a/k"), None).unwrap();
    c.client.delete(&a, None).unwrap();
    c.barrier(watcher.as_ref());
    data.assert_none();
    children.assert_none();
}

pub fn no_watch_on_no_node(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.path("a");
    let watcher = f.connect();
    let events = Events::new();
    assert_eq!(
        watcher.get_data(&a, Some(events.watcher())),
        Err(ZkError::NoNode)
    );
    assert_eq!(
        watcher.get_children(&a, Some(events.watcher())),
        Err(ZkError::NoNode)
    );
    c.persistent("a");
    c.persistent("a/k");
    c.client.set_data(&a, b"1", None).unwrap();
    c.client.delete(&c.path("a/k"), None).unwrap();
    c.client.delete(&a, None).unwrap();
    c.barrier(watcher.as_ref());
    events.assert_none();
}

pub fn several_watchers_each_fire_once(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.persistent("a");
    let (w1, w2) = (f.connect(), f.connect());
    let (e1, e2) = (Events::new(), Events::new());
    w1.get_data(&a, Some(e1.watcher())).unwrap();
    w2.get_data(&a, Some(e2.watcher())).unwrap();
    c.client.set_data(&a, b"1", None).unwrap();
    assert_eq!(e1.next(), event(EventType::NodeDataChanged, &a));
    assert_eq!(e2.next(), event(EventType::NodeDataChanged, &a));
    c.client.set_data(&a, b"2", None).unwrap();
    c.barrier(w1.as_ref());
    c.barrier(w2.as_ref());
    e1.assert_none();
    e2.assert_none();
}

pub fn close_removes_ephemerals_and_notifies_others(f: &dyn Backend) {
    let c = Ctx::new(f);
    let owner = f.connect();
    let lock = owner
        .create(&c.path("lock-"), b"", CreateMode::EphemeralSequential)
        .unwrap();
    let plain = owner
        .create(&c.path("e"), b"", CreateMode::Ephemeral)
        .unwrap();
    owner
        .create(&c.path("kept"), b"", CreateMode::Persistent)
        .unwrap();
    let data = Events::new();
    let children = Events::new();
    c.client.get_data(&lock, Some(data.watcher())).unwrap();
    c.client
        .get_children(&c.dir, Some(children.watcher()))
        .unwrap();
    owner.close();
    assert_eq!(data.next(), event(EventType::NodeDeleted, &lock));
    assert_eq!(
        children.next(),
        event(EventType::NodeChildrenChanged, &c.dir)
    );
    assert_eq!(c.client.exists(&lock).unwrap(), None);
    assert_eq!(c.client.exists(&plain).unwrap(), None);
    assert_eq!(
        sorted(c.client.get_children(&c.dir, None).unwrap()),
        vec!["kept"]
    );
    assert_eq!(owner.session().state(), ConnectionState::Closed);
    assert_eq!(owner.exists(&c.dir), Err(ZkError::Closed));
    assert_eq!(
        owner.create(&c.path("x"), b"", CreateMode::Persistent),
        Err(ZkError::Closed)
    );
    owner.close();
    assert_eq!(owner.session().state(), ConnectionState::Closed);
}

pub fn closed_client_drops_its_watches(f: &dyn Backend) {
    let c = Ctx::new(f);
    let a = c.persistent("a");
    let watcher = f.connect();
    let events = Events::new();
    watcher.get_data(&a, Some(events.watcher())).unwrap();
    watcher.close();
    c.client.set_data(&a, b"1", None).unwrap();
    // A watcher of the live client, set after the change, proves the change committed.
    c.barrier(c.client.as_ref());
    assert!(events.rx.recv_timeout(Duration::from_millis(200)).is_err());
}
