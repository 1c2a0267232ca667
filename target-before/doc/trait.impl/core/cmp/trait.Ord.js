(function() {
    const implementors = Object.fromEntries([["zk_locks",[["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/cmp/trait.Ord.html\" title=\"trait core::cmp::Ord\">Ord</a> for <a class=\"enum\" href=\"zk_locks/testing/torture/enum.FaultKind.html\" title=\"enum zk_locks::testing::torture::FaultKind\">FaultKind</a>",0],["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/cmp/trait.Ord.html\" title=\"trait core::cmp::Ord\">Ord</a> for <a class=\"enum\" href=\"zk_locks/testing/torture/enum.Recipe.html\" title=\"enum zk_locks::testing::torture::Recipe\">Recipe</a>",0]]]]);
    if (window.register_implementors) {
        window.register_implementors(implementors);
    } else {
        window.pending_implementors = implementors;
    }
})()
//{"start":59,"fragment_lengths":[561]}