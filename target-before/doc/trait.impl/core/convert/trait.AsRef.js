(function() {
    const implementors = Object.fromEntries([["zk_locks",[["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/convert/trait.AsRef.html\" title=\"trait core::convert::AsRef\">AsRef</a>&lt;dyn <a class=\"trait\" href=\"zk_locks/client/trait.ZkClient.html\" title=\"trait zk_locks::client::ZkClient\">ZkClient</a>&gt; for <a class=\"struct\" href=\"zk_locks/testing/harness/struct.TestClient.html\" title=\"struct zk_locks::testing::harness::TestClient\">TestClient</a>",0]]]]);
    if (window.register_implementors) {
        window.register_implementors(implementors);
    } else {
        window.pending_implementors = implementors;
    }
})()
//{"start":59,"fragment_lengths":[446]}