//! The pseudo-random sequence unit tests draw from: a 64-bit linear congruential generator
//! (Knuth's MMIX constants), so a failing case replays from its seed.

/// The generator's state; [`Lcg::next`] steps it and returns the new state.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    /// The next state (callers take the bits they need, the high ones being the best).
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }
}
