"""The stream tier: host calls that enqueue their work on a CUDA stream."""
