"""A stand-in for the part of torch that numba-shmem's torchrun bootstrap uses
(torch.distributed's store), for the tests of machines without torch: CI's
has none (PyTorch's wheels for it are over 500 MB). Where torch is installed,
tests/test_torchrun.py also runs the job under the real torchrun."""
