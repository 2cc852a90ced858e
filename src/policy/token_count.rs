//! Token counting for prompt budgets: a model's tokenizer, or one token per four
//! characters when none is given.

/// Counts tokens of a text.
pub trait TokenCounter {
    fn count(&self, text: &str) -> usize;
}

/// The approximation used when no tokenizer is given: one token per 4 characters.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharApprox;

impl TokenCounter for CharApprox {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
}
