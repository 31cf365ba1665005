//! `compact ID --edit` on a real pseudo-terminal.
