//! The read/write mix of the contended scenarios: `read-write` is not a recipe of its own
//! but one read/write lock whose contenders alternate sides, so that readers wait behind
//! writers and writers behind readers (the waits whose hand-off needs no second listing).
//! `CuratorBench.contenderRecipe` maps the contenders the same way.

/// The contended scenario of both sides of one read/write lock.
pub const READ_WRITE: &str = "read-write";

/// The recipe contender `index` (from 0) of a contended scenario of `recipe` runs:
/// [`READ_WRITE`] alternates a writer (even index) and a reader (odd), any other recipe is
/// itself.
pub(super) fn contender_recipe(recipe: &str, index: usize) -> &str {
    match (recipe, index % 2) {
        (READ_WRITE, 0) => "write",
        (READ_WRITE, _) => "read",
        (other, _) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_alternates_writers_and_readers() {
        let sides: Vec<_> = (0..4).map(|i| contender_recipe(READ_WRITE, i)).collect();
        assert_eq!(sides, ["write", "read", "write", "read"]);
        assert_eq!(contender_recipe("mutex", 1), "mutex");
    }
}
