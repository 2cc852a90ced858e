//! Sets kept as sorted, deduplicated slices.

/// Jaccard similarity |A ∩ B| / |A ∪ B| of two sorted, deduplicated sets, by one
/// merge; 1 when both are empty.
pub fn jaccard<T: Ord>(a: &[T], b: &[T]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    inter as f64 / (a.len() + b.len() - inter) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn jaccard_of_sorted_sets() {
        assert_eq!(super::jaccard::<u32>(&[], &[]), 1.0);
        assert_eq!(super::jaccard(&[1, 2, 3], &[2, 3, 4, 5]), 0.4);
        assert_eq!(super::jaccard(&[1], &[2]), 0.0);
    }
}
