//! GPU device selection as a user meets it from the command line.
//!
//! Only the CPU build can run here: a `--features cuda` binary needs libcuda.so.1 to
//! start at all (candle links cudarc with `dynamic-linking`); scripts/gpu-check.sh
//! covers that build on a GPU machine.

#[cfg(not(feature = "cuda"))]
#[test]
fn sft_on_cuda_in_a_cpu_build_fails_clearly_and_marks_the_run_failed() {
    use rmsweb::train::run::{RunDir, RunState};

    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rmsweb"))
        .args(["train", "sft", "--preset", "tiny", "--device", "cuda:0"])
        .arg("--dataset")
        .arg(&fixtures)
        .arg("--run-dir")
        .arg(&run)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("device `cuda:0`"), "{stderr}");
    assert!(stderr.contains("--features cuda"), "{stderr}");

    let status = RunDir::read_status(&run).unwrap();
    assert_eq!(status.state, RunState::Failed);
    assert!(
        status.message.contains("device `cuda:0`"),
        "{}",
        status.message
    );
}
