"""The symmetric heap: a deterministic allocator over a backend's memory."""
