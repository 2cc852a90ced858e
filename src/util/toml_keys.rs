//! TOML tables as dotted keys (`lora.r`) and their values' TOML text.

use std::collections::BTreeMap;

/// Every leaf of `t` under its dotted key, the value as TOML text (`8`, `"dapo"`,
/// `["q_proj"]`), in key order.
pub fn dotted(t: &toml::Table) -> BTreeMap<String, String> {
    fn walk(prefix: &str, t: &toml::Table, out: &mut BTreeMap<String, String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(inner) => walk(&key, inner, out),
                other => {
                    out.insert(key, other.to_string());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", t, &mut out);
    out
}
