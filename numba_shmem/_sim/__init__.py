"""The CPU simulator backend: heaps in POSIX shared memory, device functions in Python."""
