(function() {
    const implementors = Object.fromEntries([["zk_locks",[["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/fmt/trait.Display.html\" title=\"trait core::fmt::Display\">Display</a> for <a class=\"enum\" href=\"zk_locks/client/enum.ZkError.html\" title=\"enum zk_locks::client::ZkError\">ZkError</a>",0],["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/fmt/trait.Display.html\" title=\"trait core::fmt::Display\">Display</a> for <a class=\"enum\" href=\"zk_locks/client/native/jute/enum.DecodeError.html\" title=\"enum zk_locks::client::native::jute::DecodeError\">DecodeError</a>",0],["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/fmt/trait.Display.html\" title=\"trait core::fmt::Display\">Display</a> for <a class=\"enum\" href=\"zk_locks/error/enum.Error.html\" title=\"enum zk_locks::error::Error\">Error</a>",0],["impl <a class=\"trait\" href=\"https://doc.rust-lang.org/1.95.0/core/fmt/trait.Display.html\" title=\"trait core::fmt::Display\">Display</a> for <a class=\"enum\" href=\"zk_locks/locks/enum.ParticipantKind.html\" title=\"enum zk_locks::locks::ParticipantKind\">ParticipantKind</a>",0]]]]);
    if (window.register_implementors) {
        window.register_implementors(implementors);
    } else {
        window.pending_implementors = implementors;
    }
})()
//{"start":59,"fragment_lengths":[1126]}