/* mirecc-adapt: the adaptive runtime (README.md beside this file): OpenMP
 * regions (adapt_openmp) and functions compiled in versions (adapt_loops).
 *
 * The pass plugin turns each parallel region of a TU compiled with
 * adapt_openmp into a site: a private `struct site` in the object, a call to
 * __mirecc_adapt_begin before the fork and to __mirecc_adapt_end after it.
 * begin() picks this invocation's configuration among the site's arms (arm 0:
 * the program's own, all threads and the source's schedules; arms 1..: the
 * head's candidates in its order), pushes its team size and sets the schedule
 * the region's rewritten loops read; end() times the region on the master
 * thread and applies the policy:
 *
 *   explore: the candidates in order, alternating with the reference (the
 *            default, then the last candidate kept); a candidate clearly
 *            slower is dropped at once; after PAIRS samples one is kept only
 *            when it beats the reference beyond the noise measured in the
 *            same run (mirecc.learn.keep.beats) and becomes the reference;
 *            the time lost to slower candidates is bounded by a share of
 *            the site's time (MIRECC_ADAPT_BUDGET);
 *   exploit: the last candidate kept (or the default), with the default
 *            re-checked at invocations 2^k.
 *
 * Verdicts and samples persist per user and machine in a text store (read
 * once at the first site, merged back at exit under a lock, atomically).
 *
 * A function in versions (the plugin's "versions") calls
 * __mirecc_version_begin at its entry, runs the version it names (arm 0:
 * LLVM's own compile of the function) and calls __mirecc_adapt_end after:
 * the same policy and store, one arm per version.
 *
 * Depends on libc and on the OpenMP runtime it wraps (libomp, weakly: a
 * program with OpenMP sites links it already).  Fails open: anything
 * unexpected leaves the program's own configuration, with one line on
 * stderr at most per process.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>

typedef struct ident ident_t;
/* weak: a program whose only sites are function versions (adapt_loops)
   need not link an OpenMP runtime; an OpenMP site's program has one */
extern int32_t __kmpc_global_thread_num(ident_t *loc) __attribute__((weak));
extern void __kmpc_push_num_threads(ident_t *loc, int32_t gtid, int32_t n)
    __attribute__((weak));
extern int omp_get_max_threads(void) __attribute__((weak));

#define SITE_VERSION 1
#define FLAG_REWRITTEN 1    /* the site has a copy whose loops read sched/chunk */
#define FLAG_TEAM_FIXED 2   /* the source fixes the team size */
#define FLAG_VERSIONS 4     /* a function's versions: each candidate a version */
#define TOKEN_COPY 0x10000  /* begin(): run the rewritten copy */
#define TOKEN_QUIET 0x20000 /* begin(): nothing to learn from timing this one */
#define TOKEN_VERSION_SHIFT 24  /* __mirecc_version_begin(): the version to run */

/* Emitted by the plugin (passes/plugin/FORMAT.md, "Adaptive sites"). */
struct site {
  int32_t version;
  int32_t flags;
  const char *key;    /* the region's code digest */
  const char *name;   /* "<source>:<line> <region id>" */
  const char *cands;  /* candidates, space-separated, in the head's order */
  int32_t sched;      /* this invocation's schedule for the rewritten loops */
  int32_t chunk;
  int64_t trip;       /* the last worksharing loop's trip count */
  void *state;
};

enum { SCH_STATIC_CHUNKED = 33, SCH_DYNAMIC = 35, SCH_GUIDED = 36 };
#define ENGINE_NAME "mirecc-adapt"
#include "../common/mirecc_engine.h"

static int max_threads, order_mode;
static int omp_user;   /* OMP_NUM_THREADS / OMP_SCHEDULE set: OpenMP sites left alone */
static unsigned rng = 12345u;

static void settle(struct state *s);

/* Under `lock`. */
static void initialise(void) {
  initialised = 1;
  settle_hook = settle;
  const char *v = getenv("MIRECC_ADAPT");
  if (v && !strcmp(v, "0")) {
    disabled = 1;
    return;
  }
  /* the user's own OpenMP configuration wins (over OpenMP sites only) */
  omp_user = getenv("OMP_NUM_THREADS") || getenv("OMP_SCHEDULE");
  max_threads = omp_get_max_threads ? omp_get_max_threads() : 1;
  if (max_threads < 1) max_threads = 1;
  batch_short = 1;
  /* for experiments: head (default), fixed (by name: no model), random:SEED */
  v = getenv("MIRECC_ADAPT_ORDER");
  if (v && !strcmp(v, "fixed")) order_mode = 1;
  if (v && !strncmp(v, "random:", 7)) {
    order_mode = 2;
    rng = (unsigned)strtoul(v + 7, NULL, 10) * 2654435761u + 1u;
  }
  /* the machine, not what the program set before its first region: the
     cores this process may run on */
  cpu_set_t cpus;
  int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  engine_configure(cores > 0 ? cores : max_threads);
}

/* ------------------------------------------------------------- arms */

static int parse_arm(const char *text, struct arm *a, int flags, int index) {
  if (flags & FLAG_VERSIONS) {
    /* a version: named by the plugin, told apart by its index */
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", text);
    a->factor = index;
    return strcspn(text, ": \t;,") == strlen(text);
  }
  char share[16], sched[16], chunk[16];
  if (sscanf(text, "%15[a-z]-%15[a-z]-%15[a-z0-9]", share, sched, chunk) != 3) return 0;
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s-%s-%s", share, sched, chunk);
  int n;
  if (!strcmp(share, "one")) n = 1;
  else if (!strcmp(share, "quarter")) n = max_threads / 4;
  else if (!strcmp(share, "half")) n = max_threads / 2;
  else if (!strcmp(share, "all")) n = max_threads;
  else return 0;
  if (n < 1) n = 1;
  a->threads = (n == max_threads || (flags & FLAG_TEAM_FIXED)) ? 0 : n;
  long c = 0;
  if (strcmp(chunk, "default")) {
    char *end;
    c = strtol(chunk, &end, 10);
    if (*end || c < 1 || c > 1 << 30) return 0;
  }
  if (!strcmp(sched, "static")) {
    a->sched = c ? SCH_STATIC_CHUNKED : 0;
  } else if (!strcmp(sched, "dynamic")) {
    a->sched = SCH_DYNAMIC;
  } else if (!strcmp(sched, "guided")) {
    a->sched = SCH_GUIDED;
  } else {
    return 0;
  }
  a->chunk = a->sched ? (c ? (int32_t)c : 1) : 0;
  /* one thread runs every iteration whatever the schedule */
  if (!(flags & FLAG_REWRITTEN) || n == 1) a->sched = a->chunk = 0;
  return 1;
}

/* The site's arms: the default, then each candidate that configures
 * something else on this machine (same team size and loops: dropped). */
static int make_arms(struct state *s) {
  struct arm arms[MAX_ARMS];
  memset(&arms[0], 0, sizeof arms[0]);
  snprintf(arms[0].name, NAME_LEN, "default");
  int n = 1, index = 0;
  const char *p = ((struct site *)s->owner)->cands;
  while (p && *p && n < MAX_ARMS) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    char token[NAME_LEN];
    if (len < sizeof token) {
      memcpy(token, p, len);
      token[len] = 0;
      struct arm a;
      if (parse_arm(token, &a, ((struct site *)s->owner)->flags, ++index)) {
        int same = 0;
        for (int i = 0; i < n; i++)
          same |= arms[i].threads == a.threads && arms[i].sched == a.sched &&
                  arms[i].chunk == a.chunk && arms[i].factor == a.factor;
        if (!same) arms[n++] = a;
      }
    }
    p += len;
  }
  if (order_mode == 1) {
    for (int i = 2; i < n; i++)
      for (int j = i; j > 1 && strcmp(arms[j - 1].name, arms[j].name) > 0; j--) {
        struct arm t = arms[j];
        arms[j] = arms[j - 1];
        arms[j - 1] = t;
      }
  } else if (order_mode == 2) {
    for (int i = n - 1; i > 1; i--) {
      rng = rng * 1103515245u + 12345u;
      int j = 1 + (int)((rng >> 8) % (unsigned)i);
      struct arm t = arms[i];
      arms[i] = arms[j];
      arms[j] = t;
    }
  }
  s->narm = n;
  for (int c = 0; c < MAX_CELLS; c++)
    for (int i = 0; i < n; i++) s->cell[c].arm[i] = arms[i];
  return n;
}


/* ------------------------------------------------------------- entries */

static struct state *state_of(struct site *site) {
  struct state *s = __atomic_load_n((struct state **)&site->state, __ATOMIC_ACQUIRE);
  if (s) return s;
  pthread_mutex_lock(&lock);
  if (!initialised) initialise();
  s = site->state;
  if (!s) {
    if (disabled || site->version != SITE_VERSION || !site->key || !site->cands ||
        (omp_user && !(site->flags & FLAG_VERSIONS))) {
      s = (struct state *)&disabled;   /* any non-NULL that is not a state */
    } else {
      s = calloc(1, sizeof *s);
      if (!s) {
        s = (struct state *)&disabled;
      } else {
        s->owner = site;
        s->key = site->key;
        s->name = site->name;
        s->last = -1;
        make_arms(s);
        restore(s);
        if (s->ncell) s->last = 0;
        s->next = states;
        states = s;
      }
    }
    __atomic_store_n((struct state **)&site->state, s, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&lock);
  return s;
}

/* A function's versions: the calls its dispatch ran on the fast path since
   the last grant, counted; the fast path closed. */
static void settle(struct state *s) {
  if (!s->granted) return;
  struct site *site = s->owner;
  __atomic_store_n(&site->sched, 0, __ATOMIC_RELAXED);
  int32_t left = __atomic_load_n(&site->chunk, __ATOMIC_RELAXED);
  int64_t used = s->granted - (left > 0 ? left : 0);
  struct cell *c = &s->cell[s->granted_cell];
  if (used > 0) {
    c->invocations += used;
    c->this_run += (int32_t)used;
    c->dirty = 1;
    if (c->bucket >= 0 && c->bucket < MAX_BUCKETS) s->seen[c->bucket] += used;
  }
  s->granted = 0;
}

/* A function's versions, decided for this input size with no re-check due:
   the next calls, up to the one before the re-check, run the kept version
   from the dispatch's fast path (the descriptor's sched: the version + 1;
   chunk: the calls left), without calling the runtime. */
static void grant(struct state *s, struct site *site, const struct arm *a) {
  if (s->last < 0) return;
  struct cell *c = &s->cell[s->last];
  int64_t trip = __atomic_load_n(&site->trip, __ATOMIC_RELAXED);
  if (c->phase != EXPLOIT || c->batch_left > 0 || c->bucket != (trip < 0 ? -1 : bucket_of(trip)))
    return;
  int64_t n = c->next_check - c->invocations - 2;   /* this call is counted at its end */
  if (n < 16) return;
  if (n > 1 << 30) n = 1 << 30;
  s->granted = n;
  s->granted_cell = s->last;
  __atomic_store_n(&site->chunk, (int32_t)n, __ATOMIC_RELAXED);
  __atomic_store_n(&site->sched, (a->factor & 0x7f) + 1, __ATOMIC_RELEASE);
}

static int32_t begin(struct site *site, ident_t *loc, int versions) {
  struct state *s = state_of(site);
  if (s == (struct state *)&disabled || s->narm < 2) return 0;
  if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE)) return 0;  /* nested or concurrent */
  if (versions) settle(s);
  if (s->last < 0) {
    struct cell *c = cell_for(s, -1);  /* bucket unknown until the first invocation */
    s->last = c ? (int)(c - s->cell) : -1;
  }
  int arm = 0, quiet = 0;
  if (s->last >= 0) {
    struct cell *c = &s->cell[s->last];
    /* decided (one invocation in 16 still timed, or a batch at each
       re-check) or too short: not timed */
    int due = c->phase == EXPLOIT && c->invocations >= c->next_check;
    arm = choose(s, c);
    quiet = !timed(c, due);
  }
  struct arm *a = &s->cell[s->last >= 0 ? s->last : 0].arm[arm];
  /* the program set its own team size (omp_set_num_threads, in a TU the
     compile could not see): its choice stands, nothing is timed */
  if (a->threads && (!omp_get_max_threads || omp_get_max_threads() != max_threads)) {
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    return 0;
  }
  if (a->threads && __kmpc_push_num_threads && __kmpc_global_thread_num)
    __kmpc_push_num_threads(loc, __kmpc_global_thread_num(loc), a->threads);
  /* the descriptor is read by every thread of the team: written only when
     it changes, so that its cache line stays shared (as the region's trip
     count, which the region stores only when it changed: the last
     worksharing loop's, this invocation's or an earlier one's) */
  if (site->sched != a->sched) site->sched = a->sched;
  if (site->chunk != a->chunk) site->chunk = a->chunk;
  s->running = arm;
  s->running_cell = s->last;
  if (versions && quiet) grant(s, site, a);
  if (quiet) return (arm + 1) | (a->sched ? TOKEN_COPY : 0) | TOKEN_QUIET;
  clock_gettime(CLOCK_MONOTONIC, &s->t0);
  return (arm + 1) | (a->sched ? TOKEN_COPY : 0);
}

int32_t __mirecc_adapt_begin(struct site *site, ident_t *loc) { return begin(site, loc, 0); }

void __mirecc_adapt_end(struct site *site, int32_t token) {
  if (!token) return;
  struct state *s = site->state;
  double t = 0;
  if (!(token & TOKEN_QUIET)) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    t = (double)(t1.tv_sec - s->t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - s->t0.tv_nsec);
  }
  int64_t trip = __atomic_load_n(&site->trip, __ATOMIC_RELAXED);
  int bucket = trip < 0 ? -1 : bucket_of(trip);
  if (bucket >= 0) s->seen[bucket]++;
  struct cell *c = s->running_cell >= 0 ? &s->cell[s->running_cell] : NULL;
  if (c && c->bucket == -1 && bucket >= 0 && c->invocations == 0) {
    c->bucket = bucket;  /* the first invocation names the first cell's bucket */
  }
  if (c && c->bucket == bucket) {
    /* the first invocation in a run starts the threads: not a sample,
       except where one arm runs per run (across runs) */
    if ((c->this_run++ > 0 || c->across) && !(token & TOKEN_QUIET)) sample(c, s->running, t);
    c->invocations++;
    c->dirty = 1;
  } else {
    /* another input size than the last invocation: its own cell, chosen
       for the next invocation; this sample belongs to neither */
    struct cell *other = cell_for(s, bucket);
    if (other) s->last = (int)(other - s->cell);
  }
  __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

/* A function's versions (the plugin's "versions" entries, adapt_loops): the
 * function's entry calls this and runs the version in the token's bits
 * 24..30 (0: LLVM's own), then passes the token to __mirecc_adapt_end.  The
 * site's `trip` holds the call's size (its largest integer argument).  Once
 * the function is decided for that size, the runtime hands the dispatch the
 * calls up to the next re-check (sched: the version + 1, chunk: the calls
 * left), which it runs without calling in; a new size closes that path. */
int32_t __mirecc_version_begin(struct site *site) {
  int32_t token = begin(site, NULL, 1);
  if (!token) return 0;
  struct state *s = site->state;
  const struct arm *a = &s->cell[s->running_cell >= 0 ? s->running_cell : 0].arm[s->running];
  return token | (a->factor & 0x7f) << TOKEN_VERSION_SHIFT;
}

/* A function's versions, before main: each object's constructor hands its
 * sites here (the plugin's ".mirecc.versions.prepare"), so that the
 * settings, the store and the site's state are read and set up at the
 * program's start, not in the function's first call (timed, perhaps, and
 * with cold caches). */
void __mirecc_version_prepare(struct site *site) {
  if (site) state_of(site);
}
