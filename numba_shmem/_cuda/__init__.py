"""The CUDA backend: driver VMM heap, device state, inline-PTX intrinsics."""
