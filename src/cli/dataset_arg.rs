//! The dataset argument, one convention for every subcommand: `--dataset DIR`.
//!
//! `validate`, `stats`, `show`, `curate`, `export`, `annotate` and `mine explain` first
//! took the folder as a positional argument; that spelling is still accepted (and said
//! so in `--help`), but not together with `--dataset`.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// `--dataset DIR`, or the older positional `DATASET`.
#[derive(clap::Args, Debug, Clone)]
pub struct DatasetArg {
    /// Dataset folder.
    #[arg(
        long = "dataset",
        value_name = "DIR",
        required_unless_present = "dataset_positional"
    )]
    dataset: Option<PathBuf>,
    /// The dataset folder, positional: the older spelling of --dataset, still accepted.
    #[arg(value_name = "DATASET", conflicts_with = "dataset")]
    dataset_positional: Option<PathBuf>,
}

impl DatasetArg {
    /// The folder, whichever spelling named it.
    pub fn path(&self) -> &Path {
        // clap requires one of the two.
        self.dataset
            .as_deref()
            .or(self.dataset_positional.as_deref())
            .unwrap_or(Path::new("."))
    }
}

impl AsRef<Path> for DatasetArg {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Deref for DatasetArg {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.path()
    }
}

/// `show`'s positional arguments, `[DATASET] TRAJECTORY`, resolved against `--dataset`.
pub fn dataset_and_item(
    flag: Option<PathBuf>,
    positional: Vec<String>,
    item: &str,
) -> anyhow::Result<(PathBuf, String)> {
    let mut positional = positional.into_iter();
    match (
        flag,
        positional.next(),
        positional.next(),
        positional.next(),
    ) {
        (Some(d), Some(x), None, None) => Ok((d, x)),
        (None, Some(d), Some(x), None) => Ok((PathBuf::from(d), x)),
        (Some(_), Some(_), Some(_), _) => anyhow::bail!(
            "the dataset is named twice: give --dataset DIR or a positional DATASET, not both"
        ),
        (None, Some(_), None, None) | (_, None, _, _) => {
            anyhow::bail!("missing arguments: pass --dataset DIR and the {item}")
        }
        _ => anyhow::bail!("too many arguments: expected --dataset DIR and the {item}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        dataset: DatasetArg,
        #[arg(long)]
        json: bool,
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
    }

    #[test]
    fn both_spellings_name_the_same_folder() {
        assert_eq!(
            parse(&["--dataset", "d"]).unwrap().dataset.path(),
            Path::new("d")
        );
        assert_eq!(
            parse(&["d", "--json"]).unwrap().dataset.path(),
            Path::new("d")
        );
    }

    #[test]
    fn neither_or_both_is_an_error_naming_the_flag() {
        let e = parse(&[]).err().unwrap().to_string();
        assert!(e.contains("--dataset <DIR>"), "{e}");
        let e = parse(&["d", "--dataset", "e"]).err().unwrap().to_string();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    #[test]
    fn show_style_positionals_resolve_against_the_flag() {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (d, t) = dataset_and_item(Some("d".into()), v(&["t"]), "id").unwrap();
        assert_eq!((d, t.as_str()), (PathBuf::from("d"), "t"));
        let (d, t) = dataset_and_item(None, v(&["d", "t"]), "id").unwrap();
        assert_eq!((d, t.as_str()), (PathBuf::from("d"), "t"));
        for (flag, pos) in [
            (None, v(&["t"])),
            (Some(PathBuf::from("d")), v(&["d", "t"])),
            (None, v(&["a", "b", "c"])),
            (Some(PathBuf::from("d")), v(&[])),
        ] {
            assert!(dataset_and_item(flag, pos, "id").is_err());
        }
    }
}
