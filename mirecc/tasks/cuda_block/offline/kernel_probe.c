/* kernel_probe: what a CUDA program's kernels took on the GPU, and a digest
 * of everything it copied back from the device, without touching the
 * program: a CUPTI injection library the CUDA driver loads at cuInit.
 *
 *   CUDA_INJECTION64_PATH=kernel_probe.so MIRECC_PROBE_OUT=run.json ./program ...
 *
 * At exit it writes one JSON object to $MIRECC_PROBE_OUT:
 *   kernel_ns   the sum of every kernel's GPU duration (CUPTI's kernel
 *               activity records: end - start), nanoseconds
 *   kernels     per kernel (mangled name): launches and nanoseconds
 *   d2h_bytes, d2h_fnv
 *               the bytes of every synchronous cudaMemcpy from device to
 *               host, and their FNV-1a 64 digest in copy order (the
 *               program's results as it reads them back; an asynchronous
 *               copy is not seen)
 *   api_errors  runtime API calls that returned an error
 *   dropped     activity records CUPTI dropped (then kernel_ns is short)
 *
 * Labelling tool of mirecc/tasks/cuda_block/offline/suite_labels.py; it is
 * built there against the machine's CUPTI (same CUDA version as the
 * program's runtime) and runs only in labelling runs.
 */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KERNELS 512
#define BUFFER_BYTES (4u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char name[400]; uint64_t launches, ns; } kernels[MAX_KERNELS];
static int n_kernels;
static uint64_t total_ns, other_launches, d2h_bytes, api_errors;
static uint64_t d2h_fnv = 1469598103934665603ULL;
static int started, finished;

static void add_kernel(const char *name, uint64_t ns)
{
    pthread_mutex_lock(&lock);
    total_ns += ns;
    int i;
    for (i = 0; i < n_kernels; i++)
        if (strcmp(kernels[i].name, name ? name : "?") == 0)
            break;
    if (i == n_kernels && n_kernels < MAX_KERNELS) {
        snprintf(kernels[i].name, sizeof kernels[i].name, "%s", name ? name : "?");
        n_kernels++;
    }
    if (i < n_kernels) {
        kernels[i].launches++;
        kernels[i].ns += ns;
    } else {
        other_launches++;
    }
    pthread_mutex_unlock(&lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    CUpti_Activity *record = NULL;
    (void)ctx; (void)stream; (void)size;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            /* the header's kernel record: this library is built against
             * the CUPTI it runs with */
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
            add_kernel(k->name, k->end > k->start ? k->end - k->start : 0);
        }
    }
    free(buffer);
}

static void CUPTIAPI on_runtime_api(void *userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId id, const void *data)
{
    const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;
    (void)userdata;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || cb->callbackSite != CUPTI_API_EXIT)
        return;
    cudaError_t status = cb->functionReturnValue ? *(const cudaError_t *)cb->functionReturnValue
                                                 : cudaSuccess;
    pthread_mutex_lock(&lock);
    if (status != cudaSuccess)
        api_errors++;
    if (id == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020 && status == cudaSuccess) {
        const cudaMemcpy_v3020_params *p = (const cudaMemcpy_v3020_params *)cb->functionParams;
        if (p->kind == cudaMemcpyDeviceToHost && p->dst) {
            const unsigned char *bytes = (const unsigned char *)p->dst;
            for (size_t i = 0; i < p->count; i++) {
                d2h_fnv ^= bytes[i];
                d2h_fnv *= 1099511628211ULL;
            }
            d2h_bytes += p->count;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void write_json(void)
{
    const char *path = getenv("MIRECC_PROBE_OUT");
    size_t dropped = 0;
    if (finished || !path)
        return;
    finished = 1;
    cuptiActivityFlushAll(1);
    cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    FILE *out = fopen(path, "w");
    if (!out)
        return;
    pthread_mutex_lock(&lock);
    fprintf(out, "{\"kernel_ns\": %llu, \"d2h_bytes\": %llu, \"d2h_fnv\": \"%016llx\", "
            "\"api_errors\": %llu, \"dropped\": %llu, \"other_launches\": %llu, "
            "\"kernels\": [", (unsigned long long)total_ns, (unsigned long long)d2h_bytes,
            (unsigned long long)d2h_fnv, (unsigned long long)api_errors,
            (unsigned long long)dropped, (unsigned long long)other_launches);
    for (int i = 0; i < n_kernels; i++) {
        fputs(i ? ", {\"name\": \"" : "{\"name\": \"", out);
        for (const char *c = kernels[i].name; *c; c++) {
            if (*c == '"' || *c == '\\')
                fputc('\\', out);
            if ((unsigned char)*c >= 0x20)
                fputc(*c, out);
        }
        fprintf(out, "\", \"launches\": %llu, \"ns\": %llu}",
                (unsigned long long)kernels[i].launches, (unsigned long long)kernels[i].ns);
    }
    fputs("]}\n", out);
    pthread_mutex_unlock(&lock);
    fclose(out);
}

/* the CUDA driver calls this once, at cuInit, for CUDA_INJECTION64_PATH */
int InitializeInjection(void)
{
    CUpti_SubscriberHandle subscriber;
    if (started)
        return 1;
    started = 1;
    if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_runtime_api, NULL) == CUPTI_SUCCESS)
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
        fprintf(stderr, "kernel_probe: CUPTI kernel activity unavailable\n");
    atexit(write_json);
    return 1;
}
