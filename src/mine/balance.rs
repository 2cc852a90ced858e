//! Category and domain balance as an optimization (ALGORITHMS.md §4.7): keep the
//! *largest* subset of pairs in which no category exceeds its share of the kept
//! pairs, no domain exceeds its share, and `technical_obstruction` stays under its
//! own cap; among the largest subsets, the one with the highest total score.
//!
//! # The method
//! For a kept total `K`, every group's cap is a count: `floor(share · K)`. Choosing
//! how many pairs to keep from each (category, domain) cell under row caps
//! (categories) and column caps (domains) is a transportation problem, i.e. a flow:
//! `source → category (cap R_c) → domain (cell count) → sink (cap C_d)`. Flows are
//! integral, so `K` is feasible exactly when the maximum flow `F(K)` reaches `K`.
//!
//! `F` never decreases as `K` grows (caps only loosen), so when `F(K) < K` no `K'`
//! in `(F(K), K]` is feasible either (`F(K') ≤ F(K) < K'`): the search starts at
//! `K = N` and jumps to `K = F(K)` until `F(K) ≥ K`. That `K*` is the largest
//! feasible total. (Feasibility is not monotone: 6/6/6 pairs in three categories
//! under a 35% cap keep 18, but 17 and 16 are infeasible.)
//!
//! The kept pairs are then a maximum-score flow of value `K*`: each cell's pairs
//! are sorted best first (ties: id), so taking `x` pairs from a cell gains the sum of
//! its `x` best scores, a concave gain, and successive shortest paths (Bellman-Ford
//! on the residual graph, one unit per path) yield the best total. The graph has one
//! node per category and per domain, so a path costs O(categories · domains).
//!
//! Every dropped pair has a binding cap: if neither its category nor its domain were
//! full, adding it back would be feasible at `K* + 1` (caps never shrink with `K`),
//! contradicting the maximality of `K*`. [`Balanced::drops`] names it.
//!
//! The result depends only on the set of pairs, not on their order.

use super::pair::MinedPair;
use std::collections::BTreeMap;

/// The obstruction category.
pub const OBSTRUCTION: &str = "technical_obstruction";

/// The share caps to enforce (1.0 turns a cap off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shares {
    pub category: f64,
    pub domain: f64,
    pub obstruction: f64,
}

/// The share cap in force for `groups` distinct groups: `share`, or an even split
/// `1/groups` when fewer than ⌈1/share⌉ groups are present.
pub fn effective_share(share: f64, groups: usize) -> (f64, bool) {
    let needed = (1.0 / share - 1e-9).ceil() as usize;
    if groups > 0 && groups < needed {
        (1.0 / groups as f64, true)
    } else {
        (share, false)
    }
}

/// A share cap as a count for `total` kept pairs.
pub fn cap_count(share: f64, total: usize) -> usize {
    ((share * total as f64) + 1e-9).floor() as usize
}

/// Which cap binds a dropped pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapKind {
    /// `technical_obstruction`'s own cap.
    Obstruction,
    Category,
    Domain,
}

impl CapKind {
    /// The rejection reason counted in the report.
    pub fn reason(self) -> &'static str {
        match self {
            CapKind::Obstruction => "technical_obstruction_cap",
            CapKind::Category => "category_balance",
            CapKind::Domain => "domain_balance",
        }
    }
}

/// One full group that a dropped pair belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingCap {
    pub kind: CapKind,
    /// The category or domain.
    pub group: String,
    /// Pairs of the group kept (equal to `allowed`: the group is full).
    pub kept: usize,
    /// Pairs of the group before balance.
    pub before: usize,
    /// The cap as a count: `floor(share · kept_total)`.
    pub allowed: usize,
    /// The share in force.
    pub share: f64,
}

/// A dropped pair and the caps that bind it (at least one; the first is counted).
#[derive(Debug, Clone, PartialEq)]
pub struct BalanceDrop {
    /// Index into the input.
    pub index: usize,
    pub caps: Vec<BindingCap>,
}

/// What balance decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Balanced {
    /// Per input pair: kept or not.
    pub keep: Vec<bool>,
    /// Number kept (`K*`).
    pub kept: usize,
    pub category_share: f64,
    pub category_relaxed: bool,
    pub domain_share: f64,
    pub domain_relaxed: bool,
    pub obstruction_share: f64,
    pub drops: Vec<BalanceDrop>,
}

/// A balance problem: the pairs grouped into (category, domain) cells, and the
/// shares in force.
struct Problem {
    categories: Vec<String>,
    domains: Vec<String>,
    /// Input indices per cell `(c, d)`, best score first.
    cells: BTreeMap<(usize, usize), Vec<usize>>,
    /// Scores per cell as integers (best first), for exact path costs.
    weights: BTreeMap<(usize, usize), Vec<i64>>,
    cat_count: Vec<usize>,
    dom_count: Vec<usize>,
    category_share: f64,
    domain_share: f64,
    obstruction_share: f64,
    obstruction: Option<usize>,
}

/// Scores are compared at 1e-9: finer differences are ties, broken by id.
const SCALE: f64 = 1e9;

impl Problem {
    fn new(pairs: &[MinedPair], shares: Shares) -> Problem {
        let mut cats: Vec<String> = pairs
            .iter()
            .map(|p| p.failure_mode.category.clone())
            .collect();
        cats.sort();
        cats.dedup();
        let mut doms: Vec<String> = pairs.iter().map(|p| p.domain.clone()).collect();
        doms.sort();
        doms.dedup();
        let ci = |c: &str| cats.binary_search_by(|x| x.as_str().cmp(c)).unwrap_or(0);
        let di = |d: &str| doms.binary_search_by(|x| x.as_str().cmp(d)).unwrap_or(0);
        let mut cells: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        let mut cat_count = vec![0; cats.len()];
        let mut dom_count = vec![0; doms.len()];
        for (k, p) in pairs.iter().enumerate() {
            let (c, d) = (ci(&p.failure_mode.category), di(&p.domain));
            cells.entry((c, d)).or_default().push(k);
            cat_count[c] += 1;
            dom_count[d] += 1;
        }
        let score = |k: usize| -> i64 {
            let s = pairs[k].scores.total;
            if s.is_finite() {
                (s * SCALE).round() as i64
            } else {
                0
            }
        };
        let mut weights = BTreeMap::new();
        for (key, v) in cells.iter_mut() {
            v.sort_by(|&a, &b| {
                score(b)
                    .cmp(&score(a))
                    .then_with(|| pairs[a].id.cmp(&pairs[b].id))
            });
            weights.insert(*key, v.iter().map(|&k| score(k)).collect());
        }
        let (category_share, _) = effective_share(shares.category, cats.len());
        let (domain_share, _) = effective_share(shares.domain, doms.len());
        let obstruction = cats.iter().position(|c| c == OBSTRUCTION);
        Problem {
            categories: cats,
            domains: doms,
            cells,
            weights,
            cat_count,
            dom_count,
            category_share,
            domain_share,
            obstruction_share: shares.obstruction,
            obstruction,
        }
    }

    /// Category caps as counts for `k` kept pairs (obstruction: the tighter cap).
    fn cat_caps(&self, k: usize) -> Vec<usize> {
        (0..self.categories.len())
            .map(|c| {
                let mut cap = cap_count(self.category_share, k);
                if Some(c) == self.obstruction {
                    cap = cap.min(cap_count(self.obstruction_share, k));
                }
                cap.min(self.cat_count[c])
            })
            .collect()
    }

    fn dom_caps(&self, k: usize) -> Vec<usize> {
        (0..self.domains.len())
            .map(|d| cap_count(self.domain_share, k).min(self.dom_count[d]))
            .collect()
    }

    /// The largest total the caps of `k` allow (the maximum flow), or, when a side's
    /// caps add up to less than `k`, that sum (an upper bound of the flow, which is
    /// all the search needs: it jumps there next).
    fn max_flow(&self, k: usize) -> usize {
        let (rc, cd) = (self.cat_caps(k), self.dom_caps(k));
        // Quick bounds first: both marginals must reach k for k to be feasible.
        let (sr, sc): (usize, usize) = (rc.iter().sum(), cd.iter().sum());
        if sr.min(sc) < k {
            return sr.min(sc);
        }
        let mut net = Network::new(self, rc, cd, false);
        let mut total = 0;
        while let Some(pushed) = net.augment() {
            total += pushed;
        }
        total
    }

    /// The largest feasible kept total.
    fn largest_total(&self) -> usize {
        let mut k: usize = self.cat_count.iter().sum();
        loop {
            let f = self.max_flow(k);
            if f >= k {
                return k;
            }
            k = f;
        }
    }
}

/// The residual network of one kept total: flow on cells, categories and domains.
struct Network<'a> {
    p: &'a Problem,
    cat_cap: Vec<usize>,
    dom_cap: Vec<usize>,
    cat_flow: Vec<usize>,
    dom_flow: Vec<usize>,
    /// Cells as a list, with their flow.
    cells: Vec<((usize, usize), usize)>,
    /// Cells leaving each category / entering each domain (indices into `cells`).
    by_cat: Vec<Vec<usize>>,
    by_dom: Vec<Vec<usize>>,
    /// Whether path costs count (the max-score flow) or every path is as good.
    costs: bool,
}

/// A node of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Source,
    Cat(usize),
    Dom(usize),
    Sink,
}

impl<'a> Network<'a> {
    fn new(p: &'a Problem, cat_cap: Vec<usize>, dom_cap: Vec<usize>, costs: bool) -> Self {
        let cells: Vec<((usize, usize), usize)> = p.cells.keys().map(|&k| (k, 0)).collect();
        let mut by_cat = vec![Vec::new(); p.categories.len()];
        let mut by_dom = vec![Vec::new(); p.domains.len()];
        for (i, ((c, d), _)) in cells.iter().enumerate() {
            by_cat[*c].push(i);
            by_dom[*d].push(i);
        }
        Network {
            p,
            cat_flow: vec![0; cat_cap.len()],
            dom_flow: vec![0; dom_cap.len()],
            cat_cap,
            dom_cap,
            cells,
            by_cat,
            by_dom,
            costs,
        }
    }

    fn len(&self, cell: usize) -> usize {
        self.p.cells[&self.cells[cell].0].len()
    }

    /// Cost of pushing one more unit through a cell forward (minus the next score).
    fn forward_cost(&self, cell: usize) -> i64 {
        if !self.costs {
            return 0;
        }
        let (key, x) = self.cells[cell];
        -self.p.weights[&key][x]
    }

    /// Cost of pulling one unit back through a cell (plus the last taken score).
    fn backward_cost(&self, cell: usize) -> i64 {
        if !self.costs {
            return 0;
        }
        let (key, x) = self.cells[cell];
        self.p.weights[&key][x - 1]
    }

    /// Residual arcs leaving `u`: (head, cost, cell used, forward?).
    fn arcs(&self, u: Node) -> Vec<(Node, i64, Option<usize>, bool)> {
        let mut out = Vec::new();
        match u {
            Node::Source => {
                for c in 0..self.cat_cap.len() {
                    if self.cat_flow[c] < self.cat_cap[c] {
                        out.push((Node::Cat(c), 0, None, true));
                    }
                }
            }
            Node::Cat(c) => {
                for &cell in &self.by_cat[c] {
                    let ((_, d), x) = self.cells[cell];
                    if x < self.len(cell) {
                        out.push((Node::Dom(d), self.forward_cost(cell), Some(cell), true));
                    }
                }
            }
            Node::Dom(d) => {
                if self.dom_flow[d] < self.dom_cap[d] {
                    out.push((Node::Sink, 0, None, true));
                }
                for &cell in &self.by_dom[d] {
                    let ((c, _), x) = self.cells[cell];
                    if x > 0 {
                        out.push((Node::Cat(c), self.backward_cost(cell), Some(cell), false));
                    }
                }
            }
            // A shortest path never passes through the source or the sink again.
            Node::Sink => {}
        }
        out
    }

    fn slot(&self, n: Node) -> usize {
        let nc = self.cat_cap.len();
        match n {
            Node::Source => 0,
            Node::Cat(c) => 1 + c,
            Node::Dom(d) => 1 + nc + d,
            Node::Sink => 1 + nc + self.dom_cap.len(),
        }
    }

    /// Finds a cheapest source-to-sink path in the residual graph (Bellman-Ford with
    /// a queue: residual costs can be negative, but successive shortest paths never
    /// leave a negative cycle) and pushes flow along it: one unit when costs count
    /// (the next pair of a cell may score less), the path's bottleneck otherwise.
    /// Returns the amount pushed, or None when the flow is maximal.
    fn augment(&mut self) -> Option<usize> {
        let nodes = 2 + self.cat_cap.len() + self.dom_cap.len();
        const INF: i64 = i64::MAX / 4;
        let mut dist = vec![INF; nodes];
        let mut prev: Vec<Option<(Node, Option<usize>, bool)>> = vec![None; nodes];
        let mut queued = vec![false; nodes];
        dist[0] = 0;
        queued[0] = true;
        let mut queue = std::collections::VecDeque::from([Node::Source]);
        while let Some(u) = queue.pop_front() {
            let su = self.slot(u);
            queued[su] = false;
            for (v, cost, cell, forward) in self.arcs(u) {
                let sv = self.slot(v);
                if dist[su] + cost < dist[sv] {
                    dist[sv] = dist[su] + cost;
                    prev[sv] = Some((u, cell, forward));
                    if !queued[sv] {
                        queued[sv] = true;
                        queue.push_back(v);
                    }
                }
            }
        }
        if dist[self.slot(Node::Sink)] >= INF {
            return None;
        }
        // The path, sink to source.
        let mut path = Vec::new();
        let mut v = Node::Sink;
        while v != Node::Source {
            let (u, cell, forward) = prev[self.slot(v)]?;
            path.push((u, v, cell, forward));
            v = u;
            if path.len() > nodes {
                return None;
            }
        }
        let room = |&(u, v, cell, forward): &(Node, Node, Option<usize>, bool)| match (u, v, cell) {
            (Node::Source, Node::Cat(c), _) => self.cat_cap[c] - self.cat_flow[c],
            (Node::Dom(d), Node::Sink, _) => self.dom_cap[d] - self.dom_flow[d],
            (_, _, Some(cell)) if forward => self.len(cell) - self.cells[cell].1,
            (_, _, Some(cell)) => self.cells[cell].1,
            _ => 0,
        };
        let amount = if self.costs {
            1
        } else {
            path.iter().map(room).min().unwrap_or(0)
        };
        if amount == 0 {
            return None;
        }
        for (u, v, cell, forward) in path {
            match (u, v, cell) {
                (Node::Source, Node::Cat(c), _) => self.cat_flow[c] += amount,
                (Node::Dom(d), Node::Sink, _) => self.dom_flow[d] += amount,
                (_, _, Some(cell)) if forward => self.cells[cell].1 += amount,
                (_, _, Some(cell)) => self.cells[cell].1 -= amount,
                _ => {}
            }
        }
        Some(amount)
    }
}

/// Balances `pairs` under `shares`: the largest subset meeting every cap, with the
/// highest total score among those.
pub fn balance(pairs: &[MinedPair], shares: Shares) -> Balanced {
    let p = Problem::new(pairs, shares);
    let (_, category_relaxed) = effective_share(shares.category, p.categories.len());
    let (_, domain_relaxed) = effective_share(shares.domain, p.domains.len());
    let k = p.largest_total();
    let (rc, cd) = (p.cat_caps(k), p.dom_caps(k));
    let mut net = Network::new(&p, rc.clone(), cd.clone(), true);
    for _ in 0..k {
        if net.augment().is_none() {
            break; // unreachable: k is feasible
        }
    }
    let mut keep = vec![false; pairs.len()];
    for (key, x) in &net.cells {
        for &i in p.cells[key].iter().take(*x) {
            keep[i] = true;
        }
    }
    let kept = keep.iter().filter(|k| **k).count();
    let mut drops = Vec::new();
    for (key, x) in &net.cells {
        let (c, d) = *key;
        for &i in p.cells[key].iter().skip(*x) {
            let mut caps = Vec::new();
            if net.cat_flow[c] >= rc[c] {
                let obstruction_binds =
                    Some(c) == p.obstruction && p.obstruction_share < p.category_share;
                caps.push(BindingCap {
                    kind: if obstruction_binds {
                        CapKind::Obstruction
                    } else {
                        CapKind::Category
                    },
                    group: p.categories[c].clone(),
                    kept: net.cat_flow[c],
                    before: p.cat_count[c],
                    allowed: rc[c],
                    share: if obstruction_binds {
                        p.obstruction_share
                    } else {
                        p.category_share
                    },
                });
            }
            if net.dom_flow[d] >= cd[d] {
                caps.push(BindingCap {
                    kind: CapKind::Domain,
                    group: p.domains[d].clone(),
                    kept: net.dom_flow[d],
                    before: p.dom_count[d],
                    allowed: cd[d],
                    share: p.domain_share,
                });
            }
            drops.push(BalanceDrop { index: i, caps });
        }
    }
    drops.sort_by_key(|d| d.index);
    Balanced {
        keep,
        kept,
        category_share: p.category_share,
        category_relaxed,
        domain_share: p.domain_share,
        domain_relaxed,
        obstruction_share: p.obstruction_share,
        drops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxation_applies_below_the_needed_group_count() {
        assert_eq!(effective_share(0.35, 3), (0.35, false));
        assert_eq!(effective_share(0.35, 2), (0.5, true));
        assert_eq!(effective_share(0.25, 3), (1.0 / 3.0, true));
        assert_eq!(effective_share(0.25, 4), (0.25, false));
    }

    #[test]
    fn cap_counts_floor_the_share() {
        assert_eq!(cap_count(0.35, 18), 6);
        assert_eq!(cap_count(0.35, 17), 5);
        assert_eq!(cap_count(0.25, 4), 1);
        assert_eq!(cap_count(0.1, 9), 0);
        assert_eq!(cap_count(1.0, 7), 7);
    }
}
