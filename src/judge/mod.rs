//! A WebJudge-style LLM judge of task success for trajectories without a
//! programmatic reward (Online-Mind2Web's protocol): the task's key points, the
//! key states of the trajectory selected by scoring each step's evidence against
//! them, and a verdict with its reasoning. Verdicts are stored beside the
//! trajectories (`judge/verdicts.jsonl`) with the judge model, the prompt version and
//! the evidence it saw, and reused while the trajectory, model and prompt are the
//! same. `agreement` compares verdicts with hand labels.

pub mod agreement;
pub mod prompts;
pub mod verdicts;
pub mod webjudge;
