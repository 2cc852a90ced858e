//! Durations written for people.

/// A duration for people: `12.3 s`, `4.5 min`, `2.10 h`.
pub fn human_time(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.1} s")
    } else if s < 5400.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.2} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_suits_them() {
        assert_eq!(human_time(12.34), "12.3 s");
        assert_eq!(human_time(270.0), "4.5 min");
        assert_eq!(human_time(7560.0), "2.10 h");
    }
}
