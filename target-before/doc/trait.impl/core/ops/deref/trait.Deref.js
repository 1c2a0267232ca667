(function() {
    const implementors = Object.fromEntries([["zk_locks",[["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/ops/deref/trait.Deref.html\" title=\"trait core::ops::deref::Deref\">Deref</a> for <a class=\"struct\" href=\"zk_locks/testing/harness/struct.TestClient.html\" title=\"struct zk_locks::testing::harness::TestClient\">TestClient</a>",0]]]]);
    if (window.register_implementors) {
        window.register_implementors(implementors);
    } else {
        window.pending_implementors = implementors;
    }
})()
//{"start":59,"fragment_lengths":[320]}