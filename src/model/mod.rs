//! Candle Qwen3-architecture decoder with LoRA, tokenizer, chat template, checkpoints.
