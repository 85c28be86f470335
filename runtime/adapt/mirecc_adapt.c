/* mirecc-adapt: the adaptive OpenMP runtime (README.md beside this file).
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
 * Depends on libc and on the OpenMP runtime it wraps (libomp: the program
 * links it already).  Fails open: anything unexpected leaves the program's
 * own configuration, with one line on stderr at most per process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct ident ident_t;
extern int32_t __kmpc_global_thread_num(ident_t *loc);
extern void __kmpc_push_num_threads(ident_t *loc, int32_t gtid, int32_t n);
extern int omp_get_max_threads(void);

#define SITE_VERSION 1
#define FLAG_REWRITTEN 1    /* the site has a copy whose loops read sched/chunk */
#define FLAG_TEAM_FIXED 2   /* the source fixes the team size */
#define TOKEN_COPY 0x10000  /* begin(): run the rewritten copy */
#define TOKEN_QUIET 0x20000 /* begin(): nothing to learn from timing this one */

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
enum { EXPLORE = 0, EXPLOIT = 1, SHORT = 2 };
#define MAX_ARMS 9
#define MAX_CELLS 4
#define SAMPLES 8
#define NAME_LEN 32

struct arm {
  char name[NAME_LEN];   /* "half-dynamic-64"; arm 0: "default" */
  int32_t threads;       /* 0: the runtime's team size */
  int32_t sched, chunk;  /* sched 0: the source's own loops */
  int32_t n;             /* samples ever recorded */
  int32_t dropped, kept;
  int64_t at;            /* the cell's invocation when it was kept or dropped */
  double t[SAMPLES];     /* the last SAMPLES, seconds */
};

struct cell {            /* one trip-count bucket of a site */
  int32_t bucket, phase, best, cur, next_default, across, rare;
  int32_t run_done;      /* across runs: this run's candidate has its verdict */
  int64_t invocations, decided_at, next_check;
  int32_t runs, decided_runs, dirty, this_run;
  double total, lost;
  struct arm arm[MAX_ARMS];
};

struct state {
  struct site *site;
  int32_t narm, ncell, last, busy, running, running_cell;
  struct timespec t0;
  struct cell cell[MAX_CELLS];
  struct state *next;
};

/* ------------------------------------------------------------- settings */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised, disabled, warned, across_runs, order_mode;
static int max_threads;
static double budget = 0.03, min_seconds = 50e-6;
static int pairs = 4;
static const double THRESHOLD = 0.02;  /* mirecc.learn.keep.KEEP_THRESHOLD */
static char store_path[4096], machine[128];
static struct state *states;
static char *stored;        /* the store's lines at start */
static unsigned rng = 12345u;

static void warn(const char *fmt, const char *a, const char *b) {
  if (warned) return;
  warned = 1;
  fprintf(stderr, "mirecc-adapt: warning: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
}

static double env_double(const char *name, double dflt, double lo, double hi) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  double x = strtod(v, &end);
  if (*end || x < lo || x > hi) {
    warn("%s=%s is not a number in range; its default is used", name, v);
    return dflt;
  }
  return x;
}

static unsigned fnv(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static void cpu_model(char *out, size_t size) {
  snprintf(out, size, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) && strncmp(line, "Processor", 9)) continue;
    char *colon = strchr(line, ':');
    if (!colon) continue;
    colon++;
    while (*colon == ' ' || *colon == '\t') colon++;
    colon[strcspn(colon, "\n")] = 0;
    snprintf(out, size, "%s", colon);
    break;
  }
  fclose(f);
}

static void load_store(void);
static void save_store(void);

/* Under `lock`. */
static void initialise(void) {
  initialised = 1;
  const char *v = getenv("MIRECC_ADAPT");
  if ((v && !strcmp(v, "0")) || getenv("OMP_NUM_THREADS") || getenv("OMP_SCHEDULE")) {
    disabled = 1;   /* the user's own configuration wins */
    return;
  }
  max_threads = omp_get_max_threads();
  if (max_threads < 1) {
    disabled = 1;
    return;
  }
  budget = env_double("MIRECC_ADAPT_BUDGET", budget, 0.0, 1.0);
  min_seconds = env_double("MIRECC_ADAPT_MIN_US", min_seconds * 1e6, 0.0, 1e9) * 1e-6;
  pairs = (int)env_double("MIRECC_ADAPT_PAIRS", pairs, 2, SAMPLES);
  v = getenv("MIRECC_ADAPT_ACROSS_RUNS");
  across_runs = v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
  /* for experiments: head (default), fixed (by name: no model), random:SEED */
  v = getenv("MIRECC_ADAPT_ORDER");
  if (v && !strcmp(v, "fixed")) order_mode = 1;
  if (v && !strncmp(v, "random:", 7)) {
    order_mode = 2;
    rng = (unsigned)strtoul(v + 7, NULL, 10) * 2654435761u + 1u;
  }
  char model[256];
  cpu_model(model, sizeof model);
  const char *cap = getenv("MIRECC_POWER_CAP");
  snprintf(machine, sizeof machine, "c%d-%08x-p%s", max_threads, fnv(model),
           cap && *cap ? cap : "none");
  for (char *p = machine; *p; p++)
    if (*p == '/' || *p == ' ' || *p == '%' || *p == '\t') *p = '_';
  const char *path = getenv("MIRECC_ADAPT_STORE");
  if (path && *path) {
    snprintf(store_path, sizeof store_path, "%s", path);
  } else {
    const char *cache = getenv("MIRECC_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (cache && *cache)
      snprintf(store_path, sizeof store_path, "%s/adapt/%s.txt", cache, machine);
    else if (xdg && *xdg)
      snprintf(store_path, sizeof store_path, "%s/mirecc/adapt/%s.txt", xdg, machine);
    else if (home && *home)
      snprintf(store_path, sizeof store_path, "%s/.cache/mirecc/adapt/%s.txt", home, machine);
  }
  if (store_path[0]) {
    load_store();
    atexit(save_store);
  }
}

/* ------------------------------------------------------------- arms */

static int parse_arm(const char *text, struct arm *a, int flags) {
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
  int n = 1;
  const char *p = s->site->cands;
  while (p && *p && n < MAX_ARMS) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    char token[NAME_LEN];
    if (len < sizeof token) {
      memcpy(token, p, len);
      token[len] = 0;
      struct arm a;
      if (parse_arm(token, &a, s->site->flags)) {
        int same = 0;
        for (int i = 0; i < n; i++)
          same |= arms[i].threads == a.threads && arms[i].sched == a.sched &&
                  arms[i].chunk == a.chunk;
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

/* ------------------------------------------------------------- statistics */

static int count(const struct arm *a) { return a->n < SAMPLES ? a->n : SAMPLES; }

static double median(const struct arm *a) {
  int n = count(a);
  double v[SAMPLES];
  memcpy(v, a->t, sizeof v);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static double lowest(const struct arm *a) {
  double m = a->t[0];
  for (int i = 1; i < count(a); i++) m = a->t[i] < m ? a->t[i] : m;
  return m;
}

static double highest(const struct arm *a) {
  double m = a->t[0];
  for (int i = 1; i < count(a); i++) m = a->t[i] > m ? a->t[i] : m;
  return m;
}

/* mirecc.learn.keep.beats: faster beyond the noise of `base`. */
static int beats(const struct arm *c, const struct arm *base) {
  double mb = median(base);
  if (count(c) < 2 || count(base) < 2 || mb <= 0) return 0;
  double noise = (highest(base) - lowest(base)) / mb;
  double margin = 1 - (noise > THRESHOLD ? noise : THRESHOLD);
  return median(c) < mb * margin && lowest(c) < lowest(base) * margin &&
         highest(c) < mb * (1 - THRESHOLD);
}

static void add(struct arm *a, double t) { a->t[a->n++ % SAMPLES] = t; }

/* ------------------------------------------------------------- policy */

/* Every candidate has its verdict: the reference (the last one kept, else
   the default) is the site's. */
static void finish(struct cell *c) {
  c->phase = EXPLOIT;
  c->decided_at = c->invocations;
  c->decided_runs = c->runs;
  c->next_check = 64;
  while (c->next_check <= c->invocations) c->next_check *= 2;
}

/* The arm for the next invocation of cell `c`.  While exploring, the
   candidates alternate with the reference: the default, then the last
   candidate kept (each later one must beat it). */
static int choose(struct state *s, struct cell *c) {
  if (c->phase == SHORT) return 0;
  if (c->phase == EXPLOIT) {
    if (c->invocations >= c->next_check) {
      c->next_check *= 2;   /* past it, even where the default is the verdict */
      if (c->best) return 0;   /* a rare re-check of the default */
    }
    return c->best;
  }
  if (count(&c->arm[0]) >= 3 && median(&c->arm[0]) < min_seconds) {
    c->phase = SHORT;
    c->best = 0;
    c->dirty = 1;
    return 0;
  }
  while (c->cur < s->narm &&
         (c->cur == 0 || c->arm[c->cur].dropped || c->arm[c->cur].kept))
    c->cur++;
  if (c->cur >= s->narm) {
    finish(c);
    c->dirty = 1;
    return c->best;
  }
  if (c->rare) return c->best;
  /* across runs: this run's one arm, every invocation */
  if (c->across) return (c->next_default || c->run_done) ? c->best : c->cur;
  if (count(&c->arm[0]) < 3) return 0;
  if (c->lost > budget * c->total) return c->best;  /* over the budget: wait */
  return c->next_default ? c->best : c->cur;
}

static void record(struct cell *c, int arm, double t) {
  c->total += t;
  c->dirty = 1;
  struct arm *a = &c->arm[arm];
  if (c->phase == EXPLOIT) {
    add(a, t);
    /* the re-check: the default now faster than the kept candidate */
    if (arm == 0 && c->best && median(a) < median(&c->arm[c->best]) * (1 - THRESHOLD))
      c->best = 0;
    return;
  }
  if (c->phase != EXPLORE) return;
  add(a, t);
  if (arm == c->best || arm != c->cur) {  /* the reference (or a paused arm) */
    if (!c->across) c->next_default = 0;
    return;
  }
  if (!c->across) c->next_default = 1;
  struct arm *ref = &c->arm[c->best];
  if (count(ref) == 0) return;  /* across runs: no reference yet to compare */
  double d = median(ref);
  if (t > d) c->lost += t - d;
  /* clearly slower: dropped at once */
  if (t > d * 1.5 || (count(a) >= 2 && lowest(a) > highest(ref) * 1.1)) {
    a->dropped = 1;
  } else if (count(a) >= pairs && count(ref) >= 2) {
    /* kept when it beats the reference beyond the noise; a candidate whose
       median is ahead but whose slowest sample is not gets more pairs, up
       to SAMPLES */
    if (beats(a, ref)) a->kept = 1;
    else if (count(a) >= SAMPLES || median(a) >= d * (1 - THRESHOLD)) a->dropped = 1;
  }
  if (a->dropped || a->kept) {
    a->at = c->invocations + 1;
    if (a->kept) c->best = c->cur;
    c->cur++;
    c->next_default = 0;
    c->run_done = c->across;  /* at most one candidate per run */
  }
}

/* Powers of 4: 1 -> 0, 2..7 -> 1, 8..31 -> 2, ... */
static int bucket_of(int64_t trip) {
  return trip < 1 ? 0 : (64 - __builtin_clzll((unsigned long long)trip)) / 2;
}

static struct cell *cell_for(struct state *s, int bucket) {
  for (int i = 0; i < s->ncell; i++)
    if (s->cell[i].bucket == bucket) return &s->cell[i];
  if (s->ncell == MAX_CELLS) return NULL;
  struct cell *c = &s->cell[s->ncell++];
  c->bucket = bucket;
  c->runs = 1;
  return c;
}

/* ------------------------------------------------------------- store */

/* One line per (site, bucket), tab-separated:
 *   key bucket name phase best invocations decided_at runs decided_runs total lost
 *   across cur next_default arms
 * arms: ';'-separated "name:n:dropped:kept:at:t,t,..." (seconds). */
static void apply_line(struct state *s, char *line) {
  char *f[15];
  int n = 0;
  for (char *p = line; n < 15; n++) {
    f[n] = p;
    p = strchr(p, '\t');
    if (!p) {
      n++;
      break;
    }
    *p++ = 0;
  }
  if (n != 15) return;
  struct cell *c = cell_for(s, atoi(f[1]));
  if (!c) return;
  c->phase = atoi(f[3]);
  c->invocations = atoll(f[5]);
  c->decided_at = atoll(f[6]);
  c->runs = atoi(f[7]) + 1;
  c->decided_runs = atoi(f[8]);
  c->total = atof(f[9]);
  c->lost = atof(f[10]);
  c->across = across_runs && atoi(f[11]);
  c->next_default = atoi(f[13]);
  char stored_best[NAME_LEN] = "", stored_cur[NAME_LEN] = "";
  snprintf(stored_best, sizeof stored_best, "%s", f[4]);
  snprintf(stored_cur, sizeof stored_cur, "%s", f[12]);
  c->best = 0;
  c->cur = 1;
  for (char *arm = strtok(f[14], ";"); arm; arm = strtok(NULL, ";")) {
    char *colon = strchr(arm, ':');
    if (!colon) continue;
    *colon = 0;
    for (int i = 0; i < s->narm; i++) {
      struct arm *a = &c->arm[i];
      if (strcmp(a->name, arm)) continue;
      char *times = NULL;
      int nn = 0, dr = 0, kp = 0;
      long long at = 0;
      if (sscanf(colon + 1, "%d:%d:%d:%lld:", &nn, &dr, &kp, &at) != 4) break;
      a->dropped = dr;
      a->kept = kp;
      a->at = at;
      times = strrchr(colon + 1, ':');
      int k = times && times[1] ? 1 : 0;
      for (const char *q = times ? times + 1 : ""; *q; q++) k += *q == ',';
      /* the last k of nn samples: the ring goes on where the run left it */
      a->n = nn > k ? nn - k : 0;
      for (char *t = times ? strtok_r(times + 1, ",", &times) : NULL; t;
           t = strtok_r(NULL, ",", &times))
        add(a, atof(t));
    }
  }
  int known = 0;
  for (int i = 0; i < s->narm; i++) {
    if (!strcmp(c->arm[i].name, stored_best)) c->best = i, known = 1;
    if (!strcmp(c->arm[i].name, stored_cur)) c->cur = i;
  }
  if (c->phase == EXPLOIT && !known) {
    /* a verdict for a candidate this build does not carry (a seed from
       outside the head's top candidates, another head): explore afresh */
    c->phase = EXPLORE;
    c->cur = 1;
  }
  if (c->phase == EXPLOIT) {
    c->next_check = 64;
    while (c->next_check <= c->invocations) c->next_check *= 2;
  } else if (c->phase == EXPLORE && c->runs > 1 && c->invocations / (c->runs - 1) < 16) {
    /* too few invocations per run to explore in one: one arm per run with
       MIRECC_ADAPT_ACROSS_RUNS, else the program's own configuration */
    if (across_runs) c->across = 1;
    else c->rare = 1;
  }
}

static void load_store(void) {
  FILE *f = fopen(store_path, "r");
  if (!f) return;
  size_t cap = 1 << 16, len = 0;
  stored = malloc(cap);
  if (!stored) {
    fclose(f);
    return;
  }
  size_t got;
  while ((got = fread(stored + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 >= cap) {
      char *bigger = realloc(stored, cap * 2);
      if (!bigger) break;
      stored = bigger;
      cap *= 2;
    }
  }
  stored[len] = 0;
  fclose(f);
  if (len && strncmp(stored, "# mirecc-adapt 1", 16)) {
    warn("%s: not a mirecc-adapt store%s; it is ignored", store_path, "");
    stored[0] = 0;
  }
}

/* The store's line for this site's key and a bucket, copied. */
static void restore(struct state *s) {
  if (!stored) return;
  size_t klen = strlen(s->site->key);
  for (char *p = stored; *p;) {
    char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > klen && !strncmp(p, s->site->key, klen) && p[klen] == '\t') {
      char *copy = malloc(len + 1);
      if (copy) {
        memcpy(copy, p, len);
        copy[len] = 0;
        apply_line(s, copy);
        free(copy);
      }
    }
    p += len + (end ? 1 : 0);
  }
}

static int write_cell(FILE *f, struct state *s, struct cell *c) {
  const char *name = s->site->name ? s->site->name : "";
  fprintf(f, "%s\t%d\t%s\t%d\t%s\t%lld\t%lld\t%d\t%d\t%.9g\t%.9g\t%d\t%s\t%d\t",
          s->site->key, c->bucket, name, c->phase, c->arm[c->best].name,
          (long long)c->invocations, (long long)c->decided_at, c->runs, c->decided_runs,
          c->total, c->lost, c->across,
          c->cur < s->narm ? c->arm[c->cur].name : "-", c->next_default);
  for (int i = 0; i < s->narm; i++) {
    struct arm *a = &c->arm[i];
    fprintf(f, "%s%s:%d:%d:%d:%lld:", i ? ";" : "", a->name, a->n, a->dropped, a->kept,
            (long long)a->at);
    int n = count(a);
    for (int j = 0; j < n; j++) fprintf(f, "%s%.9g", j ? "," : "", a->t[(a->n - n + j) % SAMPLES]);
  }
  return fputc('\n', f) == EOF ? -1 : 0;
}

static int ours(const char *line, size_t len) {
  for (struct state *s = states; s; s = s->next) {
    size_t klen = strlen(s->site->key);
    if (len <= klen || strncmp(line, s->site->key, klen) || line[klen] != '\t') continue;
    int bucket = atoi(line + klen + 1);
    for (int i = 0; i < s->ncell; i++)
      /* a line of no bucket yet (a seeded verdict) became the first cell's */
      if ((s->cell[i].bucket == bucket || bucket == -1) && s->cell[i].dirty) return 1;
  }
  return 0;
}

static int mkdirs(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int bad = mkdir(path, 0777) && errno != EEXIST;
    *p = '/';
    if (bad) return -1;
  }
  return 0;
}

static void save_store(void) {
  pthread_mutex_lock(&lock);
  int any = 0;
  for (struct state *s = states; s; s = s->next)
    for (int i = 0; i < s->ncell; i++) {
      struct cell *c = &s->cell[i];
      /* a run that explored across runs used one arm: the next run takes the other */
      if (c->dirty && c->across && c->phase == EXPLORE) c->next_default = !c->next_default;
      any |= c->dirty;
    }
  if (!any || disabled) {
    pthread_mutex_unlock(&lock);
    return;
  }
  char path[4096 + 32];
  snprintf(path, sizeof path, "%s", store_path);
  int fd = -1;
  FILE *in = NULL, *out = NULL;
  char lockname[4096 + 32], tmp[4096 + 48];
  snprintf(lockname, sizeof lockname, "%s.lock", store_path);
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", store_path, (long)getpid());
  if (mkdirs(path)) goto fail;
  fd = open(lockname, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0 || flock(fd, LOCK_EX)) goto fail;
  out = fopen(tmp, "w");
  if (!out) goto fail;
  fprintf(out, "# mirecc-adapt 1 machine=%s\n", machine);
  in = fopen(store_path, "r");
  if (in) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int first = 1;
    while ((len = getline(&line, &cap, in)) > 0) {
      if (first && strncmp(line, "# mirecc-adapt 1", 16)) break;  /* foreign: replaced */
      first = 0;
      if (line[0] == '#' || ours(line, (size_t)len)) continue;
      fputs(line, out);
    }
    free(line);
    fclose(in);
  }
  for (struct state *s = states; s; s = s->next)
    for (int i = 0; i < s->ncell; i++)
      if (s->cell[i].dirty && write_cell(out, s, &s->cell[i])) goto fail;
  int bad = fflush(out) || fsync(fileno(out));   /* on disk before the rename */
  bad = fclose(out) || bad;
  out = NULL;
  if (bad) goto fail;
  if (rename(tmp, store_path)) goto fail;
  close(fd);
  pthread_mutex_unlock(&lock);
  return;
fail:
  warn("cannot write the store %s: %s", store_path, strerror(errno));
  if (out) fclose(out);
  unlink(tmp);
  if (fd >= 0) close(fd);
  pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------- entries */

static struct state *state_of(struct site *site) {
  struct state *s = __atomic_load_n((struct state **)&site->state, __ATOMIC_ACQUIRE);
  if (s) return s;
  pthread_mutex_lock(&lock);
  if (!initialised) initialise();
  s = site->state;
  if (!s) {
    if (disabled || site->version != SITE_VERSION || !site->key || !site->cands) {
      s = (struct state *)&disabled;   /* any non-NULL that is not a state */
    } else {
      s = calloc(1, sizeof *s);
      if (!s) {
        s = (struct state *)&disabled;
      } else {
        s->site = site;
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

int32_t __mirecc_adapt_begin(struct site *site, ident_t *loc) {
  struct state *s = state_of(site);
  if (s == (struct state *)&disabled || s->narm < 2) return 0;
  if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE)) return 0;  /* nested or concurrent */
  if (s->last < 0) {
    struct cell *c = cell_for(s, -1);  /* bucket unknown until the first invocation */
    s->last = c ? (int)(c - s->cell) : -1;
  }
  int arm = 0, quiet = 0;
  if (s->last >= 0) {
    struct cell *c = &s->cell[s->last];
    /* decided (one invocation in 16 still timed, for the re-checks) or too
       short: not timed */
    quiet = c->phase == SHORT ||
            (c->phase == EXPLOIT && c->invocations < c->next_check &&
             (c->invocations & 15) != 15);
    arm = choose(s, c);
  }
  struct arm *a = &s->cell[s->last >= 0 ? s->last : 0].arm[arm];
  /* the program set its own team size (omp_set_num_threads, in a TU the
     compile could not see): its choice stands, nothing is timed */
  if (a->threads && omp_get_max_threads() != max_threads) {
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    return 0;
  }
  if (a->threads) __kmpc_push_num_threads(loc, __kmpc_global_thread_num(loc), a->threads);
  site->sched = a->sched;
  site->chunk = a->chunk;
  s->running = arm;
  s->running_cell = s->last;
  __atomic_store_n(&site->trip, -1, __ATOMIC_RELAXED);
  if (quiet) return (arm + 1) | (a->sched ? TOKEN_COPY : 0) | TOKEN_QUIET;
  clock_gettime(CLOCK_MONOTONIC, &s->t0);
  return (arm + 1) | (a->sched ? TOKEN_COPY : 0);
}

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
  struct cell *c = s->running_cell >= 0 ? &s->cell[s->running_cell] : NULL;
  if (c && c->bucket == -1 && bucket >= 0 && c->invocations == 0) {
    c->bucket = bucket;  /* the first invocation names the first cell's bucket */
  }
  if (c && c->bucket == bucket) {
    /* the first invocation in a run starts the threads: not a sample,
       except where one arm runs per run (across runs) */
    if ((c->this_run++ > 0 || c->across) && !(token & TOKEN_QUIET)) record(c, s->running, t);
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
