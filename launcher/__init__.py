"""shmem-run: start the PEs of a numba-shmem job on this node (``_cli.main``);
the job's rendezvous server and the framing of its messages, which the
library imports for its side. Nothing is imported here, so that a PE
importing the framing loads none of the command."""
