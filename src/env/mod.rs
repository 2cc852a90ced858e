//! Live environment: Chromium over CDP, the MiniWoB++ suite, observation and actions.
