/* mirecc-opencl: OpenCL thread coarsening for unmodified programs, confirmed
 * by timing the kernels' own launches (README.md beside this file).
 *
 * `mire run --opencl -- ./app args` loads libmirecc-opencl.so before the ICD
 * loader (LD_PRELOAD).  It sees each program's source
 * (clCreateProgramWithSource) and, once the program is built, asks mirecc's
 * planner for it (MIRECC_OPENCL_PLANNER, run once per source, options and
 * device: the plan is cached in <cache>/opencl/): for each kernel the
 * transform accepts, the factors to try in the head's order, and one more
 * program with each kernel's coarsened forms (`<kernel>__mirecc_f<k>`).  Each
 * launch of such a kernel then runs an arm chosen by the policy the adaptive
 * OpenMP runtime uses (../common/mirecc_engine.h): factor 1 (the program's
 * own kernel and launch) first, then each factor alternating with the
 * reference, timed with the queue's profiling events; a factor is kept only
 * when it beats the reference beyond the measured noise, and the verdicts
 * persist in the same store.  The global size (and a local size the program
 * gives) along the coarsened dimension is divided by the factor; a launch
 * the factor does not divide runs factor 1.
 *
 * Depends on libc, libdl and the OpenCL library it wraps (found with
 * dlsym(RTLD_NEXT)).  Fails open: anything unexpected runs the program's own
 * kernel and launch, with one line on stderr at most per process.
 */
#define _GNU_SOURCE
#define ENGINE_NAME "mirecc-opencl"
#include "../common/mirecc_engine.h"
#include <dlfcn.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>

/* The few OpenCL types and constants used (no OpenCL headers needed). */
typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_ulong cl_bitfield, cl_command_queue_properties, cl_queue_properties;
typedef struct _cl_context *cl_context;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
#define CL_SUCCESS 0
#define CL_QUEUE_PROFILING_ENABLE (1 << 1)
#define CL_QUEUE_PROPERTIES 0x1093
#define CL_DEVICE_NAME 0x102B
#define CL_DEVICE_TYPE 0x1000
#define CL_PROGRAM_REFERENCE_COUNT 0x1160
#define CL_PROGRAM_NUM_DEVICES 0x1162
#define CL_PROGRAM_DEVICES 0x1163
#define CL_KERNEL_REFERENCE_COUNT 0x1192
#define CL_PROFILING_COMMAND_SUBMIT 0x1281
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3
#define CL_COMPLETE 0
#define CL_DEVICE_TYPE_DEFAULT 1
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFull

typedef void(build_notify)(cl_program, void *);

#define REAL(name, ret, ...)                                        \
  static ret (*real_##name)(__VA_ARGS__);                           \
  static int load_##name(void) {                                    \
    if (!real_##name) real_##name = (ret(*)(__VA_ARGS__))find(#name); \
    return real_##name != NULL;                                     \
  }

static void *find(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) {  /* the program dlopen()s the loader itself */
    void *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib) f = dlsym(lib, name);
  }
  return f;
}

REAL(clCreateCommandQueue, cl_command_queue, cl_context, cl_device_id,
     cl_command_queue_properties, cl_int *)
REAL(clCreateCommandQueueWithProperties, cl_command_queue, cl_context, cl_device_id,
     const cl_queue_properties *, cl_int *)
REAL(clCreateProgramWithSource, cl_program, cl_context, cl_uint, const char **,
     const size_t *, cl_int *)
REAL(clBuildProgram, cl_int, cl_program, cl_uint, const cl_device_id *, const char *,
     build_notify *, void *)
REAL(clCreateKernel, cl_kernel, cl_program, const char *, cl_int *)
REAL(clSetKernelArg, cl_int, cl_kernel, cl_uint, size_t, const void *)
REAL(clEnqueueNDRangeKernel, cl_int, cl_command_queue, cl_kernel, cl_uint, const size_t *,
     const size_t *, const size_t *, cl_uint, const cl_event *, cl_event *)
REAL(clReleaseKernel, cl_int, cl_kernel)
REAL(clReleaseProgram, cl_int, cl_program)
REAL(clGetProgramInfo, cl_int, cl_program, cl_uint, size_t, void *, size_t *)
REAL(clGetKernelInfo, cl_int, cl_kernel, cl_uint, size_t, void *, size_t *)
REAL(clGetDeviceInfo, cl_int, cl_device_id, cl_uint, size_t, void *, size_t *)
REAL(clGetEventInfo, cl_int, cl_event, cl_uint, size_t, void *, size_t *)
REAL(clRetainEvent, cl_int, cl_event)
REAL(clFinish, cl_int, cl_command_queue)
REAL(clWaitForEvents, cl_int, cl_uint, const cl_event *)
REAL(clEnqueueReadBuffer, cl_int, cl_command_queue, void *, cl_uint, size_t, size_t, void *,
     cl_uint, const cl_event *, cl_event *)
REAL(clGetEventProfilingInfo, cl_int, cl_event, cl_uint, size_t, void *, size_t *)
REAL(clReleaseEvent, cl_int, cl_event)
REAL(clGetDeviceIDs, cl_int, void *, cl_ulong, cl_uint, cl_device_id *, cl_uint *)

#define MAX_FACTORS 6
#define MAX_ARGS 64
#define MAX_PENDING 32

/* One kernel of a plan: what the planner said about it. */
struct planned {
  char name[128];
  int dim, nfactor, factors[MAX_FACTORS];
  char why[256];         /* refused: the reason; else how the factors were ranked */
  int accepted, needs_local;
  struct state *state;   /* the engine's state: arms f1 (default), f<k>... */
  char key[96], label[256];
  int64_t launches, coarsened;
  /* timed launches not read yet: read once they have run (no waiting) */
  cl_event pending[MAX_PENDING];
  struct cell *pending_cell[MAX_PENDING];
  int pending_arm[MAX_PENDING], npending;
  cl_ulong last_end;     /* the end of its last launch read */
  struct planned *next;
};

struct prog {
  cl_program program, coarse;
  cl_context context;
  char *source;
  char digest[17], device[128];
  int planned;
  struct planned *kernels;
  struct prog *next;
};

struct kern {
  cl_kernel kernel;
  struct prog *prog;
  struct planned *plan;
  cl_kernel variant[MAX_FACTORS];   /* created at their first launch */
  uint32_t variant_gen[MAX_FACTORS];
  uint32_t gen;                     /* bumped by each clSetKernelArg */
  size_t arg_size[MAX_ARGS];
  void *arg[MAX_ARGS];
  int nargs, off;                   /* off: an argument we cannot copy (local memory) */
  struct kern *next;
};

static struct prog *progs;
static struct kern *kerns;
static int forced;          /* MIRECC_OPENCL_FACTOR: every launch at this factor;
                               -1 (all): the arms in turn, launch by launch (labels) */
static int off_all;         /* MIRECC_OPENCL=0, or no store/planner to work with */
static char record_path[4096], cache_root[4096];
static int device_confirm;  /* MIRECC_OPENCL_DEVICE=confirm: each device the program's
                               request allows, timed over whole runs */
static int timing;          /* kernels may be coarsened (a planner, or a forced factor):
                               queues get profiling; without, they are left as asked */

/* ------------------------------------------------------------- set-up */

static void write_record(void);

static int allowed_threads(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* Under `lock`. */
static void initialise(void) {
  initialised = 1;
  const char *v = getenv("MIRECC_OPENCL");
  if (v && !strcmp(v, "0")) {
    off_all = disabled = 1;
    return;
  }
  warm_each_arm = 1;
  v = getenv("MIRECC_OPENCL_FACTOR");
  if (v && !strcmp(v, "all")) {
    forced = -1;
  } else if (v && *v) {
    char *end;
    long f = strtol(v, &end, 10);
    if (*end || f < 1 || f > 1024) warn("MIRECC_OPENCL_FACTOR=%s is not a factor%s; ignored", v, "");
    else forced = (int)f;
  }
  v = getenv("MIRECC_OPENCL_PLANNER");
  timing = forced || (v && *v);
  v = getenv("MIRECC_OPENCL_DEVICE");
  device_confirm = v && !strcmp(v, "confirm") && !forced;
  v = getenv("MIRECC_OPENCL_RECORD");
  if (v && *v) snprintf(record_path, sizeof record_path, "%s", v);
  const char *cache = getenv("MIRECC_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (cache && *cache) snprintf(cache_root, sizeof cache_root, "%s/opencl", cache);
  else if (xdg && *xdg) snprintf(cache_root, sizeof cache_root, "%s/mirecc/opencl", xdg);
  else if (home && *home) snprintf(cache_root, sizeof cache_root, "%s/.cache/mirecc/opencl", home);
  if (!forced) engine_configure(allowed_threads());
  if (record_path[0]) atexit(write_record);   /* runs before the store's save */
}

static void ensure_initialised(void) {
  pthread_mutex_lock(&lock);
  if (!initialised) initialise();
  pthread_mutex_unlock(&lock);
}

static uint64_t fnv64(const char *s, uint64_t h) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* ------------------------------------------------------------- plans */

/* Run the planner: argv source options device device-type out-prefix. */
static int run_planner(const char *src, const char *options, const char *device,
                       const char *type, const char *out) {
  const char *planner = getenv("MIRECC_OPENCL_PLANNER");
  if (!planner || !*planner) return -1;
  extern char **environ;
  int n = 0;
  for (char **e = environ; *e; e++) n++;
  char **env = calloc((size_t)n + 1, sizeof *env);
  if (!env) return -1;
  int m = 0;
  for (char **e = environ; *e; e++)   /* the planner runs without the interposer */
    if (strncmp(*e, "LD_PRELOAD=", 11)) env[m++] = *e;
  char *argv[] = {"/bin/sh", "-c", "exec $MIRECC_OPENCL_PLANNER \"$@\"", "mirecc-opencl-plan",
                  (char *)src, (char *)options, (char *)device, (char *)type, (char *)out, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, env);
  free(env);
  if (rc) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0, got;
  char *text = malloc(cap);
  while (text && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 >= cap) {
      char *bigger = realloc(text, cap * 2);
      if (!bigger) {
        free(text);
        text = NULL;
        break;
      }
      text = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (text) text[len] = 0;
  return text;
}

static int write_file(const char *path, const char *text) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return -1;
  int bad = fputs(text, f) == EOF;
  bad = fclose(f) || bad;
  if (bad || rename(tmp, path)) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* The plan's lines:
 *   # mirecc-opencl-plan 1
 *   kernel <name> <dim> <f,f,...> <flags> <why>   (accepted: the factors in the head's
 *                                                  order; flags "local": it reads its
 *                                                  work-group, coarsened only where the
 *                                                  launch gives a local size)
 *   refused <name> <reason>                 (tab-separated) */
static void parse_plan(struct prog *p, char *text) {
  if (strncmp(text, "# mirecc-opencl-plan 1", 22)) return;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *f[6] = {0};
    int n = 0;
    for (char *q = line; q && n < 6; n++) {
      f[n] = q;
      q = strchr(q, '\t');
      if (q) *q++ = 0;
    }
    if (n < 3 || line[0] == '#') continue;
    struct planned *k = calloc(1, sizeof *k);
    if (!k) return;
    snprintf(k->name, sizeof k->name, "%s", f[1]);
    if (!strcmp(f[0], "kernel") && n == 6) {
      k->dim = atoi(f[2]);
      for (char *t = strtok_r(f[3], ",", &f[3]); t && k->nfactor < MAX_FACTORS;
           t = strtok_r(NULL, ",", &f[3]))
        if (atoi(t) > 1) k->factors[k->nfactor++] = atoi(t);
      k->needs_local = !strcmp(f[4], "local");
      snprintf(k->why, sizeof k->why, "%s", f[5]);
      k->accepted = k->nfactor > 0 && k->dim >= 0 && k->dim < 3;
    } else {
      snprintf(k->why, sizeof k->why, "%s", f[2]);
    }
    snprintf(k->key, sizeof k->key, "cl-%s-%.60s", p->digest, k->name);
    snprintf(k->label, sizeof k->label, "%s on %s", k->name, p->device);
    k->next = p->kernels;
    p->kernels = k;
  }
}

static void plan(struct prog *p, cl_uint ndev, const cl_device_id *devs, const char *options) {
  p->planned = 1;
  cl_device_id dev = ndev ? devs[0] : NULL;
  cl_device_id own[8];
  cl_uint nd = 0;
  if (!dev && load_clGetProgramInfo() &&
      real_clGetProgramInfo(p->program, CL_PROGRAM_NUM_DEVICES, sizeof nd, &nd, NULL) ==
          CL_SUCCESS && nd >= 1 && nd <= 8 &&
      real_clGetProgramInfo(p->program, CL_PROGRAM_DEVICES, nd * sizeof *own, own, NULL) ==
          CL_SUCCESS)
    dev = own[0];
  cl_ulong type = 0;
  if (!dev || !load_clGetDeviceInfo() ||
      real_clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof p->device - 1, p->device, NULL) ||
      real_clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL))
    return;
  for (char *c = p->device; *c; c++)
    if (*c == '\t' || *c == '\n') *c = ' ';
  uint64_t h = fnv64(p->source, 14695981039346656037ull);
  h = fnv64("\x01", h);
  h = fnv64(options ? options : "", h);
  h = fnv64("\x01", h);
  h = fnv64(p->device, h);
  const char *factors = getenv("MIRECC_OPENCL_FACTORS");   /* the planner reads it */
  if (factors && *factors) h = fnv64(factors, fnv64("\x01", h));
  snprintf(p->digest, sizeof p->digest, "%016llx", (unsigned long long)h);
  if (!cache_root[0]) return;
  char path[4200], src[4200], coarse[4200];
  snprintf(path, sizeof path, "%s/%s.plan", cache_root, p->digest);
  snprintf(src, sizeof src, "%s/%s.src.cl", cache_root, p->digest);
  snprintf(coarse, sizeof coarse, "%s/%s.cl", cache_root, p->digest);
  char *text = read_file(path);
  if (!text) {
    char prefix[4200], dir[4200];
    snprintf(dir, sizeof dir, "%s/x", cache_root);
    snprintf(prefix, sizeof prefix, "%s/%s", cache_root, p->digest);
    if (mkdirs(dir) || write_file(src, p->source)) return;
    int bad = run_planner(src, options ? options : "", p->device,
                          type & (1 << 2) ? "gpu" : type & (1 << 1) ? "cpu" : "other", prefix);
    unlink(src);
    if (bad) {
      if (getenv("MIRECC_OPENCL_PLANNER"))
        warn("the planner failed for a program (%s); its kernels run as they are%s",
             p->digest, "");
      return;
    }
    text = read_file(path);
    if (!text) return;
  }
  parse_plan(p, text);
  free(text);
  int any = 0;
  for (struct planned *k = p->kernels; k; k = k->next) any |= k->accepted;
  if (!any) return;
  char *csrc = read_file(coarse);
  if (!csrc) return;
  cl_int err = 0;
  const char *strings[] = {csrc};
  p->coarse = real_clCreateProgramWithSource(p->context, 1, strings, NULL, &err);
  free(csrc);
  if (!p->coarse || err ||
      real_clBuildProgram(p->coarse, ndev, devs, options, NULL, NULL) != CL_SUCCESS) {
    warn("the coarsened kernels of a program (%s) did not build; its kernels run as they are%s",
         p->digest, "");
    for (struct planned *k = p->kernels; k; k = k->next) {
      k->accepted = 0;
      snprintf(k->why, sizeof k->why, "the coarsened program did not build");
    }
    return;
  }
}

/* ------------------------------------------------------------- states */

/* Under `lock`: the engine's state of a planned kernel (arms: f1, then its factors). */
static struct state *state_for(struct planned *k) {
  if (k->state) return k->state;
  struct state *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->key = k->key;
  s->name = k->label;
  s->owner = k;
  s->last = -1;
  int n = 0;
  struct arm arms[MAX_ARMS];
  memset(arms, 0, sizeof arms);
  snprintf(arms[n].name, NAME_LEN, "default");
  arms[n++].factor = 1;
  for (int i = 0; i < k->nfactor && n < MAX_ARMS; i++) {
    snprintf(arms[n].name, NAME_LEN, "f%d", k->factors[i]);
    arms[n++].factor = k->factors[i];
  }
  s->narm = n;
  for (int c = 0; c < MAX_CELLS; c++)
    for (int i = 0; i < n; i++) s->cell[c].arm[i] = arms[i];
  if (!forced) restore(s);
  s->next = states;
  states = s;
  k->state = s;
  return s;
}

/* Work-items in powers of 4, as the OpenMP runtime buckets trip counts. */
static int launch_bucket(cl_uint dims, const size_t *global) {
  uint64_t items = 1;
  for (cl_uint i = 0; i < dims && i < 3; i++) items *= global[i] ? global[i] : 1;
  return bucket_of((int64_t)items);
}

/* Under `lock`: the samples of the kernel's timed launches that have run
   (their profiling events read, nothing waited for), in launch order; those
   still queued or running stay pending. */
static void collect(struct planned *k) {
  int kept = 0;
  for (int i = 0; i < k->npending; i++) {
    cl_event e = k->pending[i];
    struct cell *c = k->pending_cell[i];
    int arm = k->pending_arm[i];
    cl_int status = -1;
    if (real_clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                            NULL) == CL_SUCCESS && status > CL_COMPLETE) {
      k->pending[kept] = e;
      k->pending_cell[kept] = k->pending_cell[i];
      k->pending_arm[kept++] = k->pending_arm[i];
      continue;
    }
    cl_ulong t0 = 0, t1 = 0, sub = 0;
    if (status == CL_COMPLETE &&
        real_clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) ==
            CL_SUCCESS &&
        real_clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) ==
            CL_SUCCESS &&
        t1 >= t0) {
      /* the first launch in a run of the candidate being explored: the
         platform builds its kernel for it (pocl: a compile before the
         command starts, a few hundred ms on a cold cache); from its
         submission, or the kernel's last launch's end, to its own end, what
         it takes beyond the reference's median counts against the
         exploration budget (the reference's own first launch does not) */
      if (arm && arm < 32 && arm == c->cur && arm != c->best && !(c->warmed & (1u << arm)) &&
          c->phase == EXPLORE && !forced &&
          real_clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_SUBMIT, sizeof sub, &sub,
                                       NULL) == CL_SUCCESS) {
        cl_ulong from = sub > k->last_end ? sub : k->last_end;
        double ref = count(&c->arm[c->best]) ? median(&c->arm[c->best]) : 0;
        double took = t1 > from ? (double)(t1 - from) * 1e-9 : 0;
        if (took > ref) c->lost += took - ref;
      }
      sample(c, arm, (double)(t1 - t0) * 1e-9);
      k->last_end = t1;
    }
    c->inflight[arm]--;
    real_clReleaseEvent(e);
  }
  k->npending = kept;
}

/* Under `lock`: every kernel's (after the program waited for its queue). */
static void collect_all(void) {
  if (!real_clGetEventInfo || !real_clGetEventProfilingInfo || !real_clReleaseEvent) return;
  for (struct prog *p = progs; p; p = p->next)
    for (struct planned *k = p->kernels; k; k = k->next)
      if (k->npending) collect(k);
}

/* ------------------------------------------------------------- device choice */

/* With MIRECC_OPENCL_DEVICE=confirm, where the program's request
 * (clGetDeviceIDs with a type) finds more than one device, each run gives
 * the program one of them first: its own (the first the platform lists),
 * then each other device, alternating run by run.  A run's sample is its
 * wall time from that call to exit (builds, transfers and kernels: all the
 * device changes), except a device's first run, which builds the program
 * for it (pocl keeps what it built in its own cache); a device is kept
 * only when it beats the program's own beyond the noise (the engine's
 * rule, with `pairs` runs each), and the verdict is kept in the store
 * under the program's digest and the devices offered.  Programs that name no type (clCreateContextFromType) or find
 * one device are left alone. */

#define MAX_DEVICES MAX_ARMS
static struct state *dev_state;
static struct cell *dev_cell;
static int dev_arm = -1, dev_count;
static cl_device_id dev_ids[MAX_DEVICES];
static char dev_names[MAX_DEVICES][128], dev_key[64], dev_label[160];
static struct timespec dev_t0;

/* The running executable's digest: its size and first and last MiB. */
static uint64_t exe_digest(void) {
  uint64_t h = 14695981039346656037ull;
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return h;
  struct stat st;
  static unsigned char buf[1 << 20];
  if (fstat(fd, &st) == 0) {
    char size[32];
    snprintf(size, sizeof size, "%lld", (long long)st.st_size);
    h = fnv64(size, h);
    off_t at[2] = {0, st.st_size > (off_t)sizeof buf ? st.st_size - (off_t)sizeof buf : 0};
    for (int i = 0; i < (at[1] ? 2 : 1); i++) {
      ssize_t got = pread(fd, buf, sizeof buf, at[i]);
      for (ssize_t j = 0; j < got; j++) h = (h ^ buf[j]) * 1099511628211ull;
    }
  }
  close(fd);
  return h;
}

/* At exit, before the store is saved: this run's wall time for its device. */
static void device_done(void) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_mutex_lock(&lock);
  if (dev_cell && dev_arm >= 0) {
    double t = (double)(t1.tv_sec - dev_t0.tv_sec) + (double)(t1.tv_nsec - dev_t0.tv_nsec) * 1e-9;
    struct arm *a = &dev_cell->arm[dev_arm];
    if (dev_cell->phase == EXPLORE && a->n == 0 && a->at == 0 && !a->kept && !a->dropped)
      a->at = -1;   /* a device's first run builds (and plans) the program's kernels for it:
                       a warm-up, marked in the store, not a sample */
    else
      record(dev_cell, dev_arm, t);
    dev_cell->dirty = 1;
  }
  pthread_mutex_unlock(&lock);
}

/* Under `lock`: this run's device for a request that found `n` devices
   (the platform's order), made once per run; -1: the program's own. */
static int device_for(cl_uint n, const cl_device_id *ids) {
  if (dev_state) {   /* the same devices as the first request, else left alone */
    if ((int)n != dev_count) return -1;
    for (cl_uint i = 0; i < n; i++)
      if (ids[i] != dev_ids[i]) return -1;
    return dev_arm;
  }
  if (n < 2 || n > MAX_DEVICES || !load_clGetDeviceInfo()) return -1;
  uint64_t h = exe_digest();
  for (cl_uint i = 0; i < n; i++) {
    dev_names[i][0] = 0;
    if (real_clGetDeviceInfo(ids[i], CL_DEVICE_NAME, sizeof dev_names[i] - 1, dev_names[i],
                             NULL) != CL_SUCCESS)
      return -1;
    for (char *c = dev_names[i]; *c; c++)
      if (*c == '\t' || *c == '\n' || *c == ';' || *c == ':') *c = ' ';
    h = fnv64(dev_names[i], fnv64("\x01", h));
    dev_ids[i] = ids[i];
  }
  struct state *s = calloc(1, sizeof *s);
  if (!s) return -1;
  snprintf(dev_key, sizeof dev_key, "cldev-%016llx", (unsigned long long)h);
  snprintf(dev_label, sizeof dev_label, "the OpenCL device of %s",
           program_invocation_short_name);
  s->key = dev_key;
  s->name = dev_label;
  s->last = -1;
  s->narm = (int)n;
  for (int c = 0; c < MAX_CELLS; c++)
    for (cl_uint i = 0; i < n; i++) {
      snprintf(s->cell[c].arm[i].name, NAME_LEN, i ? "dev-%08x" : "default", fnv(dev_names[i]));
      s->cell[c].arm[i].factor = 1;
    }
  restore(s);
  struct cell *c = cell_for(s, 0);
  if (!c) {
    free(s);
    return -1;
  }
  if (!c->invocations) c->next_default = 1;   /* the first run: the program's own */
  c->across = 1;   /* one device per run */
  c->rare = 0;
  s->next = states;
  states = s;
  dev_state = s;
  dev_cell = c;
  dev_count = (int)n;
  dev_arm = choose(s, c);
  c->invocations++;
  c->dirty = 1;
  clock_gettime(CLOCK_MONOTONIC, &dev_t0);
  atexit(device_done);   /* registered after the store's save: runs before it */
  return dev_arm;
}

cl_int clGetDeviceIDs(void *platform, cl_ulong type, cl_uint num, cl_device_id *devices,
                      cl_uint *found) {
  if (!load_clGetDeviceIDs()) return -30;
  ensure_initialised();
  /* an invalid call (entries without an array, or the reverse, or nowhere
     to answer) gets the platform's own error */
  if (off_all || !device_confirm || (num == 0) != (devices == NULL) || (!devices && !found))
    return real_clGetDeviceIDs(platform, type, num, devices, found);
  /* every device of the type asked for (the default type: any device) */
  cl_ulong want = type == CL_DEVICE_TYPE_DEFAULT ? CL_DEVICE_TYPE_ALL : type;
  cl_device_id ids[MAX_DEVICES];
  cl_uint n = 0;
  if (real_clGetDeviceIDs(platform, want, 0, NULL, &n) != CL_SUCCESS || n < 2 ||
      n > MAX_DEVICES || real_clGetDeviceIDs(platform, want, n, ids, NULL) != CL_SUCCESS)
    return real_clGetDeviceIDs(platform, type, num, devices, found);
  pthread_mutex_lock(&lock);
  int arm = device_for(n, ids);
  pthread_mutex_unlock(&lock);
  if (arm < 0) return real_clGetDeviceIDs(platform, type, num, devices, found);
  /* this run's device first, the others in the platform's order */
  cl_device_id order[MAX_DEVICES];
  cl_uint m = 0;
  order[m++] = ids[arm];
  for (cl_uint i = 0; i < n; i++)
    if ((int)i != arm) order[m++] = ids[i];
  cl_uint give = type == CL_DEVICE_TYPE_DEFAULT ? 1 : n;
  if (found) *found = give;
  for (cl_uint i = 0; devices && i < num && i < give; i++) devices[i] = order[i];
  return CL_SUCCESS;
}

/* ------------------------------------------------------------- the record */

static void write_record(void) {
  pthread_mutex_lock(&lock);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", record_path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    pthread_mutex_unlock(&lock);
    warn("cannot write the record %s: %s", record_path, strerror(errno));
    return;
  }
  if (forced < 0) fprintf(f, "# mirecc-opencl record 1 forced=all\n");
  else if (forced) fprintf(f, "# mirecc-opencl record 1 forced=%d\n", forced);
  else fprintf(f, "# mirecc-opencl record 1\n");
  fprintf(f, "kernel\tdevice\tbucket\tlaunches\tphase\tkept\tgain\tarms\tnote\n");
  if (dev_state && dev_cell) {
    /* the device row: launches are runs, arms the devices (d0: the program's own) */
    struct cell *c = dev_cell;
    const char *phase = c->phase == EXPLOIT ? "decided" : "exploring";
    double base = count(&c->arm[0]) ? median(&c->arm[0]) : 0;
    double kept = count(&c->arm[c->best]) ? median(&c->arm[c->best]) : 0;
    fprintf(f, "(device)\t%s\t0\t%d\t%s\t%s\t", dev_names[dev_arm], c->invocations > 0 ?
            (int)c->invocations : 0, phase, dev_names[c->best]);
    if (base > 0 && kept > 0) fprintf(f, "%.4f\t", base / kept);
    else fprintf(f, "-\t");
    for (int a = 0; a < dev_state->narm; a++) {
      struct arm *r = &c->arm[a];
      fprintf(f, "%sd%d=%s:%d:%.9g", a ? ";" : "", a, dev_names[a], r->n,
              count(r) ? median(r) : 0.0);
      if (r->dropped) fputs(":dropped", f);
      if (r->kept) fputs(":kept", f);
    }
    fprintf(f, "\twall time per run, from the program's device request to exit\n");
  }
  for (struct prog *p = progs; p; p = p->next)
    for (struct planned *k = p->kernels; k; k = k->next) {
      if (!k->accepted || !k->state) {
        fprintf(f, "%s\t%s\t-\t%lld\t%s\tf1\t1\t-\t%s\n", k->name, p->device,
                (long long)k->launches, k->accepted ? "not launched" : "refused", k->why);
        continue;
      }
      struct state *s = k->state;
      for (int i = 0; i < s->ncell; i++) {
        struct cell *c = &s->cell[i];
        const char *phase = forced ? "forced" : c->phase == EXPLOIT ? "decided"
                            : c->phase == SHORT ? "too short" : "exploring";
        int best = forced ? 0 : c->best;
        for (int a = 0; a < s->narm; a++) {
          if (forced > 0 && c->arm[a].factor == forced) best = a;
          if (forced < 0 && count(&c->arm[a]) &&
              (!count(&c->arm[best]) || median(&c->arm[a]) < median(&c->arm[best])))
            best = a;
        }
        double base = count(&c->arm[0]) ? median(&c->arm[0]) : 0;
        double kept = count(&c->arm[best]) ? median(&c->arm[best]) : 0;
        fprintf(f, "%s\t%s\t%d\t%lld\t%s\tf%d\t", k->name, p->device, c->bucket,
                (long long)c->invocations, phase, c->arm[best].factor);
        if (base > 0 && kept > 0) fprintf(f, "%.4f\t", base / kept);
        else fprintf(f, "-\t");
        for (int a = 0; a < s->narm; a++) {
          struct arm *r = &c->arm[a];
          fprintf(f, "%sf%d:%d:%.9g", a ? ";" : "", r->factor, r->n,
                  count(r) ? median(r) : 0.0);
          if (r->dropped) fputs(":dropped", f);
          if (r->kept) fputs(":kept", f);
        }
        fprintf(f, "\t%s\n", k->why);
      }
    }
  int bad = fclose(f);
  if (bad || rename(tmp, record_path)) {
    unlink(tmp);
    warn("cannot write the record %s: %s", record_path, strerror(errno));
  }
  pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------- entries */

cl_command_queue clCreateCommandQueue(cl_context ctx, cl_device_id dev,
                                      cl_command_queue_properties props, cl_int *err) {
  if (!load_clCreateCommandQueue()) {
    if (err) *err = -30;
    return NULL;
  }
  ensure_initialised();
  if (!off_all && timing) props |= CL_QUEUE_PROFILING_ENABLE;
  return real_clCreateCommandQueue(ctx, dev, props, err);
}

cl_command_queue clCreateCommandQueueWithProperties(cl_context ctx, cl_device_id dev,
                                                    const cl_queue_properties *props,
                                                    cl_int *err) {
  if (!load_clCreateCommandQueueWithProperties()) {
    if (err) *err = -30;
    return NULL;
  }
  ensure_initialised();
  if (off_all || !timing) return real_clCreateCommandQueueWithProperties(ctx, dev, props, err);
  cl_queue_properties mine[64];
  int n = 0, found = 0;
  for (const cl_queue_properties *p = props; p && p[0] && n < 60; p += 2) {
    mine[n++] = p[0];
    mine[n++] = p[0] == CL_QUEUE_PROPERTIES ? (found = 1, p[1] | CL_QUEUE_PROFILING_ENABLE)
                                            : p[1];
  }
  if (!found) {
    mine[n++] = CL_QUEUE_PROPERTIES;
    mine[n++] = CL_QUEUE_PROFILING_ENABLE;
  }
  mine[n] = 0;
  return real_clCreateCommandQueueWithProperties(ctx, dev, mine, err);
}

cl_program clCreateProgramWithSource(cl_context ctx, cl_uint count, const char **strings,
                                     const size_t *lengths, cl_int *err) {
  if (!load_clCreateProgramWithSource()) {
    if (err) *err = -30;
    return NULL;
  }
  cl_program program = real_clCreateProgramWithSource(ctx, count, strings, lengths, err);
  ensure_initialised();
  if (!program || off_all || !strings) return program;
  size_t total = 1;
  for (cl_uint i = 0; i < count; i++)
    total += strings[i] ? (lengths && lengths[i] ? lengths[i] : strlen(strings[i])) : 0;
  struct prog *p = calloc(1, sizeof *p);
  char *source = malloc(total);
  if (!p || !source) {
    free(p);
    free(source);
    return program;
  }
  size_t at = 0;
  for (cl_uint i = 0; i < count; i++) {
    if (!strings[i]) continue;
    size_t len = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
    memcpy(source + at, strings[i], len);
    at += len;
  }
  source[at] = 0;
  p->program = program;
  p->context = ctx;
  p->source = source;
  pthread_mutex_lock(&lock);
  p->next = progs;
  progs = p;
  pthread_mutex_unlock(&lock);
  return program;
}

static struct prog *prog_of(cl_program program) {
  for (struct prog *p = progs; p; p = p->next)
    if (p->program == program) return p;
  return NULL;
}

cl_int clBuildProgram(cl_program program, cl_uint ndev, const cl_device_id *devs,
                      const char *options, build_notify *notify, void *data) {
  if (!load_clBuildProgram()) return -30;
  cl_int rc = real_clBuildProgram(program, ndev, devs, options, notify, data);
  if (rc != CL_SUCCESS || off_all) return rc;
  pthread_mutex_lock(&lock);
  struct prog *p = prog_of(program);
  if (p && !p->planned && load_clCreateProgramWithSource()) plan(p, ndev, devs, options);
  pthread_mutex_unlock(&lock);
  return rc;
}

cl_kernel clCreateKernel(cl_program program, const char *name, cl_int *err) {
  if (!load_clCreateKernel()) {
    if (err) *err = -30;
    return NULL;
  }
  cl_kernel kernel = real_clCreateKernel(program, name, err);
  if (!kernel || off_all || !name) return kernel;
  pthread_mutex_lock(&lock);
  struct prog *p = prog_of(program);
  struct planned *k = NULL;
  for (struct planned *q = p ? p->kernels : NULL; q; q = q->next)
    if (!strcmp(q->name, name)) k = q;
  if (k) {
    struct kern *e = calloc(1, sizeof *e);
    if (e) {
      e->kernel = kernel;
      e->prog = p;
      e->plan = k;
      e->next = kerns;
      kerns = e;
    }
  }
  pthread_mutex_unlock(&lock);
  return kernel;
}

static struct kern *kern_of(cl_kernel kernel) {
  for (struct kern *e = kerns; e; e = e->next)
    if (e->kernel == kernel) return e;
  return NULL;
}

cl_int clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size, const void *value) {
  if (!load_clSetKernelArg()) return -30;
  cl_int rc = real_clSetKernelArg(kernel, index, size, value);
  if (rc != CL_SUCCESS || off_all) return rc;
  pthread_mutex_lock(&lock);
  struct kern *e = kern_of(kernel);
  if (e) {
    if (index >= MAX_ARGS || !value) {
      e->off = 1;   /* local memory, or more arguments than kept: factor 1 */
    } else {
      void *copy = e->arg_size[index] == size ? e->arg[index] : realloc(e->arg[index], size);
      if (!copy) {
        e->off = 1;
      } else {
        memcpy(copy, value, size);
        e->arg[index] = copy;
        e->arg_size[index] = size;
        if ((int)index >= e->nargs) e->nargs = (int)index + 1;
        e->gen++;
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Under `lock`: the variant for arm `arm`'s factor, its arguments current. */
static cl_kernel variant(struct kern *e, int arm_index, int factor) {
  int v = arm_index - 1;
  if (v < 0 || v >= MAX_FACTORS || !e->prog->coarse) return NULL;
  if (!e->variant[v]) {
    char name[160];
    snprintf(name, sizeof name, "%s__mirecc_f%d", e->plan->name, factor);
    cl_int err = 0;
    e->variant[v] = real_clCreateKernel(e->prog->coarse, name, &err);
    if (!e->variant[v] || err) {
      e->variant[v] = NULL;
      return NULL;
    }
    e->variant_gen[v] = e->gen - 1;
  }
  if (e->variant_gen[v] != e->gen) {
    for (int i = 0; i < e->nargs; i++)
      if (!e->arg[i] || real_clSetKernelArg(e->variant[v], (cl_uint)i, e->arg_size[i],
                                            e->arg[i]) != CL_SUCCESS)
        return NULL;
    e->variant_gen[v] = e->gen;
  }
  return e->variant[v];
}

cl_int clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims,
                              const size_t *offset, const size_t *global, const size_t *local,
                              cl_uint nwait, const cl_event *wait, cl_event *event) {
  if (!load_clEnqueueNDRangeKernel()) return -30;
  if (off_all || !global || !dims || dims > 3)
    return real_clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local, nwait, wait,
                                       event);
  pthread_mutex_lock(&lock);
  struct kern *e = kern_of(kernel);
  struct planned *k = e ? e->plan : NULL;
  struct state *s = k && k->accepted && !e->off ? state_for(k) : NULL;
  if (!s || s->busy || !load_clGetEventInfo() || !load_clGetEventProfilingInfo() ||
      !load_clReleaseEvent() || !load_clRetainEvent()) {
    if (k) k->launches++;
    pthread_mutex_unlock(&lock);
    return real_clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local, nwait, wait,
                                       event);
  }
  k->launches++;
  s->busy = 1;
  collect(k);
  int busy_timing = k->npending == MAX_PENDING;
  struct cell *c = cell_for(s, launch_bucket(dims, global));
  int arm = 0, quiet = 1;
  if (c) {
    if (forced < 0) {
      arm = (int)(c->invocations % s->narm);
      quiet = 0;
    } else if (forced) {
      for (int a = 0; a < s->narm; a++)
        if (s->cell[0].arm[a].factor == forced) arm = a;
      quiet = 0;
    } else {
      quiet = c->phase == SHORT ||
              (c->phase == EXPLOIT && c->invocations < c->next_check &&
               (c->invocations & 15) != 15);
      /* no event slot left to time it: not a candidate's launch */
      arm = busy_timing && c->phase == EXPLORE ? c->best : choose(s, c);
    }
    quiet |= busy_timing;
  }
  int d = k->dim, f = c ? c->arm[arm].factor : 1;
  cl_kernel run = kernel;
  size_t g[3], l[3];
  if (f > 1) {
    /* the factor must divide the launch along d (and the local size given) */
    int fits = (cl_uint)d < dims && global[d] % (size_t)f == 0 &&
               (local ? local[d] % (size_t)f == 0 : !k->needs_local);
    cl_kernel v = fits ? variant(e, arm, f) : NULL;
    if (v) {
      for (cl_uint i = 0; i < dims; i++) {
        g[i] = global[i];
        l[i] = local ? local[i] : 0;
      }
      g[d] /= (size_t)f;
      l[d] /= (size_t)f;
      run = v;
    } else {
      arm = 0;   /* not this launch: the program's own, untimed for the factor */
      f = 1;
      quiet = 1;
    }
  }
  pthread_mutex_unlock(&lock);

  cl_event mine = NULL;
  cl_event *ev = event ? event : (quiet ? NULL : &mine);
  cl_int rc = run == kernel
                  ? real_clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local,
                                                nwait, wait, ev)
                  : real_clEnqueueNDRangeKernel(queue, run, dims, offset, g, local ? l : NULL,
                                                nwait, wait, ev);
  if (rc != CL_SUCCESS && run != kernel) {
    /* the coarsened launch failed: the program's own, and no more factors */
    pthread_mutex_lock(&lock);
    k->accepted = 0;
    snprintf(k->why, sizeof k->why, "a coarsened launch failed (error %d)", (int)rc);
    s->busy = 0;
    pthread_mutex_unlock(&lock);
    warn("a coarsened launch of %s failed; the program's own kernel runs%s", k->name, "");
    return real_clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local, nwait, wait,
                                       event);
  }
  pthread_mutex_lock(&lock);
  if (c && rc == CL_SUCCESS) {
    if (f > 1) k->coarsened++;
    if (arm < 32) c->started |= 1u << arm;
    if (ev && !quiet) {   /* read at a later launch: the program is not made to wait */
      if (ev == event) real_clRetainEvent(*ev);
      k->pending[k->npending] = *ev;
      k->pending_cell[k->npending] = c;
      k->pending_arm[k->npending++] = arm;
      c->inflight[arm]++;
      mine = NULL;
    }
    c->invocations++;
    c->dirty = !forced;
  }
  if (mine) real_clReleaseEvent(mine);
  s->busy = 0;
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Where the program waits for its work, the launches it waited for are read. */
static void collect_waited(void) {
  pthread_mutex_lock(&lock);
  collect_all();
  pthread_mutex_unlock(&lock);
}

cl_int clFinish(cl_command_queue queue) {
  if (!load_clFinish()) return -30;
  cl_int rc = real_clFinish(queue);
  if (off_all) return rc;
  collect_waited();
  return rc;
}

cl_int clWaitForEvents(cl_uint n, const cl_event *events) {
  if (!load_clWaitForEvents()) return -30;
  cl_int rc = real_clWaitForEvents(n, events);
  if (off_all) return rc;
  collect_waited();
  return rc;
}

cl_int clEnqueueReadBuffer(cl_command_queue queue, void *buffer, cl_uint blocking, size_t offset,
                           size_t size, void *ptr, cl_uint nwait, const cl_event *wait,
                           cl_event *event) {
  if (!load_clEnqueueReadBuffer()) return -30;
  cl_int rc = real_clEnqueueReadBuffer(queue, buffer, blocking, offset, size, ptr, nwait, wait,
                                       event);
  if (off_all || !blocking) return rc;
  collect_waited();
  return rc;
}

cl_int clReleaseKernel(cl_kernel kernel) {
  if (!load_clReleaseKernel()) return -30;
  if (!off_all && load_clGetKernelInfo()) {
    cl_uint refs = 0;
    pthread_mutex_lock(&lock);
    struct kern **at = &kerns;
    while (*at && (*at)->kernel != kernel) at = &(*at)->next;
    if (*at && real_clGetKernelInfo(kernel, CL_KERNEL_REFERENCE_COUNT, sizeof refs, &refs,
                                    NULL) == CL_SUCCESS && refs == 1) {
      struct kern *e = *at;   /* its last reference: the handle may come back */
      *at = e->next;
      for (int i = 0; i < MAX_FACTORS; i++)
        if (e->variant[i]) real_clReleaseKernel(e->variant[i]);
      for (int i = 0; i < MAX_ARGS; i++) free(e->arg[i]);
      free(e);
    }
    pthread_mutex_unlock(&lock);
  }
  return real_clReleaseKernel(kernel);
}

cl_int clReleaseProgram(cl_program program) {
  if (!load_clReleaseProgram()) return -30;
  if (!off_all && load_clGetProgramInfo()) {
    cl_uint refs = 0;
    pthread_mutex_lock(&lock);
    struct prog *p = prog_of(program);
    if (p && real_clGetProgramInfo(program, CL_PROGRAM_REFERENCE_COUNT, sizeof refs, &refs,
                                   NULL) == CL_SUCCESS && refs == 1)
      p->program = NULL;   /* kept for the record and the store; the handle may come back */
    pthread_mutex_unlock(&lock);
  }
  return real_clReleaseProgram(program);
}
