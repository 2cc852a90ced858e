//! One decoded sequence: its rules, its sampler, and how its text is streamed.

use super::{Event, Finish, GenRequest, Job};
use crate::model::constrain::{Closer, Matcher, QuoteGuard, Schema};
use crate::model::sample::{SampleConfig, advance_rules, pick_under_rules, rules_allow};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// What decoding needs of the tokenizer.
pub(crate) struct Vocab {
    pub tok: tokenizers::Tokenizer,
    /// Token ids that end a sequence.
    pub stop_ids: Vec<u32>,
    /// Each token's raw bytes ([`crate::model::constrain::token_bytes`]).
    pub token_bytes: Vec<Option<Vec<u8>>>,
}

/// One sequence being decoded.
pub(crate) struct Row {
    pub job: Arc<Job>,
    pub choice: usize,
    pub ids: Vec<u32>,
    /// Bytes of the decoded text already sent.
    sent: usize,
    rng: ChaCha8Rng,
    matcher: Option<Matcher>,
    quotes: Option<QuoteGuard>,
    /// When to close a constrained answer before its budget runs out.
    closer: Closer,
    /// Tokens closing the answer, written before anything the model would choose.
    forced: VecDeque<u32>,
    counts: HashMap<u32, u32>,
    pub finished: Option<Finish>,
}

impl Row {
    /// Sequence `choice` of `job`, seeded from the request.
    pub fn new(job: Arc<Job>, choice: usize) -> Row {
        let req = &job.req;
        Row {
            rng: ChaCha8Rng::seed_from_u64(
                req.seed ^ (choice as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            matcher: req.schema.as_ref().map(Schema::matcher),
            quotes: req.schema.as_ref().and(req.quotes.clone()),
            job,
            choice,
            ids: Vec::new(),
            sent: 0,
            closer: Closer::default(),
            forced: VecDeque::new(),
            counts: HashMap::new(),
            finished: None,
        }
    }

    /// Positions the sequence fills: its prompt and what it generated.
    pub fn span(&self) -> usize {
        self.job.req.prompt.len() + self.ids.len()
    }

    /// Whether the row stays in the batch after this step.
    pub fn running(&self) -> bool {
        self.finished.is_none() && !self.job.gone()
    }
}

impl Vocab {
    /// Chooses the next token of `row` from its logits and takes it
    /// ([`Self::accept`]); `max_pos`: the model's positions.
    pub fn step(&self, row: &mut Row, logits: &[f32], max_pos: usize) -> u32 {
        let span = row.span();
        let t = self.choose(row, logits, max_pos.saturating_sub(span));
        self.accept(row, t, span + 1 >= max_pos);
        t
    }

    /// The next token of a row from its logits; `positions_left`: tokens the context
    /// still has room for, this one included. A constrained answer about to run out
    /// of tokens or positions is closed the shortest way its schema allows.
    fn choose(&self, row: &mut Row, logits: &[f32], positions_left: usize) -> u32 {
        if let Some(t) = row.forced.pop_front() {
            return t;
        }
        let req: &GenRequest = &row.job.req;
        if let Some(m) = &row.matcher {
            let room = req
                .max_new_tokens
                .saturating_sub(row.ids.len())
                .min(positions_left);
            if let Some(ids) = row.closer.due(m, room, false, &self.token_bytes) {
                row.forced = ids.into();
                // Empty: the answer is already whole, and ends here.
                return row
                    .forced
                    .pop_front()
                    .unwrap_or_else(|| self.stop_ids.first().copied().unwrap_or(0));
            }
        }
        let mut l: Vec<f32> = logits.to_vec();
        for (&t, &c) in &row.counts {
            if let Some(x) = l.get_mut(t as usize) {
                *x -= req.frequency_penalty * c as f32 + req.presence_penalty;
            }
        }
        let cfg = SampleConfig {
            temperature: req.temperature.max(0.0),
            top_p: req.top_p,
            ..SampleConfig::default()
        };
        let next_bytes = std::cell::OnceCell::new();
        let (matcher, quotes) = (row.matcher.as_ref(), row.quotes.as_ref());
        // Nothing the schema allows cannot happen for a satisfiable schema with a
        // byte-complete vocabulary; should it, the sequence ends.
        let picked = pick_under_rules(&l, &cfg, &mut row.rng, |t, both| {
            matcher.is_none_or(|m| {
                rules_allow(
                    m,
                    quotes,
                    t,
                    &self.token_bytes,
                    &self.stop_ids,
                    both,
                    &next_bytes,
                )
            })
        });
        picked.unwrap_or_else(|| self.stop_ids.first().copied().unwrap_or(0))
    }

    /// Appends a chosen token, streams the new text, and ends the row if due.
    /// Text ending in an incomplete UTF-8 character is held back until the
    /// character completes or the row ends.
    fn accept(&self, row: &mut Row, t: u32, context_full: bool) {
        let stopped = self.stop_ids.contains(&t);
        if !stopped {
            row.ids.push(t);
            *row.counts.entry(t).or_insert(0) += 1;
            if let (Some(Some(b)), Some(m)) = (self.token_bytes.get(t as usize), &mut row.matcher) {
                advance_rules(m, row.quotes.as_mut(), b);
            }
        }
        let job = Arc::clone(&row.job);
        let req = &job.req;
        let text = self.tok.decode(&row.ids, true).unwrap_or_default();
        let stop_at = req
            .stop
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min();
        let finish =
            if stopped || stop_at.is_some() || row.matcher.as_ref().is_some_and(Matcher::is_done) {
                Some(Finish::Stop)
            } else if row.ids.len() >= req.max_new_tokens || context_full {
                Some(Finish::Length)
            } else {
                None
            };
        // A tail that may be the start of a stop string waits for the next token.
        let held = if finish.is_some() {
            0
        } else {
            req.stop
                .iter()
                .flat_map(|s| s.char_indices().skip(1).map(|(k, _)| &s[..k]))
                .filter(|p| text.ends_with(p))
                .map(str::len)
                .max()
                .unwrap_or(0)
        };
        let upto = stop_at.unwrap_or(text.len() - held);
        if upto > row.sent
            && (finish.is_some() || !text.ends_with('\u{FFFD}'))
            && let Some(delta) = text.get(row.sent..upto)
        {
            job.send(Event::Delta {
                choice: row.choice,
                text: delta.to_string(),
            });
            row.sent = upto;
        }
        if let Some(finish) = finish {
            row.finished = Some(finish);
            job.send(Event::Finished {
                choice: row.choice,
                finish,
                tokens: row.ids.len(),
            });
        }
    }
}
