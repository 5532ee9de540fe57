// NVSHMEM's side of the scope rows of benchmarks/rma_pe.py: put at warp and
// thread scope and get at block scope, PE 0 with PE 1, float64 elements, 528
// blocks of 256 threads; every block (warp, thread) moves its own contiguous
// chunk `reps` times in one launch; reps = max(3, min(1000, 2^28 / bytes));
// sizes 4 KiB to the maximum by 4x. A measuring program beside our benchmark,
// not part of the library. Prints one JSON line (PE 0).
//
// Bootstrap: NVSHMEM's unique-id bootstrap through a file in $SCOPES_SYNC_DIR
// (PE 0 writes it, the other PE reads it); $SCOPES_PE and $SCOPES_NPES number
// the PEs. benchmarks/nvshmem/run.sh starts both PEs under a private MPS daemon.
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

static const int BLOCKS = 132 * 4, THREADS = 256;

__global__ void put_warps(double *dest, const double *source, size_t count, size_t chunk,
                          int pe, int reps) {
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    size_t start = warp * chunk, end = start + chunk < count ? start + chunk : count;
    if (start < end)
        for (int r = 0; r < reps; r++)
            nvshmemx_putmem_warp(dest + start, source + start, (end - start) * sizeof(double), pe);
}

__global__ void put_threads(double *dest, const double *source, size_t count, size_t chunk,
                            int pe, int reps) {
    size_t start = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * chunk;
    size_t end = start + chunk < count ? start + chunk : count;
    if (start < end)
        for (int r = 0; r < reps; r++)
            nvshmem_putmem(dest + start, source + start, (end - start) * sizeof(double), pe);
}

__global__ void get_blocks(double *dest, const double *source, size_t count, size_t chunk,
                           int pe, int reps) {
    size_t start = (size_t)blockIdx.x * chunk, end = start + chunk < count ? start + chunk : count;
    if (start < end)
        for (int r = 0; r < reps; r++)
            nvshmemx_getmem_block(dest + start, source + start, (end - start) * sizeof(double), pe);
}

__global__ void arange(double *a, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] = (double)i;
}

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

int main(int argc, char **argv) {
    size_t max_bytes = argc > 1 ? strtoull(argv[1], nullptr, 10) : (256ull << 20);
    const char *pe_env = getenv("SCOPES_PE"), *npes_env = getenv("SCOPES_NPES");
    const char *dir = getenv("SCOPES_SYNC_DIR");
    if (!pe_env || !npes_env || !dir) { fprintf(stderr, "set SCOPES_PE, SCOPES_NPES, SCOPES_SYNC_DIR\n"); return 2; }
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    bootstrap(atoi(pe_env), atoi(npes_env), dir);
    int me = nvshmem_my_pe();
    size_t n = max_bytes / 8;
    double *heap = (double *)nvshmem_malloc(max_bytes);  // PE 0 puts into PE 1's, gets from it
    double *local;
    CHECK(cudaMalloc(&local, max_bytes));
    arange<<<1024, 256>>>(heap, n);
    CHECK(cudaDeviceSynchronize());
    nvshmem_barrier_all();
    if (me == 0) {
        std::string rows;
        for (size_t size = 4096; size <= max_bytes; size *= 4) {
            size_t count = size / 8;
            long r0 = (1l << 28) / (long)size;
            int reps = (int)(r0 > 1000 ? 1000 : (r0 < 3 ? 3 : r0));
            size_t per_block = (count + BLOCKS - 1) / BLOCKS;
            size_t per_warp = (count + BLOCKS * (THREADS / 32) - 1) / (BLOCKS * (THREADS / 32));
            size_t per_thread = (count + (size_t)BLOCKS * THREADS - 1) / ((size_t)BLOCKS * THREADS);
            int grid = (int)((count + per_block - 1) / per_block);
            double warp = per_rep([&](int r) { put_warps<<<BLOCKS, THREADS>>>(heap, local, count, per_warp, 1, r); }, reps);
            double thread = per_rep([&](int r) { put_threads<<<BLOCKS, THREADS>>>(heap, local, count, per_thread, 1, r); }, reps);
            double get = per_rep([&](int r) { get_blocks<<<grid, THREADS>>>(local, heap, count, per_block, 1, r); }, reps);
            char buf[256];
            snprintf(buf, sizeof buf, "%s{\"bytes\": %zu, \"reps\": %d, \"put_warp_s\": %.9e, "
                     "\"put_thread_s\": %.9e, \"get_block_s\": %.9e}", rows.empty() ? "" : ", ",
                     size, reps, warp, thread, get);
            rows += buf;
            fprintf(stderr, "%11zu %5d  put_warp %8.1f  put %8.1f  get_block %8.1f GB/s\n", size,
                    reps, size / warp / 1e9, size / thread / 1e9, size / get / 1e9);
        }
        printf("{\"program\": \"scopes_bw\", \"nvshmem\": \"%d.%d.%d\", \"bandwidth\": [%s]}\n",
               NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
               NVSHMEM_VENDOR_PATCH_VERSION, rows.c_str());
        fflush(stdout);
    }
    nvshmem_barrier_all();
    nvshmem_free(heap);
    CHECK(cudaFree(local));
    nvshmem_finalize();
    return 0;
}
