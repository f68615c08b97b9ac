//! Frame body compression (the STARTUP `COMPRESSION` option). Filled in by its own change.
