"""Start a program as torchrun would, with torchrun's variables and the
stand-in for torch (tests/torch_stand_in), on a machine without torch:

    python torchrun_like.py N program.py [args]

Prints "exit codes [...]" once every worker has exited.
"""

import os
import subprocess
import sys
import tempfile

STAND_IN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "torch_stand_in")


def main():
    nprocs, program = int(sys.argv[1]), sys.argv[2:]
    with tempfile.TemporaryDirectory() as store:
        workers = []
        for rank in range(nprocs):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(nprocs), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT="29500", TORCHELASTIC_RUN_ID="stand-in",
                       TORCHELASTIC_RESTART_COUNT="0", TORCH_STAND_IN_STORE=store,
                       PYTHONPATH=os.pathsep.join(filter(None, [STAND_IN,
                                                                os.environ.get("PYTHONPATH")])))
            workers.append(subprocess.Popen([sys.executable, *program], env=env))
        codes = [worker.wait() for worker in workers]
    print(f"exit codes {codes}", flush=True)


if __name__ == "__main__":
    main()
