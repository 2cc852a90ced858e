//! The compiled node graph made safe to match. Every list of alternatives
//! ([`Node::AnyOf`]) is flattened into the distinct nodes it may be, none of them
//! another list, so starting a value never recurses and a node reached by many
//! paths (2^depth of them in a hostile schema) is followed once; a `$ref` loop with
//! no object or array in between (which would recurse without end) is refused; a
//! list past [`MAX_ALTERNATIVES`] is refused naming its count; and every node must
//! have a finite value, or the schema is refused saying where. Each pass is
//! iterative: nothing on the stack grows with the schema.

use super::{MAX_ALTERNATIVES, Node, NodeId};
use anyhow::{Result, bail};

/// Flattens the alternatives and checks that every node reachable from `root` has
/// a value; `paths` says where each node is, for messages.
pub(super) fn resolve(nodes: &mut [Node], paths: &[String], root: NodeId) -> Result<()> {
    flatten(nodes, paths)?;
    satisfiable(nodes, paths, root)
}

/// The alternatives a node lists, where it is a list of them.
fn list(n: &Node) -> Option<&[NodeId]> {
    match n {
        Node::AnyOf(a) => Some(a),
        _ => None,
    }
}

// Kept whole: one iterative depth-first walk whose visit states and leaf lists
// change together.
fn flatten(nodes: &mut [Node], paths: &[String]) -> Result<()> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let lists: Vec<Option<Vec<NodeId>>> =
        nodes.iter().map(|n| list(n).map(<[_]>::to_vec)).collect();
    let mut state = vec![NEW; nodes.len()];
    let mut leaves: Vec<Vec<NodeId>> = vec![Vec::new(); nodes.len()];
    // Sorts and dedups `v`; more than `cap` distinct entries refuse node `id`.
    let tidy = |v: &mut Vec<NodeId>, id: NodeId, cap: usize| -> Result<()> {
        v.sort_unstable();
        v.dedup();
        if v.len() > cap {
            bail!(
                "{}: a value here may be any of {}{} alternatives; at most {MAX_ALTERNATIVES} are followed while decoding",
                paths[id],
                if cap > MAX_ALTERNATIVES {
                    "more than "
                } else {
                    ""
                },
                if cap > MAX_ALTERNATIVES { cap } else { v.len() }
            );
        }
        Ok(())
    };
    let hard_cap = 4 * MAX_ALTERNATIVES;
    for start in 0..nodes.len() {
        if lists[start].is_none() || state[start] == DONE {
            continue;
        }
        state[start] = OPEN;
        let mut stack: Vec<(NodeId, usize)> = vec![(start, 0)];
        while let Some(top) = stack.last_mut() {
            let (id, i) = *top;
            let alts = lists[id].as_deref().unwrap_or_default();
            if let Some(&c) = alts.get(i) {
                top.1 += 1;
                if matches!(nodes[c], Node::Pending) {
                    bail!("{}: a `$ref` that was never resolved", paths[c]);
                }
                if lists[c].is_none() {
                    leaves[id].push(c);
                } else {
                    match state[c] {
                        OPEN => bail!(
                            "{}: refers back to itself through `$ref`s with no object or array in between, which has no value to decode",
                            paths[c]
                        ),
                        NEW => {
                            state[c] = OPEN;
                            stack.push((c, 0));
                            continue;
                        }
                        _ => {
                            let more = leaves[c].clone();
                            leaves[id].extend(more);
                        }
                    }
                }
                if leaves[id].len() > hard_cap {
                    tidy(&mut leaves[id], id, hard_cap)?;
                }
            } else {
                tidy(&mut leaves[id], id, MAX_ALTERNATIVES)?;
                state[id] = DONE;
                stack.pop();
                if let Some(&(parent, _)) = stack.last() {
                    let more = leaves[id].clone();
                    leaves[parent].extend(more);
                    if leaves[parent].len() > hard_cap {
                        tidy(&mut leaves[parent], parent, hard_cap)?;
                    }
                }
            }
        }
    }
    for (id, l) in leaves.into_iter().enumerate() {
        if lists[id].is_some() {
            nodes[id] = Node::AnyOf(l);
        }
    }
    Ok(())
}

/// The nodes a value of `n` must contain a value of (all of them, or for a list
/// of alternatives one of them) and every node a value of `n` may contain.
fn edges(n: &Node) -> (Vec<NodeId>, Vec<NodeId>) {
    match n {
        Node::Object {
            props,
            required,
            additional,
        } => {
            let needs = props
                .iter()
                .zip(required)
                .filter(|(_, r)| **r)
                .map(|((_, id), _)| *id)
                .collect();
            let mut all: Vec<NodeId> = props.iter().map(|(_, id)| *id).collect();
            all.extend(additional);
            (needs, all)
        }
        Node::Array { items, min, .. } => (
            if *min > 0 { vec![*items] } else { Vec::new() },
            vec![*items],
        ),
        Node::AnyOf(alts) => (alts.clone(), alts.clone()),
        _ => (Vec::new(), Vec::new()),
    }
}

fn satisfiable(nodes: &[Node], paths: &[String], root: NodeId) -> Result<()> {
    let n = nodes.len();
    let mut need = vec![0usize; n];
    let mut users: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut sat = vec![false; n];
    let mut queue = Vec::new();
    for (u, node) in nodes.iter().enumerate() {
        let (needs, _) = edges(node);
        need[u] = match node {
            // One alternative with a value is enough.
            Node::AnyOf(_) => usize::from(!needs.is_empty()),
            Node::Pending => 1,
            _ => needs.len(),
        };
        for d in needs {
            users[d].push(u);
        }
        if need[u] == 0 && !matches!(node, Node::Pending | Node::AnyOf(_)) {
            sat[u] = true;
            queue.push(u);
        }
    }
    while let Some(d) = queue.pop() {
        for &u in &users[d] {
            if sat[u] {
                continue;
            }
            need[u] = if matches!(nodes[u], Node::AnyOf(_)) {
                0
            } else {
                need[u] - 1
            };
            if need[u] == 0 {
                sat[u] = true;
                queue.push(u);
            }
        }
    }
    let mut seen = vec![false; n];
    let mut todo = vec![root];
    seen[root] = true;
    while let Some(u) = todo.pop() {
        if !sat[u] {
            bail!(
                "{}: no finite value satisfies this schema (what it requires leads back to it without end)",
                paths[u]
            );
        }
        for c in edges(&nodes[u]).1 {
            if !seen[c] {
                seen[c] = true;
                todo.push(c);
            }
        }
    }
    Ok(())
}
