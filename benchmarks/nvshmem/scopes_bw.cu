// NVSHMEM's side of the scope rows of benchmarks/rma_pe.py: put at warp and
// thread scope and get at block scope, PE 0 with PE 1, float64 elements, 528
// blocks of 256 threads; every block (warp, thread) moves its own contiguous
// chunk `reps` times in one launch; reps = max(3, min(1000, 2^28 / bytes));
// sizes 4 KiB to the maximum by 4x. A measuring program beside our benchmark,
// not part of the library. Prints one JSON line (PE 0).
//
// (common.cuh: the bootstrap, checks and timing)
#include "common.cuh"

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

int main(int argc, char **argv) {
    size_t max_bytes = argc > 1 ? strtoull(argv[1], nullptr, 10) : (256ull << 20);
    start_pe();
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
            double warp = per_rep([&](int r) {
                put_warps<<<BLOCKS, THREADS>>>(heap, local, count, per_warp, 1, r);
            }, reps);
            double thread = per_rep([&](int r) {
                put_threads<<<BLOCKS, THREADS>>>(heap, local, count, per_thread, 1, r);
            }, reps);
            double get = per_rep([&](int r) {
                get_blocks<<<grid, THREADS>>>(local, heap, count, per_block, 1, r);
            }, reps);
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
