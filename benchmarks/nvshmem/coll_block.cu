// NVSHMEM's side of the collective rows of benchmarks/collectives_pe.py:
// fcollect, alltoall, broadcast (root 0) and sum_reduce at block, warp and
// thread scope on the world team, float64, one block per PE (256 threads, 32,
// or 1: the threads that call) launched with nvshmemx_collective_launch, ROUNDS
// calls in one kernel timed with the GPU's globaltimer after WARMUP calls; 1,
// 512 and 8192 elements per PE. Prints one JSON line (PE 0).
#include "common.cuh"

static const int ROUNDS = 1000, WARMUP = 100;
static const char *KINDS[] = {"fcollect", "alltoall", "broadcast", "sum_reduce"};
static const char *SCOPES[] = {"_block", "_warp", ""};
static const int THREADS[] = {256, 32, 1};

template <int SCOPE>
__device__ void collective(int kind, double *dest, const double *source, size_t nelems) {
    if (SCOPE == 0) {
        if (kind == 0)
            nvshmemx_double_fcollect_block(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 1)
            nvshmemx_double_alltoall_block(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 2)
            nvshmemx_double_broadcast_block(NVSHMEM_TEAM_WORLD, dest, source, nelems, 0);
        else
            nvshmemx_double_sum_reduce_block(NVSHMEM_TEAM_WORLD, dest, source, nelems);
    } else if (SCOPE == 1) {
        if (kind == 0)
            nvshmemx_double_fcollect_warp(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 1)
            nvshmemx_double_alltoall_warp(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 2)
            nvshmemx_double_broadcast_warp(NVSHMEM_TEAM_WORLD, dest, source, nelems, 0);
        else
            nvshmemx_double_sum_reduce_warp(NVSHMEM_TEAM_WORLD, dest, source, nelems);
    } else {
        if (kind == 0)
            nvshmem_double_fcollect(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 1)
            nvshmem_double_alltoall(NVSHMEM_TEAM_WORLD, dest, source, nelems);
        else if (kind == 2)
            nvshmem_double_broadcast(NVSHMEM_TEAM_WORLD, dest, source, nelems, 0);
        else
            nvshmem_double_sum_reduce(NVSHMEM_TEAM_WORLD, dest, source, nelems);
    }
}

template <int SCOPE>
__global__ void scoped_collectives(int kind, double *dest, const double *source, size_t nelems,
                                   int rounds, long long *stamps) {
    for (int r = 0; r < rounds; r++) {
        if (r == WARMUP && threadIdx.x == 0) stamps[0] = now_ns();
        collective<SCOPE>(kind, dest, source, nelems);
    }
    if (threadIdx.x == 0) stamps[1] = now_ns();
}

static const void *KERNELS[] = {(const void *)scoped_collectives<0>,
                                (const void *)scoped_collectives<1>,
                                (const void *)scoped_collectives<2>};

int main() {
    start_pe();
    int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
    long long *stamps;
    CHECK(cudaMalloc(&stamps, 2 * sizeof(long long)));
    std::string rows;
    for (size_t nelems : {(size_t)1, (size_t)512, (size_t)8192}) {
        double *source = (double *)nvshmem_calloc(nelems * npes, sizeof(double));
        double *dest = (double *)nvshmem_calloc(nelems * npes, sizeof(double));
        char buf[2048];
        int n = snprintf(buf, sizeof buf, "%s{\"bytes\": %zu", rows.empty() ? "" : ", ",
                         nelems * sizeof(double));
        for (int k = 0; k < 12; k++) {
            int kind = k / 3, scope = k % 3;
            long long host[2];
            for (int attempt = 0; attempt < 2; attempt++) {  // the first warms up
                nvshmem_barrier_all();
                int rounds = ROUNDS;
                void *args[] = {&kind, &dest, &source, &nelems, &rounds, &stamps};
                if (nvshmemx_collective_launch(KERNELS[scope], 1, THREADS[scope], args, 0,
                                               0) != 0) {
                    fprintf(stderr, "nvshmemx_collective_launch failed\n");
                    return 2;
                }
                CHECK(cudaDeviceSynchronize());
            }
            CHECK(cudaMemcpy(host, stamps, sizeof host, cudaMemcpyDeviceToHost));
            double us = (host[1] - host[0]) / 1e3 / (ROUNDS - WARMUP);
            n += snprintf(buf + n, sizeof buf - n, ", \"%s%s_us\": %.4f", KINDS[kind],
                          SCOPES[scope], us);
            if (me == 0)
                fprintf(stderr, "%6zu B  %-10s%-6s %8.2f us\n", nelems * sizeof(double),
                        KINDS[kind], SCOPES[scope], us);
        }
        snprintf(buf + n, sizeof buf - n, "}");
        rows += buf;
        nvshmem_barrier_all();
        nvshmem_free(dest);
        nvshmem_free(source);
    }
    if (me == 0) {
        printf("{\"program\": \"coll_block\", \"npes\": %d, \"nvshmem\": \"%d.%d.%d\", "
               "\"block_collectives\": [%s]}\n", npes, NVSHMEM_VENDOR_MAJOR_VERSION,
               NVSHMEM_VENDOR_MINOR_VERSION, NVSHMEM_VENDOR_PATCH_VERSION, rows.c_str());
        fflush(stdout);
    }
    CHECK(cudaFree(stamps));
    nvshmem_finalize();
    return 0;
}
