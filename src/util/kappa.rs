//! Cohen's kappa for two raters on a yes/no question.

/// Cohen's kappa of a 2×2 table `[[yes & yes, yes & no], [no & yes, no & no]]`
/// (rows: the first rater, columns: the second). None for an empty table; when
/// both raters are constant (chance agreement 1) it is 1 if they agree, else 0.
pub fn cohen_kappa(c: [[usize; 2]; 2]) -> Option<f64> {
    let n = c[0][0] + c[0][1] + c[1][0] + c[1][1];
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let po = (c[0][0] + c[1][1]) as f64 / n;
    let first_yes = (c[0][0] + c[0][1]) as f64 / n;
    let second_yes = (c[0][0] + c[1][0]) as f64 / n;
    let pe = first_yes * second_yes + (1.0 - first_yes) * (1.0 - second_yes);
    Some(if pe >= 1.0 {
        if po >= 1.0 { 1.0 } else { 0.0 }
    } else {
        (po - pe) / (1.0 - pe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kappa_matches_a_hand_count() {
        // po 0.8, pe 0.6*0.6 + 0.4*0.4 = 0.52.
        let k = cohen_kappa([[5, 1], [1, 3]]).unwrap();
        assert!((k - 0.28 / 0.48).abs() < 1e-12, "{k}");
        assert_eq!(cohen_kappa([[0, 0], [0, 0]]), None);
        assert_eq!(cohen_kappa([[4, 0], [0, 0]]), Some(1.0));
        assert_eq!(cohen_kappa([[0, 4], [0, 0]]), Some(0.0));
        // Perfect disagreement on a balanced table is -1.
        assert_eq!(cohen_kappa([[0, 2], [2, 0]]), Some(-1.0));
    }
}
