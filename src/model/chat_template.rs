//! Chat templates: render messages to text with a model's Jinja chat template
//! (minijinja, configured as transformers configures jinja2), ChatML built in, and
//! tokenize with a mask that marks the assistant tokens (the tokens the SFT loss is
//! taken on).
//!
//! A model folder's template is found where transformers looks: `chat_template.jinja`
//! (transformers 5), else the `chat_template` of `tokenizer_config.json` (a string, or
//! a list of named templates of which `default` is used). The special tokens of
//! `tokenizer_config.json` (`bos_token`, `eos_token`, ...) are template variables, as
//! transformers passes them.

use anyhow::{Context, Result};
use minijinja::{Environment, context};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use tokenizers::Tokenizer;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    /// A message with the given role.
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Message {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// The ChatML template (Qwen's format without tools or thinking blocks).
pub const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// transformers 5's file for a model's chat template.
pub const JINJA_FILE: &str = "chat_template.jinja";

/// The special-token fields of `tokenizer_config.json` that transformers hands to the
/// template as variables.
const SPECIAL_TOKEN_FIELDS: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
];

/// Markers standing in for `{% generation %}` / `{% endgeneration %}` while rendering
/// (private-use characters; messages holding them are refused).
const GEN_START: char = '\u{10FFFD}';
const GEN_END: char = '\u{10FFFC}';

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    /// Where the template was read from (for messages and reports).
    origin: String,
    special_tokens: BTreeMap<String, String>,
    /// The template marks assistant text with `{% generation %}` blocks.
    marks_generation: bool,
}

/// Token ids of a rendered conversation and, per token, whether the loss applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub mask: Vec<bool>,
}

/// `{% generation %}` and `{% endgeneration %}` (transformers' assistant-mask
/// extension) as block tags printing the markers: `{% if true %}{{ "M" }}{% endif %}`,
/// the left tag taking the original's left whitespace control and the right one its
/// right, so trim_blocks and lstrip_blocks act as on the original block tag.
fn replace_generation_tags(source: &str) -> (String, bool) {
    let re = regex::Regex::new(r"\{%(-?)\s*(end)?generation\s*(-?)%\}")
        .unwrap_or_else(|_| unreachable!("the pattern is valid"));
    let found = re.is_match(source);
    let out = re.replace_all(source, |c: &regex::Captures| {
        let marker = if c.get(2).is_some() {
            GEN_END
        } else {
            GEN_START
        };
        format!(
            "{{%{} if true %}}{{{{ \"{marker}\" }}}}{{% endif {}%}}",
            &c[1], &c[3]
        )
    });
    (out.into_owned(), found)
}

/// `tojson` as transformers defines it (`json.dumps` with `ensure_ascii=False`):
/// Python's separators and no HTML escaping (minijinja's own escapes `<`, `>`, `&`).
fn tojson(value: &minijinja::Value, indent: Option<usize>) -> Result<String, minijinja::Error> {
    use serde::Serialize as _;
    let v = serde_json::to_value(value).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            "cannot serialize to JSON",
        )
        .with_source(e)
    })?;
    let mut out = Vec::new();
    let r = match indent {
        Some(n) => {
            let ind = vec![b' '; n];
            let f = serde_json::ser::PrettyFormatter::with_indent(&ind);
            v.serialize(&mut serde_json::Serializer::with_formatter(&mut out, f))
        }
        None => v.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonSeparators,
        )),
    };
    r.map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            "cannot serialize to JSON",
        )
        .with_source(e)
    })?;
    String::from_utf8(out).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, "JSON is not UTF-8")
            .with_source(e)
    })
}

/// The `tojson` filter: transformers' keyword arguments `indent`, and
/// `ensure_ascii` / `sort_keys` at their defaults (keys are sorted anyway).
fn tojson_filter(
    v: minijinja::Value,
    kwargs: minijinja::value::Kwargs,
) -> Result<minijinja::Value, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let _sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    if ensure_ascii == Some(true) {
        return Err(minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            "tojson(ensure_ascii=true) is not supported",
        ));
    }
    Ok(minijinja::Value::from_safe_string(tojson(&v, indent)?))
}

/// `json.dumps`' default separators: `", "` between items, `": "` after keys.
struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// A special token of `tokenizer_config.json`: a string or an added-token object.
fn token_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

impl ChatTemplate {
    /// Compiles a template source.
    pub fn new(source: &str) -> Result<Self> {
        Self::compile(source, "the given template")
    }

    fn compile(source: &str, origin: &str) -> Result<Self> {
        let mut env = Environment::new();
        // transformers renders with jinja2's trim_blocks and lstrip_blocks.
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .context("configuring the template syntax")?,
        );
        // HF templates call Python string methods (`.startswith`, `.strip`, ...).
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |msg: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_function("strftime_now", |fmt: String| {
            chrono::Local::now().format(&fmt).to_string()
        });
        env.add_filter("tojson", tojson_filter);
        let (marked, marks_generation) = replace_generation_tags(source);
        env.add_template_owned("chat", marked)
            .context("compiling chat template")?;
        Ok(ChatTemplate {
            env,
            source: source.to_string(),
            origin: origin.to_string(),
            special_tokens: BTreeMap::new(),
            marks_generation,
        })
    }

    /// ChatML.
    pub fn chatml() -> Self {
        // The built-in template is known to compile.
        Self::compile(CHATML, "built-in ChatML")
            .unwrap_or_else(|_| unreachable!("built-in ChatML template compiles"))
    }

    /// The template's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the template came from (a file, or "built-in ChatML").
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The special tokens the template sees as variables (`eos_token`, ...).
    pub fn special_tokens(&self) -> &BTreeMap<String, String> {
        &self.special_tokens
    }

    /// Sets the special tokens the template sees as variables.
    pub fn with_special_tokens(mut self, tokens: BTreeMap<String, String>) -> Self {
        self.special_tokens = tokens;
        self
    }

    /// The `chat_template` of a `tokenizer_config.json`, or ChatML when it has none;
    /// its special tokens become template variables.
    pub fn from_tokenizer_config(path: &Path) -> Result<Self> {
        let v = crate::util::read_json_file(path)?;
        let tpl = match Self::config_template(&v, path)? {
            Some(src) => Self::compile(&src, &format!("{} (chat_template)", path.display()))
                .with_context(|| format!("{}: field `chat_template`", path.display()))?,
            None => Self::chatml(),
        };
        Ok(tpl.with_special_tokens(Self::config_special_tokens(&v)))
    }

    fn config_special_tokens(v: &serde_json::Value) -> BTreeMap<String, String> {
        SPECIAL_TOKEN_FIELDS
            .iter()
            .filter_map(|k| Some((k.to_string(), token_text(v.get(*k)?)?)))
            .collect()
    }

    /// The template text of a `tokenizer_config.json`'s `chat_template` field.
    fn config_template(v: &serde_json::Value, path: &Path) -> Result<Option<String>> {
        use serde_json::Value;
        let named = |name: &str, tpl: Option<&Value>| -> Result<String> {
            tpl.and_then(Value::as_str)
                .map(str::to_string)
                .with_context(|| {
                    format!(
                        "{}: field `chat_template`: template `{name}` is not a string",
                        path.display()
                    )
                })
        };
        Ok(match v.get("chat_template") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            // transformers' legacy layout of several templates: [{name, template}].
            Some(Value::Array(list)) => {
                let default = list
                    .iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                    .with_context(|| {
                        format!(
                            "{}: field `chat_template`: several templates and none named `default`",
                            path.display()
                        )
                    })?;
                Some(named("default", default.get("template"))?)
            }
            Some(Value::Object(map)) => Some(named("default", map.get("default"))?),
            Some(_) => anyhow::bail!(
                "{}: field `chat_template` must be a string or a list of named templates",
                path.display()
            ),
        })
    }

    /// The template of a model folder, found as transformers finds it:
    /// `chat_template.jinja`, else `tokenizer_config.json`'s `chat_template`, else
    /// ChatML (logged: transformers would refuse to render without a template).
    pub fn for_model_dir(dir: &Path) -> Result<Self> {
        let config = dir.join("tokenizer_config.json");
        let jinja = dir.join(JINJA_FILE);
        if jinja.is_file() {
            let src = std::fs::read_to_string(&jinja)
                .with_context(|| format!("reading {}", jinja.display()))?;
            let tokens = if config.is_file() {
                Self::config_special_tokens(&crate::util::read_json_file(&config)?)
            } else {
                BTreeMap::new()
            };
            return Ok(Self::compile(&src, &jinja.display().to_string())
                .with_context(|| format!("{}", jinja.display()))?
                .with_special_tokens(tokens));
        }
        if config.is_file() {
            return Self::from_tokenizer_config(&config);
        }
        tracing::warn!(
            "{}: no chat template ({JINJA_FILE} or tokenizer_config.json); using ChatML",
            dir.display()
        );
        Ok(Self::chatml())
    }

    /// Renders messages to text.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let text = self.render_marked(messages, add_generation_prompt)?;
        Ok(text.replace([GEN_START, GEN_END], ""))
    }

    fn render_marked(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        if self.marks_generation {
            anyhow::ensure!(
                !messages
                    .iter()
                    .any(|m| m.content.contains([GEN_START, GEN_END])),
                "a message holds the private-use characters U+10FFFC/U+10FFFD, which mark \
                 assistant text while rendering"
            );
        }
        let t = self.env.get_template("chat")?;
        let messages = minijinja::Value::from(minijinja::value::Serde(messages));
        let specials = minijinja::Value::from(minijinja::value::Serde(&self.special_tokens));
        t.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            ..specials
        })
        .map_err(|e| anyhow::anyhow!("rendering chat template {}: {e:#}", self.origin))
    }

    /// Renders and tokenizes a conversation into one sequence; the mask is true on the
    /// tokens of each assistant message (see [`Self::encode_turns`]). A conversation
    /// that needs several sequences under this template is an error.
    pub fn encode(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Encoded> {
        let mut all = self.encode_turns(tok, messages)?;
        anyhow::ensure!(
            all.len() <= 1,
            "under this chat template the conversation is {} training sequences, not one \
             (earlier turns render differently once later turns follow)",
            all.len()
        );
        match all.pop() {
            Some(e) => Ok(e),
            None => self.tokenize_spans(tok, &self.render(messages, false)?, &[]),
        }
    }

    /// Renders and tokenizes a conversation into training sequences, masking the tokens
    /// of assistant messages (their text and end-of-turn token).
    ///
    /// With `{% generation %}` blocks in the template, the mask is those blocks, as
    /// transformers' `return_assistant_tokens_mask` makes it. Otherwise the assistant
    /// text is found by rendering successive prefixes: message *i*'s text is what the
    /// rendering of messages `..=i` adds to the rendering of `..i` with the generation
    /// prompt — exactly what the model is asked to generate at that turn. When every
    /// such rendering extends the previous one (ChatML and most templates), the
    /// conversation is one sequence; when a template renders earlier turns
    /// differently once later ones follow (Qwen3 drops the think block of past
    /// answers), each run of consistent turns becomes its own sequence, ending with
    /// the turn as the model generated it. A conversation without assistant messages
    /// gives no sequence.
    pub fn encode_turns(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Vec<Encoded>> {
        if self.marks_generation {
            return self.encode_marked(tok, messages).map(|e| vec![e]);
        }
        // (text, assistant spans) of each sequence.
        let mut seqs: Vec<(String, Vec<(usize, usize)>)> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            if m.role != "assistant" {
                continue;
            }
            let before = self.render(&messages[..i], true)?;
            let upto = self.render(&messages[..=i], false)?;
            anyhow::ensure!(
                upto.starts_with(&before),
                "chat template: the rendering of messages 0..{i} with the generation prompt is \
                 not a prefix of their rendering with message {i}, so the assistant's text \
                 cannot be told apart"
            );
            let end = before.len() + upto[before.len()..].trim_end().len();
            match seqs.last_mut() {
                Some((text, spans)) if upto.starts_with(text.as_str()) => {
                    *text = upto;
                    spans.push((before.len(), end));
                }
                _ => seqs.push((upto, vec![(before.len(), end)])),
            }
        }
        seqs.iter()
            .map(|(text, spans)| self.tokenize_spans(tok, text, spans))
            .collect()
    }

    /// One sequence masked by the template's `{% generation %}` blocks.
    fn encode_marked(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Encoded> {
        let marked = self.render_marked(messages, false)?;
        let mut text = String::with_capacity(marked.len());
        let mut spans = Vec::new();
        let mut open = None;
        for c in marked.chars() {
            match c {
                GEN_START => open = Some(text.len()),
                GEN_END => {
                    let start = open.take().context(
                        "chat template: `{% endgeneration %}` without `{% generation %}`",
                    )?;
                    spans.push((start, text.len()));
                }
                c => text.push(c),
            }
        }
        anyhow::ensure!(
            open.is_none(),
            "chat template: `{{% generation %}}` not closed"
        );
        self.tokenize_spans(tok, &text, &spans)
    }

    /// Tokenizes `text`; a token is masked when it overlaps an assistant span (byte
    /// ranges), as transformers maps character spans to tokens.
    fn tokenize_spans(
        &self,
        tok: &Tokenizer,
        text: &str,
        spans: &[(usize, usize)],
    ) -> Result<Encoded> {
        let enc = tok
            .encode(text, false)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        let mask = enc
            .get_offsets()
            .iter()
            .map(|&(s, e)| e > s && spans.iter().any(|&(a, b)| s < b && e > a))
            .collect();
        Ok(Encoded {
            ids: enc.get_ids().to_vec(),
            mask,
        })
    }

    /// Token ids of the prompt for generation (messages + assistant header).
    pub fn encode_prompt(&self, tok: &Tokenizer, messages: &[Message]) -> Result<Vec<u32>> {
        let text = self.render(messages, true)?;
        let enc = tok
            .encode(text.as_str(), false)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        Ok(enc.get_ids().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_tags_become_markers_with_whitespace_control_kept() {
        let (s, found) = replace_generation_tags("a{%- generation %}b{% endgeneration -%}c");
        assert!(found);
        let t = ChatTemplate::new("a {%- generation %}b{% endgeneration -%} c").unwrap();
        assert!(t.marks_generation);
        assert_eq!(t.render(&[], false).unwrap(), "abc");
        assert!(s.starts_with("a{%- if true %}"), "{s}");
        // As a block tag, the closing tag eats the newline after it (trim_blocks).
        let t = ChatTemplate::new("{% generation %}x{% endgeneration %}\ny").unwrap();
        assert_eq!(t.render(&[], false).unwrap(), "xy");
        assert!(!replace_generation_tags("{{ generation }}").1);
    }

    #[test]
    fn tojson_writes_what_python_writes() {
        let t = ChatTemplate::new("{{ x | tojson }}|{{ x | tojson(indent=2) }}").unwrap();
        let env = &t.env;
        let out = env
            .get_template("chat")
            .unwrap()
            .render(context! { x => minijinja::Value::from(minijinja::value::Serde(serde_json::json!({"a": [1, "<é>"], "b": true}))) })
            .unwrap();
        assert_eq!(
            out,
            "{\"a\": [1, \"<é>\"], \"b\": true}|{\n  \"a\": [\n    1,\n    \"<é>\"\n  ],\n  \"b\": true\n}"
        );
    }

    #[test]
    fn special_tokens_and_named_templates_of_a_tokenizer_config() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tokenizer_config.json");
        std::fs::write(
            &p,
            serde_json::json!({
                "eos_token": {"content": "</s>", "special": true},
                "bos_token": "<s>",
                "chat_template": [
                    {"name": "tool_use", "template": "tools"},
                    {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}
                ]
            })
            .to_string(),
        )
        .unwrap();
        let t = ChatTemplate::for_model_dir(d.path()).unwrap();
        assert_eq!(
            t.render(&[Message::new("user", "hi")], false).unwrap(),
            "<s>hi</s>"
        );
        // chat_template.jinja wins over tokenizer_config.json, and keeps its tokens.
        std::fs::write(d.path().join(JINJA_FILE), "[{{ eos_token }}]").unwrap();
        let t = ChatTemplate::for_model_dir(d.path()).unwrap();
        assert_eq!(t.render(&[], false).unwrap(), "[</s>]");
        assert!(t.origin().ends_with(JINJA_FILE));
        std::fs::write(&p, r#"{"chat_template": [{"name": "x", "template": "y"}]}"#).unwrap();
        let e = format!(
            "{:#}",
            ChatTemplate::from_tokenizer_config(&p).err().unwrap()
        );
        assert!(e.contains("none named `default`"), "{e}");
    }
}
