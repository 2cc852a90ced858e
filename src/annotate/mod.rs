//! Append-only annotation log and its fold into the corrected corpus.
