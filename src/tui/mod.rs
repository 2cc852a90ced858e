//! The ratatui workbench.
