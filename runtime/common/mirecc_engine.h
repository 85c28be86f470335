/* mirecc_engine.h: what the adaptive runtimes share (the policy and the
 * store as ../adapt/README.md describes them): the arms a site or kernel
 * runs, the policy that explores them and keeps one only when it beats the
 * reference beyond the measured noise, and the per-user, per-machine
 * verdict store.  Included by one C file of each runtime (mirecc-adapt, the
 * OpenMP runtime; mirecc-opencl, the OpenCL interposer), which defines
 * ENGINE_NAME (its name in warnings) before it.  Everything here is static:
 * each runtime has its own copy.
 */
#ifndef MIRECC_ENGINE_H
#define MIRECC_ENGINE_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef ENGINE_NAME
#error "define ENGINE_NAME before including mirecc_engine.h"
#endif

enum { EXPLORE = 0, EXPLOIT = 1, SHORT = 2 };
#define MAX_ARMS 9
#define MAX_CELLS 4
#define SAMPLES 8
#define NAME_LEN 32
#define MAX_BATCH 16384   /* invocations one sample of a short region may sum */
#define MAX_BUCKETS 33    /* bucket_of's range */
#define FEW_PER_RUN 16    /* fewer invocations per run: explored across runs */

struct arm {
  char name[NAME_LEN];   /* "half-dynamic-64", "f4"; arm 0: "default" */
  int32_t threads;       /* OpenMP: 0, the runtime's team size */
  int32_t sched, chunk;  /* OpenMP: sched 0, the source's own loops */
  int32_t factor;        /* OpenCL: the coarsening factor (1: the program's own) */
  int32_t n;             /* samples ever recorded */
  int32_t dropped, kept;
  int64_t at;            /* the cell's invocation when it was kept or dropped */
  double t[SAMPLES];     /* the last SAMPLES, seconds */
};

struct cell {            /* one trip-count bucket of a site */
  int32_t bucket, phase, best, cur, next_default, across, rare;
  int32_t run_done;      /* across runs: this run's candidate has its verdict */
  uint32_t warmed;       /* the arms sampled once in this run (warm_each_arm) */
  uint32_t started;      /* the arms launched in this run (warm_each_arm) */
  int32_t inflight[MAX_ARMS];  /* launched, their samples not yet read (OpenCL's
                                  queues: a program enqueues many, then waits) */
  int64_t invocations, decided_at, next_check;
  int32_t runs, decided_runs, dirty, this_run;
  double total, lost;
  /* a region too short to time alone: one sample is the mean of `batch`
     invocations of one arm (batch_left of them still to run) */
  int32_t batch, batch_left, batch_arm;
  double batch_sum;
  /* this run's share lost to exploring, and the worst run's */
  double run_total, run_lost, worst;
  struct arm arm[MAX_ARMS];
};

struct state {
  const char *key;       /* the site's or kernel's digest: its store lines' key */
  const char *name;      /* for people: "<source>:<line> <region>", "<kernel> on <device>" */
  void *owner;           /* the runtime's own descriptor */
  int32_t narm, ncell, last, busy, running, running_cell;
  struct timespec t0;
  struct cell cell[MAX_CELLS];
  int64_t seen[MAX_BUCKETS];   /* this run's invocations per bucket (the weights) */
  /* invocations handed to the caller's own fast path (a function's
     versions: the dispatch runs a decided version without calling the
     runtime), not yet counted in cell `granted_cell` */
  int64_t granted;
  int32_t granted_cell;
  struct state *next;
};

/* Set by a runtime with a fast path: counts what it handed out (under `lock`
   at exit, before the store is written). */
static void (*settle_hook)(struct state *);

/* ------------------------------------------------------------- settings */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised, disabled, warned, across_runs;
/* the first sample of each arm in a run is not taken (OpenCL: a platform
   compiles a kernel for its work-group size at its first launch) */
static int warm_each_arm;
/* a runtime whose short invocations are timed in batches (OpenMP: a region
   is invoked many times in a row; not OpenCL's queued launches) */
static int batch_short;
static double budget = 0.03, min_seconds = 50e-6, run_budget = 0.10;
static int pairs = 4;
static const double THRESHOLD = 0.02;  /* mirecc.learn.keep.KEEP_THRESHOLD */
static char store_path[4096], machine[128];
static struct state *states;
static char *stored;        /* the store's lines at start */

static void warn(const char *fmt, const char *a, const char *b) {
  if (warned) return;
  warned = 1;
  fprintf(stderr, ENGINE_NAME ": warning: ");
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


/* ------------------------------------------------------------- statistics */

static int count(const struct arm *a) { return a->n < SAMPLES ? a->n : SAMPLES; }

/* The k-th smallest of an arm's samples (0: the lowest). */
static double kth(const struct arm *a, int k) {
  int n = count(a);
  if (!n) return 0;
  double v[SAMPLES];
  memcpy(v, a->t, sizeof v);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static double median(const struct arm *a) {
  int n = count(a);
  return n ? (n % 2 ? kth(a, n / 2) : (kth(a, n / 2 - 1) + kth(a, n / 2)) / 2) : 0;
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

/* mirecc.learn.keep.beats: faster beyond the noise of `base`.  With 6 or
   more samples, the rule reads each arm without its slowest and fastest
   sample: one sample stalled by something else on the machine (an
   interrupt, a page fault; on OpenCL's shared CPU device, a launch) would
   otherwise keep a candidate faster in every other sample from being kept
   (a kernel's 1.25x version was lost so). */
static int trim_outliers = 1;

static int beats(const struct arm *c, const struct arm *base) {
  double mb = median(base);
  if (count(c) < 2 || count(base) < 2 || mb <= 0) return 0;
  int tb = trim_outliers && count(base) >= 6, tc = trim_outliers && count(c) >= 6;
  double lo_b = kth(base, tb), hi_b = kth(base, count(base) - 1 - tb);
  double lo_c = kth(c, tc), hi_c = kth(c, count(c) - 1 - tc);
  double noise = (hi_b - lo_b) / mb;
  double margin = 1 - (noise > THRESHOLD ? noise : THRESHOLD);
  if (median(c) < mb * margin && lo_c < lo_b * margin && hi_c < mb * (1 - THRESHOLD))
    return 1;
  /* or every sample of the candidate faster than every one of the base (by
     the threshold): with 4 and 4 samples, 1 chance in 70 were they alike,
     however noisy the base */
  return count(c) >= pairs && hi_c < lo_b * (1 - THRESHOLD);
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

/* Samples an arm will have once its launches in flight are read (its
   first in a run, with warm_each_arm, gives none). */
static int expected(const struct cell *c, int a) {
  int n = count(&c->arm[a]) + c->inflight[a];
  if (warm_each_arm && c->inflight[a] && a < 32 && !(c->warmed >> a & 1u)) n--;
  return n;
}

/* The arm for the next invocation of cell `c`.  While exploring, the
   candidates alternate with the reference: the default, then the last
   candidate kept (each later one must beat it).  The alternation is decided
   here, at the launch, so that launches queued before any has been timed
   still alternate; a candidate gets no more launches in flight than its
   verdict needs. */
static int start_batch(struct cell *c, int arm) {
  if (c->batch > 1) {
    c->batch_arm = arm;
    c->batch_left = c->batch;
    c->batch_sum = 0;
  }
  return arm;
}

/* The first candidate from `c->cur` on still without a verdict (s->narm
   when none is left). */
static int open_arm(const struct state *s, const struct cell *c) {
  int a = c->cur;
  while (a < s->narm && (a == 0 || c->arm[a].dropped || c->arm[a].kept)) a++;
  return a;
}

static int choose(struct state *s, struct cell *c) {
  if (c->phase == SHORT) return 0;
  if (c->batch_left > 0) return c->batch_arm;   /* a batch runs one arm */
  if (c->phase == EXPLOIT) {
    if (c->invocations >= c->next_check) {
      c->next_check *= 2;   /* past it, even where the default is the verdict */
      if (c->best) return start_batch(c, 0);   /* a rare re-check of the default */
    }
    return c->best;
  }
  if ((c->batch <= 1 || c->across) && count(&c->arm[0]) >= 3 &&
      median(&c->arm[0]) < min_seconds) {
    /* too short to time alone: timed in batches (the fork and join
       included), else left alone; explored across runs (a few invocations
       per run), it is left alone: a batch cannot span runs, and what it
       could gain is a few microseconds per process */
    double m = median(&c->arm[0]);
    int b = 2;
    while (b < MAX_BATCH && m * b < min_seconds) b *= 2;
    c->dirty = 1;
    if (!batch_short || c->across || m <= 0 || m * b < min_seconds) {
      c->phase = SHORT;
      c->best = 0;
      return 0;
    }
    c->batch = b;
  }
  c->cur = open_arm(s, c);
  if (c->cur >= s->narm) {
    finish(c);
    c->dirty = 1;
    return c->best;
  }
  /* across runs: this run's one arm, every invocation, while the run's
     share lost to it stays under run_budget */
  if (c->across)
    return start_batch(c, (c->next_default || c->run_done ||
                           c->run_lost > run_budget * c->run_total) ? c->best : c->cur);
  int arm = c->best;
  if (expected(c, 0) < 3) {
    arm = 0;
  } else if (c->rare) {
    arm = c->best;
  } else if (c->lost > budget * c->total &&
             !(warm_each_arm && c->cur < 32 && (c->started >> c->cur & 1u))) {
    /* over the budget: wait (with warm_each_arm, a candidate already started
       in this run, whose warm-up was paid, is finished first) */
    arm = c->best;
  } else if (c->inflight[c->cur] &&
             expected(c, c->cur) - count(&c->arm[c->cur]) >=
                 (count(&c->arm[c->cur]) < pairs - 2 ? pairs - count(&c->arm[c->cur]) : 2)) {
    /* enough of it in flight: its verdict waits for them (the samples it
       lacks for a first verdict, then two at a time) */
    arm = c->best;
  } else if (!c->next_default) {
    arm = c->cur;
  }
  c->next_default = arm == c->cur;
  return start_batch(c, arm);
}

static void record(struct cell *c, int arm, double t) {
  double w = c->batch > 1 ? c->batch : 1;   /* a batch's sample is its mean */
  c->total += t * w;
  c->run_total += t * w;
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
  if (arm == c->best || arm != c->cur) return;  /* the reference (or a paused arm) */
  struct arm *ref = &c->arm[c->best];
  if (count(ref) == 0) return;  /* across runs: no reference yet to compare */
  double d = median(ref);
  if (t > d) {
    c->lost += (t - d) * w;
    c->run_lost += (t - d) * w;
  }
  /* clearly slower: dropped at once (a sample half as slow again as the
     reference, unless one of its samples beat the reference: then that one
     was a stall, and the arm gets its samples) */
  if ((t > d * 1.5 && lowest(a) >= d) ||
      (count(a) >= 2 && lowest(a) > highest(ref) * 1.1)) {
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

/* A sample: with warm_each_arm the first of each arm in a run is not taken. */
static void sample(struct cell *c, int arm, double t) {
  if (warm_each_arm && arm < 32 && !(c->warmed & (1u << arm))) {
    c->warmed |= 1u << arm;
    return;
  }
  if (c->batch > 1) {
    if (c->batch_left <= 0 || arm != c->batch_arm) return;
    c->batch_sum += t;
    if (--c->batch_left) return;
    t = c->batch_sum / c->batch;
  }
  record(c, arm, t);
}

/* Is this invocation of cell `c` timed (after choose())?  `due`: a re-check
   was due before choose() (a decided cell times one invocation in 16 and
   the re-checks; a batched one only its re-check batches). */
static inline int timed(const struct cell *c, int due) {
  if (c->phase == SHORT) return 0;
  if (c->phase != EXPLOIT || due) return 1;
  return c->batch > 1 ? c->batch_left > 0 : (c->invocations & 15) == 15;
}

/* Powers of 4: 1 -> 0, 2..7 -> 1, 8..31 -> 2, ... */
static int bucket_of(int64_t trip) {
  return trip < 1 ? 0 : (64 - __builtin_clzll((unsigned long long)trip)) / 2;
}

/* A bucket's weight in this run: its invocations times its trip count's
   order (4^bucket): the share of the site's time it holds, roughly. */
static double weight(const struct state *s, int bucket) {
  if (bucket < 0 || bucket >= MAX_BUCKETS) return 0;
  double w = (double)s->seen[bucket];
  for (int i = 0; i < bucket; i++) w *= 4;
  return w;
}

/* The cell of `bucket`, made when there is room.  With every cell taken,
   a bucket that has held more than twice the time of the lightest tracked
   one in this run takes that cell (started afresh; its store line stays as
   it was): the heavy input sizes are tracked first. */
static struct cell *cell_for(struct state *s, int bucket) {
  for (int i = 0; i < s->ncell; i++)
    if (s->cell[i].bucket == bucket) return &s->cell[i];
  struct cell *c;
  if (s->ncell < MAX_CELLS) {
    c = &s->cell[s->ncell++];
  } else {
    if (bucket < 0) return NULL;
    int light = -1;
    for (int i = 0; i < s->ncell; i++)
      if (s->cell[i].bucket >= 0 && i != s->running_cell && !s->cell[i].batch_left &&
          (light < 0 || weight(s, s->cell[i].bucket) < weight(s, s->cell[light].bucket)))
        light = i;
    if (light < 0 || s->seen[bucket] < 4 ||
        weight(s, bucket) <= 2 * weight(s, s->cell[light].bucket))
      return NULL;
    c = &s->cell[light];
    struct arm arms[MAX_ARMS];
    for (int i = 0; i < s->narm; i++) {
      arms[i] = c->arm[i];
      arms[i].n = arms[i].dropped = arms[i].kept = 0;
      arms[i].at = 0;
    }
    memset(c, 0, sizeof *c);
    for (int i = 0; i < s->narm; i++) c->arm[i] = arms[i];
  }
  c->bucket = bucket;
  c->runs = 1;
  return c;
}

/* ------------------------------------------------------------- store */

/* One line per (site, bucket), tab-separated:
 *   key bucket name phase best invocations decided_at runs decided_runs total lost
 *   across cur next_default arms worst batch
 * arms: ';'-separated "name:n:dropped:kept:at:t,t,..." (seconds); worst: the
 * largest share of a run's time at the site lost to exploring; batch: the
 * invocations one sample sums (1: timed alone).  (Lines without the last
 * two, of earlier runtimes, are read with 0 and 1.) */
static void apply_line(struct state *s, char *line) {
  char *f[17];
  int n = 0;
  for (char *p = line; n < 17; n++) {
    f[n] = p;
    p = strchr(p, '\t');
    if (!p) {
      n++;
      break;
    }
    *p++ = 0;
  }
  if (n != 15 && n != 17) return;
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
  if (n == 17) {
    c->worst = atof(f[15]);
    c->batch = atoi(f[16]);
    if (c->batch < 1 || c->batch > MAX_BATCH) c->batch = 1;
  }
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
  if (c->phase == SHORT && batch_short && !c->across) {
    /* left alone by a runtime that did not time in batches: this one does */
    c->phase = EXPLORE;
    c->cur = 1;
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
  } else if (c->phase == EXPLORE && c->runs > 1 && c->invocations / (c->runs - 1) < FEW_PER_RUN) {
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

/* The store's lines for this site's key, copied: the heaviest buckets
   first (invocations ever, times the trip count's order), as many as there
   are cells. */
static void restore(struct state *s) {
  if (!stored) return;
  size_t klen = strlen(s->key);
  struct { char *p; size_t len; double w; } found[64];
  int nfound = 0;
  for (char *p = stored; *p;) {
    char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > klen && !strncmp(p, s->key, klen) && p[klen] == '\t' && nfound < 64) {
      /* key bucket name phase best invocations ...: the weight's fields */
      int bucket = atoi(p + klen + 1);
      const char *q = p + klen + 1;
      for (int field = 1; field < 5 && q; field++) {
        q = memchr(q, '\t', len - (size_t)(q - p));
        if (q) q++;
      }
      double w = q ? atof(q) : 0;
      for (int i = 0; i < bucket && i < MAX_BUCKETS; i++) w *= 4;
      int at = nfound++;
      while (at > 0 && found[at - 1].w < w) {
        found[at] = found[at - 1];
        at--;
      }
      found[at].p = p, found[at].len = len, found[at].w = w;
    }
    p += len + (end ? 1 : 0);
  }
  for (int i = 0; i < nfound; i++) {
    char *copy = malloc(found[i].len + 1);
    if (!copy) continue;
    memcpy(copy, found[i].p, found[i].len);
    copy[found[i].len] = 0;
    apply_line(s, copy);
    free(copy);
  }
}

static int write_cell(FILE *f, struct state *s, struct cell *c) {
  const char *name = s->name ? s->name : "";
  fprintf(f, "%s\t%d\t%s\t%d\t%s\t%lld\t%lld\t%d\t%d\t%.9g\t%.9g\t%d\t%s\t%d\t",
          s->key, c->bucket, name, c->phase, c->arm[c->best].name,
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
  return fprintf(f, "\t%.4g\t%d\n", c->worst, c->batch > 1 ? c->batch : 1) < 0 ? -1 : 0;
}

static int ours(const char *line, size_t len) {
  for (struct state *s = states; s; s = s->next) {
    size_t klen = strlen(s->key);
    if (len <= klen || strncmp(line, s->key, klen) || line[klen] != '\t') continue;
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
  for (struct state *s = states; s; s = s->next) {
    if (settle_hook) settle_hook(s);
    for (int i = 0; i < s->ncell; i++) {
      struct cell *c = &s->cell[i];
      /* a run that explored across runs used one arm; the next run takes
         the reference (the default, or the candidate kept last) until it
         has three samples, then the next candidate while that has fewer
         samples than the reference (the reference's samples from earlier
         runs count: a candidate needs about `pairs` runs, not twice as
         many) */
      if (c->dirty && c->across && c->phase == EXPLORE) {
        int next = open_arm(s, c), ref = count(&c->arm[c->best]);
        /* (with warm_each_arm, OpenCL's devices: each arm's run has a
           warm-up, so the arms alternate run by run) */
        c->next_default = warm_each_arm ? !c->next_default
                          : next < s->narm && (ref < 3 || ref <= count(&c->arm[next]));
      }
      if (c->dirty && c->run_total > 0 && c->run_lost / c->run_total > c->worst)
        c->worst = c->run_lost / c->run_total;
      any |= c->dirty;
    }
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

/* Under `lock`: the settings both runtimes read (MIRECC_ADAPT_*), this
 * machine's descriptor (`threads`: what a team of all may have) and the
 * store, read once and merged back at exit. */
static void engine_configure(int threads) {
  budget = env_double("MIRECC_ADAPT_BUDGET", budget, 0.0, 1.0);
  min_seconds = env_double("MIRECC_ADAPT_MIN_US", min_seconds * 1e6, 0.0, 1e9) * 1e-6;
  pairs = (int)env_double("MIRECC_ADAPT_PAIRS", pairs, 2, SAMPLES);
  run_budget = env_double("MIRECC_ADAPT_RUN_BUDGET", run_budget, 0.0, 1.0);
  /* on unless turned off: a region run a few times per process is explored
     over the next runs, one candidate per run */
  const char *v = getenv("MIRECC_ADAPT_ACROSS_RUNS");
  across_runs = !(v && (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")));
  char model[256];
  cpu_model(model, sizeof model);
  const char *cap = getenv("MIRECC_POWER_CAP");
  snprintf(machine, sizeof machine, "c%d-%08x-p%s", threads, fnv(model),
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
#endif
