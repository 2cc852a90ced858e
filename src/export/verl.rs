//! `rmsweb export verl`: the RL prompts of a dataset as verl's RLHF parquet
//! (`train.parquet`, `val.parquet`), with `salvage_ds.yaml`, `run.sh`, `README.md`
//! and `export.json` beside them ([`super::verl_files`]).
//!
//! The prompts are exactly those rmsweb's own RL trains on ([`crate::train::rl::prompts`]:
//! one renderer, the same text), one row per prompt, in verl's columns:
//!
//! | column | type | value |
//! |---|---|---|
//! | `data_source` | string | `rmsweb/<domain>` (what the reward function is routed by) |
//! | `prompt` | list of `{role, content}` | the system and user messages |
//! | `images` | list of `{bytes, path}` | the state's screenshot as PNG bytes (only with `--images`) |
//! | `ability` | string | `web_agent` |
//! | `reward_model` | `{style, ground_truth}` | `rule`, the target action(s) as JSON |
//! | `extra_info` | struct | `pair_id`, `task_id`, `trajectory`, `step`, `failure_mode`, `elements` (JSON), `prompt_format`, `index`, `split` |
//!
//! `elements` carries the state's element list so that the reward, scoring in verl,
//! still finds an index that does not exist in the state invalid (0.0).
//!
//! The validation split holds out whole tasks: tasks are ordered by a hash of their
//! id and the first `⌈val_share · tasks⌉` go to `val.parquet` (at least one task and
//! at least one left for training when there are two or more), so no validation
//! prompt shares a task with a training prompt and the split does not move when
//! other tasks are added.

pub use super::verl_report::VerlReport;
use crate::curate::export::IMAGE_TOKEN;
use crate::mine::MinedPair;
use crate::policy::prompt::PROMPT_FORMAT_VERSION;
use crate::train::rl::config::PromptSource;
use crate::train::rl::prompts::{self, RlPrompt};
use crate::trajectory::jsonl::JsonlFile;
use crate::trajectory::{Dataset, Trajectory};
use anyhow::{Context, Result};
use arrow_array::{
    ArrayRef, BinaryArray, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// `ability` of every row.
pub const ABILITY: &str = "web_agent";
/// Prefix of `data_source`.
pub const DATA_SOURCE_PREFIX: &str = "rmsweb/";

/// What to export.
#[derive(Debug, Clone)]
pub struct VerlOptions {
    pub prompts: PromptSource,
    /// Share of tasks held out for validation, in [0, 1).
    pub val_share: f64,
    /// Attach each state's screenshot (PNG bytes) for vision-language models.
    pub images: bool,
}

impl Default for VerlOptions {
    fn default() -> Self {
        VerlOptions {
            prompts: PromptSource::Mined,
            val_share: 0.1,
            images: false,
        }
    }
}

/// `extra_info` of a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtraInfo {
    /// The mined pair id, or the SFT sample id for `full-corpus` prompts.
    pub pair_id: String,
    pub task_id: String,
    pub trajectory: String,
    pub step: i64,
    /// The pair's failure-mode category (`mined` prompts only).
    pub failure_mode: Option<String>,
    /// The state's elements, as JSON.
    pub elements: String,
    pub prompt_format: String,
    /// Row number in its split.
    pub index: i64,
    /// `train` or `val`.
    pub split: String,
}

/// One exported prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct VerlRow {
    pub data_source: String,
    /// `(role, content)` pairs.
    pub messages: Vec<(String, String)>,
    /// `(PNG bytes, path)` of the state's screenshot (with `--images`).
    pub images: Vec<(Vec<u8>, String)>,
    /// The target action (one object) or actions (a list), as JSON.
    pub ground_truth: String,
    pub extra: ExtraInfo,
}

/// Where a prompt's state lives.
struct Origin {
    task_id: String,
    domain: String,
    trajectory: String,
    step: u32,
    failure_mode: Option<String>,
    prompt_format: String,
}

/// Keeps `[A-Za-z0-9._-]`, so `data_source` is a safe routing key.
fn domain_key(d: &str) -> String {
    let k: String = d
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if k.is_empty() { "web".into() } else { k }
}

fn origins(ds: &Dataset, source: PromptSource) -> Result<HashMap<String, Origin>> {
    let tasks: HashMap<String, crate::trajectory::Task> = ds
        .tasks()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .into_iter()
        .map(|t| (t.task_id.clone(), t))
        .collect();
    let task_domain = |id: &str| {
        tasks
            .get(id)
            .map(|t| {
                if t.domain.is_empty() {
                    t.website.clone()
                } else {
                    t.domain.clone()
                }
            })
            .unwrap_or_default()
    };
    let samples: HashMap<String, crate::curate::flatten::Sample> =
        crate::curate::current_samples(ds)?
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
    let mut out = HashMap::new();
    match source {
        PromptSource::Mined => {
            let path = ds.root().join("mined").join("pairs.jsonl");
            let pairs: Vec<MinedPair> = JsonlFile::open(&path)?
                .all()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for p in pairs {
                let sample = format!("{}#{}", p.success.trajectory, p.success.step);
                let domain = if p.domain.is_empty() {
                    task_domain(&p.task_id)
                } else {
                    p.domain.clone()
                };
                out.insert(
                    p.id.clone(),
                    Origin {
                        domain,
                        trajectory: p.success.trajectory.clone(),
                        step: p.success.step,
                        failure_mode: Some(p.failure_mode.category.clone()),
                        prompt_format: samples
                            .get(&sample)
                            .map_or(PROMPT_FORMAT_VERSION.to_string(), |s| {
                                s.prompt_format.clone()
                            }),
                        task_id: p.task_id,
                    },
                );
            }
        }
        PromptSource::FullCorpus => {
            for (id, s) in samples {
                out.insert(
                    id,
                    Origin {
                        domain: task_domain(&s.task_id),
                        task_id: s.task_id,
                        trajectory: s.trajectory,
                        step: s.step,
                        failure_mode: None,
                        prompt_format: s.prompt_format,
                    },
                );
            }
        }
    }
    Ok(out)
}

/// FNV-1a, 64 bits: a hash that is the same on every machine and release.
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The tasks held out for validation (see the module docs).
pub fn val_tasks(tasks: &BTreeSet<String>, val_share: f64) -> BTreeSet<String> {
    let n = tasks.len();
    if n < 2 || val_share <= 0.0 {
        return BTreeSet::new();
    }
    let k = ((val_share * n as f64).ceil() as usize).clamp(1, n - 1);
    let mut order: Vec<&String> = tasks.iter().collect();
    order.sort_by_key(|t| (stable_hash(t), t.as_str()));
    order.into_iter().take(k).cloned().collect()
}

/// The PNG of a step's state and its path; `None` when the step names none, the
/// file is missing or it is no PNG (counted as missing). A file that is there but
/// cannot be read as an image file (a FIFO, a device, over the size limit) fails
/// the export naming the trajectory, the step and the path.
fn screenshot(
    ds: &Dataset,
    t: Option<&Trajectory>,
    step: u32,
) -> Result<Option<(Vec<u8>, String)>> {
    let Some((id, rel)) = t.and_then(|t| {
        let s = t.steps.iter().find(|s| s.index == step)?;
        Some((&t.id, s.state.screenshot.clone()?))
    }) else {
        return Ok(None);
    };
    let Ok(path) = ds.resolve(&rel) else {
        return Ok(None);
    };
    let bytes = match crate::util::image::read_file(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!(
            "trajectory {} step {step}: state.screenshot `{}`: {e}",
            crate::util::sanitize::excerpt(id),
            crate::util::sanitize::excerpt(&rel)
        ),
    };
    Ok(bytes.starts_with(b"\x89PNG").then_some((bytes, rel)))
}

/// The rows of an export, in prompt order, with the prompts that were left out.
pub fn build_rows(ds: &Dataset, opts: &VerlOptions) -> Result<(Vec<VerlRow>, VerlReport)> {
    anyhow::ensure!(
        opts.val_share.is_finite() && (0.0..1.0).contains(&opts.val_share),
        "--val-share {}: use a share in [0, 1)",
        opts.val_share
    );
    let (prompts, skipped) = prompts::load(ds, opts.prompts)?;
    let origins = origins(ds, opts.prompts)?;
    let mut report = VerlReport {
        prompts: match opts.prompts {
            PromptSource::Mined => "mined".into(),
            PromptSource::FullCorpus => "full-corpus".into(),
        },
        skipped: skipped.0,
        ..Default::default()
    };
    let mut trajectories: HashMap<String, Option<Trajectory>> = HashMap::new();
    let mut rows = Vec::with_capacity(prompts.len());
    for p in prompts {
        let Some(o) = origins.get(&p.id) else {
            report
                .skipped
                .push((p.id.clone(), "no mined pair or sample with this id".into()));
            continue;
        };
        let images = if opts.images {
            if !trajectories.contains_key(&o.trajectory) {
                let t = ds
                    .trajectory_by_id(&o.trajectory)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                trajectories.insert(o.trajectory.clone(), t);
            }
            let t = trajectories.get(&o.trajectory).and_then(Option::as_ref);
            match screenshot(ds, t, o.step)? {
                Some(img) => vec![img],
                None => {
                    report.missing_images += 1;
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        rows.push(row(p, o, images, opts.images)?);
    }
    Ok((rows, report))
}

fn row(p: RlPrompt, o: &Origin, images: Vec<(Vec<u8>, String)>, vision: bool) -> Result<VerlRow> {
    let mut messages: Vec<(String, String)> = p
        .messages
        .into_iter()
        .map(|m| {
            let content = if vision {
                m.content.replace(IMAGE_TOKEN, "<image >")
            } else {
                m.content
            };
            (m.role, content)
        })
        .collect();
    if !images.is_empty()
        && let Some(user) = messages.iter_mut().rev().find(|(r, _)| r == "user")
    {
        user.1 = format!("{}{}", IMAGE_TOKEN.repeat(images.len()), user.1);
    }
    let ground_truth = if p.targets.len() == 1 {
        serde_json::to_string(&p.targets[0])?
    } else {
        serde_json::to_string(&p.targets)?
    };
    Ok(VerlRow {
        data_source: format!("{DATA_SOURCE_PREFIX}{}", domain_key(&o.domain)),
        messages,
        images,
        ground_truth,
        extra: ExtraInfo {
            pair_id: p.id,
            task_id: o.task_id.clone(),
            trajectory: o.trajectory.clone(),
            step: i64::from(o.step),
            failure_mode: o.failure_mode.clone(),
            elements: serde_json::to_string(&p.elements)?,
            prompt_format: o.prompt_format.clone(),
            index: 0,
            split: String::new(),
        },
    })
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn strings<'a>(v: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn list_of(fields: &Fields, values: StructArray, lengths: impl Iterator<Item = usize>) -> ArrayRef {
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(
            DataType::Struct(fields.clone()),
            false,
        )),
        OffsetBuffer::from_lengths(lengths),
        Arc::new(values),
        None,
    ))
}

/// The rows as one parquet file (snappy-compressed), columns as the module docs list.
pub fn to_parquet(rows: &[VerlRow], with_images: bool) -> Result<Vec<u8>> {
    let msg_fields = Fields::from(vec![utf8("role", false), utf8("content", false)]);
    let msgs = || rows.iter().flat_map(|r| r.messages.iter());
    let prompt = list_of(
        &msg_fields,
        StructArray::new(
            msg_fields.clone(),
            vec![
                strings(msgs().map(|m| m.0.as_str())),
                strings(msgs().map(|m| m.1.as_str())),
            ],
            None,
        ),
        rows.iter().map(|r| r.messages.len()),
    );
    let rm_fields = Fields::from(vec![utf8("style", false), utf8("ground_truth", false)]);
    let reward_model = Arc::new(StructArray::new(
        rm_fields.clone(),
        vec![
            strings(rows.iter().map(|_| "rule")),
            strings(rows.iter().map(|r| r.ground_truth.as_str())),
        ],
        None,
    ));
    let (extra_fields, extra_info) = extra_info_column(rows);
    let mut fields = vec![
        utf8("data_source", false),
        Field::new("prompt", prompt.data_type().clone(), false),
    ];
    let mut columns: Vec<ArrayRef> =
        vec![strings(rows.iter().map(|r| r.data_source.as_str())), prompt];
    if with_images {
        let images = images_column(rows);
        fields.push(Field::new("images", images.data_type().clone(), false));
        columns.push(images);
    }
    fields.extend([
        utf8("ability", false),
        Field::new("reward_model", DataType::Struct(rm_fields), false),
        Field::new("extra_info", DataType::Struct(extra_fields), false),
    ]);
    columns.extend([
        strings(rows.iter().map(|_| ABILITY)),
        reward_model as ArrayRef,
        extra_info as ArrayRef,
    ]);
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns).context("building the table")?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// The extra_info column (pair, task, trajectory, step, failure mode, elements, prompt
/// format, index, split) and its fields.
fn extra_info_column(rows: &[VerlRow]) -> (Fields, Arc<StructArray>) {
    let extra_fields = Fields::from(vec![
        utf8("pair_id", false),
        utf8("task_id", false),
        utf8("trajectory", false),
        Field::new("step", DataType::Int64, false),
        utf8("failure_mode", true),
        utf8("elements", false),
        utf8("prompt_format", false),
        Field::new("index", DataType::Int64, false),
        utf8("split", false),
    ]);
    let x = || rows.iter().map(|r| &r.extra);
    let extra_info = Arc::new(StructArray::new(
        extra_fields.clone(),
        vec![
            strings(x().map(|e| e.pair_id.as_str())),
            strings(x().map(|e| e.task_id.as_str())),
            strings(x().map(|e| e.trajectory.as_str())),
            Arc::new(Int64Array::from_iter_values(x().map(|e| e.step))),
            Arc::new(StringArray::from_iter(
                x().map(|e| e.failure_mode.as_deref()),
            )),
            strings(x().map(|e| e.elements.as_str())),
            strings(x().map(|e| e.prompt_format.as_str())),
            Arc::new(Int64Array::from_iter_values(x().map(|e| e.index))),
            strings(x().map(|e| e.split.as_str())),
        ],
        None,
    ));
    (extra_fields, extra_info)
}

/// The images column: each row's screenshots as PNG bytes with their paths.
fn images_column(rows: &[VerlRow]) -> ArrayRef {
    let img_fields = Fields::from(vec![
        Field::new("bytes", DataType::Binary, false),
        utf8("path", false),
    ]);
    let imgs = || rows.iter().flat_map(|r| r.images.iter());
    list_of(
        &img_fields,
        StructArray::new(
            img_fields.clone(),
            vec![
                Arc::new(BinaryArray::from_iter_values(
                    imgs().map(|i| i.0.as_slice()),
                )),
                strings(imgs().map(|i| i.1.as_str())),
            ],
            None,
        ),
        rows.iter().map(|r| r.images.len()),
    )
}

/// Exports the dataset's RL prompts into `out` (created; existing export files are
/// replaced atomically, anything else in it is left alone).
pub fn export_verl(ds: &Dataset, out: &Path, opts: &VerlOptions) -> Result<VerlReport> {
    let (rows, mut report) = build_rows(ds, opts)?;
    anyhow::ensure!(
        !rows.is_empty(),
        "{}: no RL prompts to export ({} skipped{})",
        ds.root().display(),
        report.skipped.len(),
        report
            .skipped
            .first()
            .map(|(id, why)| format!("; first: {id}: {why}"))
            .unwrap_or_default()
    );
    let tasks: BTreeSet<String> = rows.iter().map(|r| r.extra.task_id.clone()).collect();
    let held_out = val_tasks(&tasks, opts.val_share);
    let (mut val, mut train): (Vec<VerlRow>, Vec<VerlRow>) = rows
        .into_iter()
        .partition(|r| held_out.contains(&r.extra.task_id));
    for (split, set) in [("train", &mut train), ("val", &mut val)] {
        for (i, r) in set.iter_mut().enumerate() {
            r.extra.index = i as i64;
            r.extra.split = split.into();
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let out = out
        .canonicalize()
        .with_context(|| format!("resolving {}", out.display()))?;
    report.out = out.clone();
    report.train = train.len();
    report.val = val.len();
    report.val_tasks = held_out.len();
    report.train_tasks = tasks.len() - held_out.len();
    report.images = train.iter().chain(&val).map(|r| r.images.len()).sum();
    let write = crate::util::fs::write_atomic;
    write(
        &out.join("train.parquet"),
        &to_parquet(&train, opts.images)?,
    )?;
    write(&out.join("val.parquet"), &to_parquet(&val, opts.images)?)?;
    super::verl_files::write_all(&out, ds.root(), &report)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_tasks_are_stable_and_leave_training_data() {
        let tasks: BTreeSet<String> = (0..10).map(|i| format!("task-{i}")).collect();
        let a = val_tasks(&tasks, 0.25);
        assert_eq!(a.len(), 3);
        let mut more = tasks.clone();
        more.insert("task-new".into());
        let b = val_tasks(&more, 0.25);
        assert_eq!(b.len(), 3);
        assert!(val_tasks(&tasks, 0.0).is_empty());
        let one: BTreeSet<String> = ["only".to_string()].into();
        assert!(val_tasks(&one, 0.5).is_empty());
        let two: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        assert_eq!(
            val_tasks(&two, 0.99).len(),
            1,
            "one task stays for training"
        );
    }

    #[test]
    fn domains_become_safe_keys() {
        assert_eq!(domain_key("Shopping / Books"), "shopping___books");
        assert_eq!(domain_key(""), "web");
        assert_eq!(domain_key("miniwob"), "miniwob");
    }
}
