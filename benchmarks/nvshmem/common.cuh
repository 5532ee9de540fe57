// Shared by NVSHMEM's side of our benchmarks (scopes_bw.cu, coll_block.cu):
// error checks, the unique-id bootstrap through a file, timing. Measuring
// programs beside the benchmarks, not part of the library.
//
// Bootstrap: NVSHMEM's unique-id bootstrap through a file in $SCOPES_SYNC_DIR
// (PE 0 writes it, the others read it); $SCOPES_PE and $SCOPES_NPES number the
// PEs. benchmarks/nvshmem/run.sh starts the PEs under a private MPS daemon.
#pragma once
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t err = (x);                                                          \
        if (err != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                   \
                    cudaGetErrorString(err));                                           \
            exit(2);                                                                    \
        }                                                                               \
    } while (0)

// seconds per repetition, after a warm-up launch of one repetition
template <class Launch>
static double per_rep(Launch launch, int reps) {
    launch(1);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a));
    launch(reps);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return ms / 1e3 / reps;
}

static void bootstrap(int pe, int npes, const std::string &dir) {
    static nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    std::string path = dir + "/uid", part = path + ".part";
    if (pe == 0) {
        if (nvshmemx_get_uniqueid(&id) != 0) { fprintf(stderr, "no unique id\n"); exit(2); }
        FILE *f = fopen(part.c_str(), "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1) { perror(part.c_str()); exit(2); }
        fclose(f);
        rename(part.c_str(), path.c_str());
    } else {
        struct stat st;
        for (int waited = 0; stat(path.c_str(), &st) != 0; waited++) {
            if (waited > 120000) { fprintf(stderr, "PE %d: no %s after 120 s\n", pe, path.c_str()); exit(3); }
            usleep(1000);
        }
        FILE *f = fopen(path.c_str(), "rb");
        if (!f || fread(&id, sizeof id, 1, f) != 1) { perror(path.c_str()); exit(2); }
        fclose(f);
    }
    nvshmemx_set_attr_uniqueid_args(pe, npes, &id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
}

// the PE numbers from the environment, the GPU, then NVSHMEM
static void start_pe() {
    const char *pe_env = getenv("SCOPES_PE"), *npes_env = getenv("SCOPES_NPES");
    const char *dir = getenv("SCOPES_SYNC_DIR");
    if (!pe_env || !npes_env || !dir) {
        fprintf(stderr, "set SCOPES_PE, SCOPES_NPES and SCOPES_SYNC_DIR (run.sh does)\n");
        exit(2);
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    bootstrap(atoi(pe_env), atoi(npes_env), dir);
}

__device__ inline long long now_ns() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
