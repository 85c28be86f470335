/* mirecc's compiled client: `mirecc`, `mirecc++` and `mirecc-nvcc`.
 *
 * Every compile through mirecc starts here, before any Python.  A call that
 * nothing in mirecc reads (a query, -E, -O0, a level or language no
 * installed head reads with the user's settings, a link no task takes) is
 * the compiler's own: this process becomes the compiler (execvp), as the
 * Python driver would have, counted in `mire stats`.  What it decides alone
 * comes from two places, both written by the Python driver's own code
 * (mirecc/driver/rules.py): the flag tables compiled in (tables.h, with
 * their digest), and the rules file for the settings in force, found by a
 * digest of what selects them (the configuration file, the MIRECC_*
 * variables, PATH, HOME, XDG_CACHE_HOME) and refused when any file it was
 * derived from changed.
 *
 * Every other call goes to the per-user compile server
 * (mirecc/driver/serve.py), started when none answers: the command, the
 * working directory, the environment, and the standard streams and make's
 * jobserver pipes as descriptors; the server runs the Python driver in a
 * forked child on them and answers the exit status.  Signals (Ctrl-C, make
 * stopping a job) are forwarded to the call.  Where the server cannot be
 * used, the Python driver runs the call (one warning saying why), and the
 * compiler itself when that cannot run either.
 *
 * libc only.  Built by scripts/setup.sh (client/build.sh) with the string
 * macros MIRECC_PYTHON (the environment's python), MIRECC_DRIVERS (the
 * Python driver scripts' directory), MIRECC_TAG (the installation's socket
 * tag) and MIRECC_VERSION (mirecc's), the number MIRECC_PROTOCOL and the
 * generated tables.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "tables.h"

#ifndef MIRECC_PYTHON
#error "build with -DMIRECC_PYTHON=<the environment's python>"
#endif
#ifndef MIRECC_DRIVERS
#error "build with -DMIRECC_DRIVERS=<directory of the Python driver scripts>"
#endif
#ifndef MIRECC_TAG
#error "build with -DMIRECC_TAG=<socket tag>"
#endif
#ifndef MIRECC_VERSION
#error "build with -DMIRECC_VERSION=<mirecc's version>"
#endif
#ifndef MIRECC_PROTOCOL
#error "build with -DMIRECC_PROTOCOL=<protocol>"
#endif

extern char **environ;

/* how the Python driver tells a copy of this client from a compiler
 * (frontend/compiler.py: CLIENT_MARKER): an ELF note, placed by the linker
 * with the other notes in the file's first page */
__attribute__((used, section(".note.mirecc"), aligned(4))) static const struct {
    unsigned namesz, descsz, type;
    char name[8], desc[24];
} client_marker = {7, 24, 1, "mirecc", "MIRECC-COMPILED-CLIENT"};

enum mode { MODE_C, MODE_CXX, MODE_NVCC };
static enum mode mode;
static const char *const mode_names[] = {"c", "c++", "nvcc"};
static const char *const script_names[] = {"mirecc", "mirecc++", "mirecc-nvcc"};
static int quiet;

/* ------------------------------------------------------------ helpers */

static void say(const char *kind, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    fprintf(stderr, "mirecc: %s: %s\n", kind, line);
}

static int in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

static int list_index(const char *s, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (strcmp(s, list[i]) == 0)
            return i;
    return -1;
}

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int starts_any(const char *s, const char *const *prefixes) {
    for (; *prefixes; prefixes++)
        if (starts(s, *prefixes))
            return 1;
    return 0;
}

static char *read_file(const char *path, size_t limit) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(limit + 1);
    size_t len = 0;
    ssize_t n;
    while (buf && len < limit && (n = read(fd, buf + len, limit - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (!buf || len >= limit) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

/* ------------------------------------------------------------ the rules */

#define MAX_LINES 512
struct rules {
    char *text;
    int disable, server, warnings, reads_all;
    const char *stats, *compiler[2];
    const char *prefix[32];
    int nprefix;
    const char *link_args;            /* flag prefixes, space separated; "*": any */
    const char *link_step[8][2];      /* level, flag prefixes */
    int nlink_step;
    const char *reads[MAX_LINES][3];  /* language, level, always|split */
    int nreads;
    /* direct mode (mirecc/tu/direct.py), when the ML path would try it */
    const char *direct_schema, *manifests, *objects, *direct_env;
    const char *identity[2];           /* c, c++: the compiler's file identity */
    const char *pipeline[8][2];        /* language, pipeline key */
    int npipeline;
    const char **stamp;                /* "mtime size path" of what those came from */
    int nstamp;
};

/* The directory of the sockets and rules: $XDG_RUNTIME_DIR/mirecc (when
 * that directory exists) or /tmp/mirecc-<uid>, made 0700 when missing;
 * NULL (with why) when it is not this user's own private directory. */
static const char *run_dir(const char **why) {
    static char dir[PATH_MAX];
    const char *base = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    /* (a runtime directory named but gone, as under sudo: /tmp's) */
    if (base && *base && stat(base, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(dir, sizeof dir, "%s/mirecc", base);
    else
        snprintf(dir, sizeof dir, "/tmp/mirecc-%u", (unsigned)getuid());
    if (lstat(dir, &st) != 0) {
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            *why = "cannot make the server's directory";
            return NULL;
        }
        if (lstat(dir, &st) != 0) {
            *why = "cannot read the server's directory";
            return NULL;
        }
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
        static char msg[PATH_MAX + 64];
        snprintf(msg, sizeof msg, "%s is not a directory of this user's alone (0700)", dir);
        *why = msg;
        return NULL;
    }
    return dir;
}

static uint64_t fnv1a64(const char *s, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

static int env_cmp(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    /* by name: '=' ends a name */
    for (;; x++, y++) {
        unsigned char cx = *x == '=' ? 0 : (unsigned char)*x;
        unsigned char cy = *y == '=' ? 0 : (unsigned char)*y;
        if (cx != cy || !cx)
            return (int)cx - (int)cy;
    }
}

/* The configuration file in force: MIRECC_CONFIG, else the nearest
 * .mirecc.yaml upward from the working directory (as the driver finds it). */
static const char *config_file(void) {
    static char path[PATH_MAX];
    const char *named = getenv("MIRECC_CONFIG");
    if (named && *named)
        return named;
    char dir[PATH_MAX];
    if (!realpath(".", dir))
        return NULL;
    for (;;) {
        struct stat st;
        snprintf(path, sizeof path, "%s/.mirecc.yaml", strcmp(dir, "/") ? dir : "");
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return path;
        if (strcmp(dir, "/") == 0)
            return NULL;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
    }
}

/* The rules file's name: FNV-1a of the key material, as rules.key_material. */
static void rules_path(const char *dir, char *out, size_t size) {
    const char *config = config_file();
    char line[PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "mirecc-rules %d\nconfig %s\n", MIRECC_PROTOCOL,
                     config ? config : "-");
    uint64_t h = fnv1a64(line, (size_t)n, 0xcbf29ce484222325ULL);
    size_t count = 0;
    for (char **e = environ; *e; e++)
        count++;
    const char **keys = malloc((count + 1) * sizeof *keys);
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        const char *v = *e;
        if ((starts(v, "MIRECC_") && !starts(v, "MIRECC_CLIENT")) ||
            starts(v, "PATH=") || starts(v, "HOME=") || starts(v, "XDG_CACHE_HOME="))
            if (strchr(v, '='))
                keys[k++] = v;
    }
    qsort(keys, k, sizeof *keys, env_cmp);
    for (size_t i = 0; i < k; i++) {
        h = fnv1a64("env ", 4, h);
        h = fnv1a64(keys[i], strlen(keys[i]), h);
        h = fnv1a64("\n", 1, h);
    }
    free(keys);
    snprintf(out, size, "%s/rules-%s/%016llx", dir, MIRECC_TAG, (unsigned long long)h);
}

/* A rules file's "<mtime_ns> <size> <path>": 1 when the file still has
 * them, 0 when not, -1 when the line is damaged. */
static int unchanged(const char *line) {
    const char *size_s = strchr(line, ' ');
    const char *file = size_s ? strchr(size_s + 1, ' ') : NULL;
    if (!file)
        return -1;
    struct stat st;
    long long mtime = strtoll(line, NULL, 10), size = strtoll(size_s + 1, NULL, 10);
    return stat(file + 1, &st) == 0 &&
           (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec == mtime &&
           (long long)st.st_size == size;
}

/* Load and check the rules file: 0, or -1 with why (missing, stale, ...). */
static int load_rules(const char *path, struct rules *r, const char **why) {
    memset(r, 0, sizeof *r);
    r->warnings = 1;
    r->text = read_file(path, 1 << 20);
    if (!r->text) {
        *why = "no rules for these settings yet";
        return -1;
    }
    char *save = NULL;
    int line_no = 0;
    for (char *line = strtok_r(r->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        char *rest = strchr(line, ' ');
        if (rest)
            *rest++ = 0;
        else
            rest = line + strlen(line);
        if (line_no == 1) {
            if (strcmp(line, "mirecc-rules") || atoi(rest) != MIRECC_PROTOCOL) {
                *why = "the rules file is of another protocol";
                return -1;
            }
        } else if (!strcmp(line, "tables")) {
            if (strcmp(rest, MIRECC_TABLES_DIGEST)) {
                *why = "the client's flag tables are not the driver's (rerun scripts/setup.sh)";
                return -2;
            }
        } else if (!strcmp(line, "dep")) {
            int same = unchanged(rest);
            if (same < 0) {
                *why = "a damaged rules file";
                return -2;
            }
            if (!same) {
                *why = "the settings or heads changed since the rules were written";
                return -1;
            }
        } else if (!strcmp(line, "disable")) {
            r->disable = atoi(rest);
        } else if (!strcmp(line, "server")) {
            r->server = atoi(rest);
        } else if (!strcmp(line, "warnings")) {
            r->warnings = atoi(rest);
        } else if (!strcmp(line, "stats")) {
            r->stats = rest;
        } else if (!strcmp(line, "compiler")) {
            char *path2 = strchr(rest, ' ');
            if (!path2)
                continue;
            *path2++ = 0;
            int which = !strcmp(rest, "c++");
            r->compiler[which] = strcmp(path2, "-") ? path2 : NULL;
        } else if (!strcmp(line, "prefix")) {
            if (r->nprefix < 31)
                r->prefix[r->nprefix++] = rest;
        } else if (!strcmp(line, "link-args")) {
            r->link_args = rest;
        } else if (!strcmp(line, "link-step")) {
            char *flags = strchr(rest, ' ');
            if (!flags || r->nlink_step >= 8)
                continue;
            *flags++ = 0;
            r->link_step[r->nlink_step][0] = rest;
            r->link_step[r->nlink_step++][1] = flags;
        } else if (!strcmp(line, "direct")) {
            r->direct_schema = rest;
        } else if (!strcmp(line, "direct-manifests")) {
            r->manifests = rest;
        } else if (!strcmp(line, "direct-objects")) {
            r->objects = rest;
        } else if (!strcmp(line, "direct-env")) {
            r->direct_env = rest;
        } else if (!strcmp(line, "identity")) {
            char *id = strchr(rest, ' ');
            if (id) {
                *id++ = 0;
                r->identity[!strcmp(rest, "c++")] = id;
            }
        } else if (!strcmp(line, "pipeline")) {
            char *key = strchr(rest, ' ');
            if (!key || r->npipeline >= 8)
                continue;
            *key++ = 0;
            r->pipeline[r->npipeline][0] = rest;
            r->pipeline[r->npipeline++][1] = key;
        } else if (!strcmp(line, "stamp")) {
            if (!(r->nstamp & 255)) {
                const char **more = realloc(r->stamp, (size_t)(r->nstamp + 256) * sizeof *more);
                if (!more)
                    continue;
                r->stamp = more;
            }
            r->stamp[r->nstamp++] = rest;
        } else if (!strcmp(line, "reads-all")) {
            r->reads_all = 1;
        } else if (!strcmp(line, "reads")) {
            char *level = strchr(rest, ' ');
            char *how = level ? strchr(level + 1, ' ') : NULL;
            if (!how || r->nreads >= MAX_LINES)
                continue;
            *level++ = 0;
            *how++ = 0;
            r->reads[r->nreads][0] = rest;
            r->reads[r->nreads][1] = level;
            r->reads[r->nreads++][2] = how;
        }
    }
    if (line_no == 0) {
        *why = "an empty rules file";
        return -2;
    }
    return 0;
}

/* ------------------------------------------------------------ classify */

enum kind { K_QUERY, K_EMPTY, K_LINK, K_COMPILE };
#define MAX_SOURCES 256
struct invocation {
    enum kind kind;
    int nsources, nothers, emits_object_only;
    const char *source[MAX_SOURCES], *language[MAX_SOURCES];
    const char *opt;       /* NULL: -O0 or none */
    const char *output;
};

/* clang's language for an input (cmdline.language_of). */
static const char *language_of(const char *path, const char *forced) {
    if (forced)
        return forced;
    if (!strcmp(path, "-"))
        return mode == MODE_CXX ? "c++" : "c";
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    while (*base == '.')
        base++;
    const char *dot = strrchr(base, '.');
    if (!dot)
        return NULL;
    int i = list_index(dot, suffixes);
    if (i < 0)
        return NULL; /* an object: clang hands unknown suffixes to the linker */
    const char *lang = suffix_languages[i];
    if (mode == MODE_CXX) {
        int j = list_index(lang, cxx_from);
        if (j >= 0)
            return cxx_to[j];
    }
    return lang;
}

static int all_digits(const char *s) {
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* cmdline._optimisation: 1 with *level set (NULL for -O0), 0 if not an -O flag */
static int optimisation(const char *flag, const char **level) {
    static char buf[64];
    const char *l;
    if (!strcmp(flag, "--optimize")) {
        *level = "1";
        return 1;
    }
    if (starts(flag, "--optimize="))
        l = flag + 11;
    else if (starts(flag, "-O"))
        l = flag + 2;
    else
        return 0;
    if (!*l)
        l = "1";
    if (all_digits(l)) {
        int zero = 1;
        for (const char *p = l; *p; p++)
            zero &= *p == '0';
        if (zero) {
            *level = NULL;
            return 1;
        }
    }
    if (all_digits(l) || !strcmp(l, "1") || !strcmp(l, "2") || !strcmp(l, "3") ||
        !strcmp(l, "s") || !strcmp(l, "z") || !strcmp(l, "fast") || !strcmp(l, "g")) {
        snprintf(buf, sizeof buf, "%s", l);
        *level = buf;
        return 1;
    }
    return 0;
}

static void add_input(struct invocation *inv, const char *arg, const char *forced) {
    const char *lang = language_of(arg, forced);
    if (!lang) {
        inv->nothers++;
    } else if (inv->nsources < MAX_SOURCES) {
        inv->source[inv->nsources] = arg;
        inv->language[inv->nsources++] = lang;
    } else {
        inv->nsources++; /* counted; too many to list: handed over below */
    }
}

/* cmdline.classify, for what the client needs: 0, or -1 when the call is
 * not one to decide here. */
static void classify(int argc, char **argv, struct invocation *inv) {
    memset(inv, 0, sizeof *inv);
    const char *forced = NULL;
    int query = 0, verbose = 0;
    for (int i = 0; i < argc;) {
        const char *arg = argv[i++];
        if (!strcmp(arg, "-") || arg[0] != '-') {
            add_input(inv, arg, forced);
            continue;
        }
        if (!strcmp(arg, "--")) {
            for (; i < argc; i++)
                add_input(inv, argv[i], forced);
            break;
        }
        if (in_list(arg, query_flags) || starts_any(arg, query_prefixes)) {
            query = 1;
            continue;
        }
        if (!strcmp(arg, "-v") || !strcmp(arg, "--verbose")) {
            verbose = 1;
            continue;
        }
        const char *level;
        if (optimisation(arg, &level)) {
            inv->opt = level;
            continue;
        }
        if (!strcmp(arg, "-c") || !strcmp(arg, "-S") || !strcmp(arg, "--compile") ||
            !strcmp(arg, "--assemble")) {
            inv->emits_object_only = 1;
            continue;
        }
        if (!strcmp(arg, "-emit-llvm"))
            continue;
        if (!strcmp(arg, "-x") || !strcmp(arg, "--language")) {
            if (i < argc) {
                forced = strcmp(argv[i], "none") ? argv[i] : NULL;
                i++;
            }
            continue;
        }
        if (starts(arg, "-x") || starts(arg, "--language=")) {
            const char *v = starts(arg, "--") ? arg + 11 : arg + 2;
            forced = strcmp(v, "none") ? v : NULL;
            continue;
        }
        if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) {
            if (i < argc)
                inv->output = argv[i++];
            continue;
        }
        if (starts(arg, "--output=")) {
            inv->output = arg + 9;
            continue;
        }
        if (starts(arg, "-o") && !starts(arg, "-objcmt") && !starts(arg, "-object")) {
            inv->output = arg + 2;
            continue;
        }
        if (in_list(arg, noskip_flags) || starts_any(arg, noskip_prefixes))
            continue;
        if (in_list(arg, skip1_flags)) {
            i++;
            continue;
        }
        if ((starts(arg, "-MF") || starts(arg, "-MT") || starts(arg, "-MQ") ||
             starts(arg, "-MJ")) && strlen(arg) > 3)
            continue;
        if (starts(arg, "-Wp,-MD,") || starts(arg, "-Wp,-MMD,"))
            continue;
        int n = list_index(arg, linkn_flags);
        if (n >= 0) {
            i += linkn_counts[n];
            continue;
        }
        if (in_list(arg, link_flags) || starts_any(arg, link_prefixes))
            continue;
        if (in_list(arg, separate_flags) && i < argc) {
            if (!strcmp(arg, "-Xclang") &&
                (in_list(argv[i], cc1_actions) || starts_any(argv[i], cc1_prefixes)))
                query = 1;
            i++;
        }
    }
    (void)verbose;
    if (query)
        inv->kind = K_QUERY;
    else if (!inv->nsources && !inv->nothers)
        inv->kind = K_EMPTY;
    else if (!inv->nsources)
        inv->kind = K_LINK;
    else
        inv->kind = K_COMPILE;
}

/* frontend.clang.why_not: 1 when the compile can be split. */
static int splittable(int argc, char **argv, const struct invocation *inv) {
    if (inv->kind != K_COMPILE || inv->nsources != 1 || inv->nothers)
        return 0;
    if (!inv->emits_object_only || (inv->output && !strcmp(inv->output, "-")))
        return 0;
    if (!strcmp(inv->source[0], "-"))
        return 0;
    struct stat st;
    if (inv->output && *inv->output && stat(inv->output, &st) == 0 && !S_ISREG(st.st_mode))
        return 0;
    int c = 0, other = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-c"))
            c = 1;
        else if (!strcmp(a, "-S") || !strcmp(a, "--compile") || !strcmp(a, "--assemble"))
            other = 1;
        if (in_list(a, ineligible_flags) || starts_any(a, ineligible_prefixes))
            return 0;
    }
    return c && !other;
}

/* Does an argument start with one of the space-separated prefixes ("*": any)? */
static int has_flag_prefix(int argc, char **argv, const char *prefixes) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", prefixes);
    char *save = NULL;
    for (char *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        if (!strcmp(p, "*"))
            return 1;
        for (int i = 0; i < argc; i++)
            if (starts(argv[i], p))
                return 1;
    }
    return 0;
}

static const char *level_key(const char *opt) {
    static const char *const known[] = {"1", "2", "3", "s", "z", "fast", "g", 0};
    return in_list(opt, known) ? opt : "4";
}

/* Where the call goes: NULL to hand it over (with *why), else the
 * passthrough code it is counted under. */
static const char *route(int argc, char **argv, const struct rules *r, const char **why,
                         struct invocation *out, int *split_read) {
    struct invocation inv;
    classify(argc, argv, &inv);
    *split_read = 0;
    if (inv.nsources > MAX_SOURCES) {
        *why = "more sources than the client lists";
        return NULL;
    }
    if ((inv.kind == K_COMPILE || inv.kind == K_LINK) && !inv.emits_object_only &&
        r->link_args && has_flag_prefix(argc, argv, r->link_args)) {
        *why = "a task may add to this link";
        return NULL;
    }
    if (inv.kind == K_LINK && inv.opt && !(inv.output && !strcmp(inv.output, "-")))
        for (int s = 0; s < r->nlink_step; s++)
            if (!strcmp(r->link_step[s][0], level_key(inv.opt)) &&
                has_flag_prefix(argc, argv, r->link_step[s][1])) {
                *why = "a task's link step may take this link";
                return NULL;
            }
    int tus = 0;
    for (int s = 0; s < inv.nsources; s++)
        tus += in_list(inv.language[s], tu_languages);
    if (inv.kind != K_COMPILE)
        return "not-compile";
    if (!tus)
        return "not-c";
    if (!inv.opt)
        return "not-optimised";
    if (r->reads_all) {
        *why = "capture or a decisions profile reads every compile";
        return NULL;
    }
    int split = -1;
    const char *level = level_key(inv.opt);
    for (int s = 0; s < inv.nsources; s++) {
        if (!in_list(inv.language[s], tu_languages))
            continue;
        for (int k = 0; k < r->nreads; k++) {
            if (strcmp(r->reads[k][0], inv.language[s]) || strcmp(r->reads[k][1], level))
                continue;
            if (split < 0)
                split = splittable(argc, argv, &inv);
            *out = inv;
            *split_read = split;
            if (!strcmp(r->reads[k][2], "always")) {
                *why = "a head reads this compile";
                return NULL;
            }
            if (split) {
                *why = "a task's build step reads this compile";
                return NULL;
            }
        }
    }
    return "no-use";
}

/* ------------------------------------------------------------ run */

/* Add counter lines ("name n\n"...) to `mire stats` (the driver sums a
 * name written twice). */
static void add_counts(const struct rules *r, const char *lines, size_t n) {
    if (!r->stats)
        return;
    int fd = open(r->stats, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0 && errno == ENOENT) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", r->stats);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            mkdir(dir, 0777);
            fd = open(r->stats, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
        }
    }
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX) == 0)
        (void)!write(fd, lines, n);
    close(fd);
}

static void count(const struct rules *r, const char *code) {
    char line[128];
    int n = snprintf(line, sizeof line, "calls 1\npassthrough.%s 1\n", code);
    if (n > 0 && (size_t)n < sizeof line)
        add_counts(r, line, (size_t)n);
}

/* The compiler with the user's arguments (after the launcher), in place of
 * this process. */
static int exec_final(const struct rules *r, const char *compiler, int argc, char **argv) {
    char **cmd = calloc((size_t)(r->nprefix + argc + 2), sizeof *cmd);
    int n = 0;
    for (int i = 0; i < r->nprefix; i++)
        cmd[n++] = (char *)r->prefix[i];
    cmd[n++] = (char *)compiler;
    for (int i = 0; i < argc; i++)
        cmd[n++] = argv[i];
    execvp(cmd[0], cmd);
    say("error", "cannot run '%s': %s", cmd[0], strerror(errno));
    return 127;
}

/* The Python driver on the call, in place of this process; the compiler
 * itself (found on PATH) when the driver cannot run. */
static int exec_python(int argc, char **argv, const char *rules_file, const char *why) {
    if (why && !quiet)
        say("warning", "%s; compiled by the Python driver", why);
    if (rules_file)
        setenv("MIRECC_CLIENT_RULES", rules_file, 1);
    char script[PATH_MAX];
    snprintf(script, sizeof script, "%s/%s", MIRECC_DRIVERS, script_names[mode]);
    char **cmd = calloc((size_t)argc + 2, sizeof *cmd);
    cmd[0] = script;
    for (int i = 0; i < argc; i++)
        cmd[i + 1] = argv[i];
    execv(script, cmd);
    unsetenv("MIRECC_CLIENT_RULES");
    if (!quiet)
        say("warning", "cannot run the Python driver %s (%s); compiled without mirecc", script,
            strerror(errno));
    const char *cc = mode == MODE_NVCC ? "nvcc" : mode == MODE_CXX ? "clang++" : "clang";
    cmd[0] = (char *)cc;
    execvp(cc, cmd);
    say("error", "cannot run '%s': %s", cc, strerror(errno));
    return 127;
}

/* ------------------------------------------------------------ direct mode */
/* SHA-256 (FIPS 180-4), for the manifests' keys and the files they list. */

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
};

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *c, const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4], f = c->h[5],
             g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha256_k[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(struct sha256 *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->used = 0;
}

static void sha256_add(struct sha256 *c, const void *data, size_t n) {
    const unsigned char *p = data;
    c->bytes += n;
    if (c->used) {
        size_t take = 64 - c->used < n ? 64 - c->used : n;
        memcpy(c->block + c->used, p, take);
        c->used += take, p += take, n -= take;
        if (c->used < 64)
            return;
        sha256_block(c, c->block);
        c->used = 0;
    }
    for (; n >= 64; p += 64, n -= 64)
        sha256_block(c, p);
    memcpy(c->block, p, n);
    c->used = n;
}

static void sha256_hex(struct sha256 *c, char hex[65]) {
    uint64_t bits = c->bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t n = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_add(c, pad, n + 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

/* A whole file (at most `limit` bytes): its bytes and length, or NULL. */
static unsigned char *slurp(const char *path, size_t limit, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= limit &&
        (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        ssize_t n;
        while (got <= (size_t)st.st_size &&
               (n = read(fd, buf + got, (size_t)st.st_size + 1 - got)) > 0)
            got += (size_t)n;
        if (got != (size_t)st.st_size) { /* changed while read */
            free(buf);
            buf = NULL;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

static int file_sha256(const char *path, char hex[65]) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct sha256 c;
    sha256_init(&c);
    unsigned char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        sha256_add(&c, buf, (size_t)n);
    close(fd);
    if (n < 0)
        return -1;
    sha256_hex(&c, hex);
    return 0;
}

static void bytes_sha256(const void *data, size_t n, char hex[65]) {
    struct sha256 c;
    sha256_init(&c);
    sha256_add(&c, data, n);
    sha256_hex(&c, hex);
}

/* Python's os.path.splitext(path)[0]'s length: the last dot of the base
 * name, leading dots not counted. */
static size_t stem_length(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = base;
    while (*p == '.')
        p++;
    const char *dot = strrchr(p, '.');
    return dot ? (size_t)(dot - path) : strlen(path);
}

/* Write `data` to `path` through a temporary file beside it, renamed over
 * it (readers see the old file or the new one); `durable`: flushed to the
 * disk first.  0, or -1 with nothing left behind. */
static int write_atomically(const char *path, const unsigned char *data, size_t n,
                            int durable) {
    char tmp[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        unsigned rnd = (unsigned)getpid() * 2654435761u ^ (unsigned)clock() ^ (unsigned)tries;
        if (snprintf(tmp, sizeof tmp, "%.*s.%s.%d-%08x.tmp", dirlen, path, path + dirlen,
                     (int)getpid(), rnd) >= (int)sizeof tmp)
            return -1;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    size_t done = 0;
    ssize_t w = 0;
    while (done < n && (w = write(fd, data + done, n - done)) > 0)
        done += (size_t)w;
    int ok = done == n && (!durable || fsync(fd) == 0);
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* A direct-mode hit served here, as the ML path serves it
 * (mirecc/tu/mlpath.py: run, _direct_hit, _kept_object; tu/compile.py):
 * the manifest under the key of this command (tu/direct.py: manifest_key)
 * lists every file the front end read with its SHA-256; when each still
 * has it, either the manifest names a kept object, which is copied (with
 * its dependency file) and nothing runs, or nothing was applied to the
 * TU, and the user's command runs as it is.  Counted as the driver counts
 * a hit (the manifest's "hit" line).  The exit status; -1 for a miss (the
 * call goes on to the driver), with *stale set when the rules' pipeline
 * keys may be out of date. */
static int direct_hit(int argc, char **argv, const struct rules *r, const char *compiler,
                      const struct invocation *inv, int *stale) {
    const char *version = NULL, *identity = r->identity[mode == MODE_CXX];
    for (int i = 0; i < r->npipeline; i++)
        if (!strcmp(r->pipeline[i][0], inv->language[0]))
            version = r->pipeline[i][1];
    if (!version || !identity || !r->direct_env || !r->manifests || !r->objects)
        return -1;
    for (int i = 0; i < r->nstamp; i++)
        if (unchanged(r->stamp[i]) != 1) {
            *stale = 1;
            return -1;
        }
    /* the key: tu/direct.py manifest_key, NUL-separated */
    char cwd[PATH_MAX], env[4096], hex[65];
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    struct sha256 c;
    sha256_init(&c);
    char head[64];
    int n = snprintf(head, sizeof head, "direct%s", r->direct_schema);
    sha256_add(&c, head, (size_t)n + 1);
    sha256_add(&c, version, strlen(version) + 1);
    sha256_add(&c, identity, strlen(identity) + 1);
    sha256_add(&c, cwd, strlen(cwd) + 1);
    snprintf(env, sizeof env, "%s", r->direct_env);
    char *save = NULL;
    for (char *name = strtok_r(env, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        const char *value = getenv(name);
        sha256_add(&c, name, strlen(name));
        sha256_add(&c, "=", 1);
        sha256_add(&c, value ? value : "", (value ? strlen(value) : 0) + 1);
    }
    sha256_add(&c, "args", 4);
    for (int i = 0; i < argc; i++) {
        sha256_add(&c, "", 1);
        sha256_add(&c, argv[i], strlen(argv[i]));
    }
    char key[65];
    sha256_hex(&c, key);
    /* the manifest: every file it lists unchanged */
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%.2s/%s.txt", r->manifests, key, key) >=
        (int)sizeof path)
        return -1;
    size_t len;
    char *text = (char *)slurp(path, 1 << 24, &len);
    if (!text)
        return -1;
    text[len] = 0;
    char magic[64];
    snprintf(magic, sizeof magic, "mirecc direct manifest %s", r->direct_schema);
    char *line_save = NULL, *line = strtok_r(text, "\n", &line_save);
    const char *object = NULL, *hit = NULL;
    int applied = -1;
    int ok = line && !strcmp(line, magic);
    while (ok && (line = strtok_r(NULL, "\n", &line_save))) {
        if (starts(line, "file ")) {
            char *name = strchr(line + 5, ' ');
            ok = name && name - (line + 5) == 64 && file_sha256(name + 1, hex) == 0 &&
                 !memcmp(hex, line + 5, 64);
        } else if (starts(line, "object ")) {
            object = line + 7;
        } else if (starts(line, "applied ")) {
            applied = atoi(line + 8);
        } else if (starts(line, "hit ")) {
            hit = line + 4;
        } else if (starts(line, "result ")) {
            break;
        }
    }
    /* what the hit adds to `mire stats`: tu/compile.py _finish */
    char counts[2048];
    size_t used = 0;
    if (ok && hit) {
        used = (size_t)snprintf(counts, sizeof counts, "calls 1\n%s", object ? "tus.object 1\n" : "");
        char pairs[1024];
        snprintf(pairs, sizeof pairs, "%s", hit);
        char *pair_save = NULL;
        for (char *pair = strtok_r(pairs, " ", &pair_save); pair && used < sizeof counts;
             pair = strtok_r(NULL, " ", &pair_save)) {
            char *eq = strchr(pair, '=');
            if (eq)
                *eq = ' ';
            used += (size_t)snprintf(counts + used, sizeof counts - used, "%s\n", pair);
        }
        ok = used < sizeof counts;
    }
    if (!ok || !hit || applied < 0) {
        free(text);
        return -1;
    }
    if (!object) {
        free(text);
        if (applied) /* its decisions' flags: the driver's */
            return -1;
        add_counts(r, counts, used);
        return exec_final(r, compiler, argc, argv);
    }
    /* the kept object (tu/objcache.py): "<key> <object sha>[:<dependency file sha>]" */
    char okey[65], digest[160];
    if (sscanf(object, "%64s %159s", okey, digest) != 2 || strlen(okey) != 64) {
        free(text);
        return -1;
    }
    free(text);
    char *dep_digest = strchr(digest, ':');
    if (dep_digest)
        *dep_digest++ = 0;
    int writes_dep = 0;
    const char *dep_named = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-MD") || !strcmp(argv[i], "-MMD"))
            writes_dep = 1;
        else if (!strcmp(argv[i], "-MF") && i + 1 < argc)
            dep_named = argv[i + 1];
        else if (starts(argv[i], "-MF") && argv[i][3])
            dep_named = argv[i] + 3;
    }
    if (writes_dep && !dep_digest)
        return -1;
    char opath[PATH_MAX], dpath[PATH_MAX], output[PATH_MAX], dep_file[PATH_MAX];
    snprintf(opath, sizeof opath, "%s/%.2s/%s.o", r->objects, okey, okey);
    snprintf(dpath, sizeof dpath, "%s/%.2s/%s.d", r->objects, okey, okey);
    size_t olen = 0, dlen = 0;
    unsigned char *obj = slurp(opath, (size_t)1 << 31, &olen), *dep = NULL;
    if (!obj || !olen)
        goto miss;
    bytes_sha256(obj, olen, hex);
    if (strcmp(hex, digest))
        goto miss;
    /* the output: -o, else the source's stem with .o (frontend/clang.py object_path) */
    if (inv->output) {
        snprintf(output, sizeof output, "%s", inv->output);
    } else {
        const char *base = strrchr(inv->source[0], '/');
        base = base ? base + 1 : inv->source[0];
        snprintf(output, sizeof output, "%.*s.o", (int)stem_length(base), base);
    }
    if (writes_dep) {
        if (!(dep = slurp(dpath, 1 << 26, &dlen)))
            goto miss;
        bytes_sha256(dep, dlen, hex);
        if (strcmp(hex, dep_digest))
            goto miss;
        if (dep_named)
            snprintf(dep_file, sizeof dep_file, "%s", dep_named);
        else
            snprintf(dep_file, sizeof dep_file, "%.*s.d", (int)stem_length(output), output);
        if (write_atomically(dep_file, dep, dlen, 0) != 0)
            goto miss;
    }
    if (write_atomically(output, obj, olen, 1) != 0)
        goto miss;
    utime(opath, NULL); /* recently used: trimmed last */
    free(obj);
    free(dep);
    add_counts(r, counts, used);
    return 0;
miss:
    free(obj);
    free(dep);
    return -1;
}

/* ------------------------------------------------------------ the server */

static volatile sig_atomic_t pending_signal;
static void on_signal(int sig) { pending_signal = sig; }

static int connect_to(const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    if (connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* seconds a server that could not start is left alone */
#define START_BACKOFF_S 60

/* Start the server (one client at a time: a lock beside the socket) and
 * connect; -1 with why when it does not come up (then, for
 * START_BACKOFF_S, calls go to the Python driver without trying again:
 * <sock>.failed, removed by a server that starts or `mire serve --stop`). */

static int start_and_connect(const char *dir, const char *sock, const char **why) {
    char lock_path[PATH_MAX];
    snprintf(lock_path, sizeof lock_path, "%s.start", sock);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0)
        flock(lock, LOCK_EX);
    int s = connect_to(sock); /* another client may have started it meanwhile */
    if (s >= 0) {
        if (lock >= 0)
            close(lock);
        return s;
    }
    /* a server that could not start a moment ago is not tried again on
     * every call of the build: each would pay a Python start for nothing */
    char failed[PATH_MAX];
    snprintf(failed, sizeof failed, "%s.failed", sock);
    struct stat fst;
    if (stat(failed, &fst) == 0 && time(NULL) - fst.st_mtime < START_BACKOFF_S &&
        time(NULL) >= fst.st_mtime) {
        *why = "the compile server failed to start less than a minute ago";
        if (lock >= 0)
            close(lock);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        /* the server keeps none of this call's descriptors */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != null)
                close(fd);
        if (chdir("/") != 0)
            _exit(127);
        setenv("TMPDIR", dir, 1);
        unsetenv("MIRECC_CLIENT_RULES");
        execl(MIRECC_PYTHON, MIRECC_PYTHON, "-m", "mirecc.driver.serve", "--socket",
              sock, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        *why = "cannot start the compile server";
        if (lock >= 0)
            close(lock);
        return -1;
    }
    const char *timeout_s = getenv("MIRECC_CLIENT_START_TIMEOUT");
    double timeout = timeout_s ? atof(timeout_s) : 20.0;
    struct timespec t0, now, nap = {0, 5 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        s = connect_to(sock);
        if (s >= 0)
            break;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            *why = "the compile server exited as it started";
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 > timeout) {
            *why = "the compile server did not come up";
            break;
        }
        nanosleep(&nap, NULL);
    }
    if (s < 0) { /* remembered for START_BACKOFF_S */
        int fd = open(failed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    } else {
        unlink(failed);
    }
    if (lock >= 0)
        close(lock);
    return s;
}

struct buf {
    char *data;
    size_t len, cap;
};

static void put(struct buf *b, const char *s) {
    size_t n = strlen(s) + 1;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 4096;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

static void put_int(struct buf *b, long v) {
    char s[32];
    snprintf(s, sizeof s, "%ld", v);
    put(b, s);
}

/* make's jobserver descriptors (--jobserver-auth=R,W), when open. */
static int jobserver_fds(int fds[2]) {
    const char *flags = getenv("MAKEFLAGS");
    if (!flags)
        return 0;
    const char *p = strstr(flags, "--jobserver-auth=");
    if (p)
        p += 17;
    else if ((p = strstr(flags, "--jobserver-fds=")))
        p += 16;
    else
        return 0;
    int r, w;
    if (sscanf(p, "%d,%d", &r, &w) != 2 || r < 3 || w < 3 || r == w)
        return 0;
    if (fcntl(r, F_GETFD) < 0 || fcntl(w, F_GETFD) < 0)
        return 0;
    fds[0] = r;
    fds[1] = w;
    return 2;
}

/* Run the call in the server: its exit status (this process dies of the
 * call's signal), or -1 with why when the server could not run it. */
static int run_in_server(int argc, char **argv, const char *rules_file, const char **why) {
    const char *dir = run_dir(why);
    if (!dir)
        return -1;
    char sock[PATH_MAX];
    snprintf(sock, sizeof sock, "%s/front-%s.sock", dir, MIRECC_TAG);
    int s = connect_to(sock);
    if (s < 0)
        s = start_and_connect(dir, sock, why);
    if (s < 0) {
        if (!*why)
            *why = "no compile server answers";
        return -1;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
        *why = "the working directory has no name";
        close(s);
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    struct buf b = {0};
    put(&b, "mirecc-client");
    put_int(&b, MIRECC_PROTOCOL);
    const char *version = getenv("MIRECC_DEBUG_CLIENT_VERSION"); /* the version fault's test */
    put(&b, version ? version : MIRECC_VERSION);
    put(&b, mode_names[mode]);
    put(&b, cwd);
    char m[16];
    snprintf(m, sizeof m, "%o", (unsigned)mask);
    put(&b, m);
    put(&b, "argv");
    put_int(&b, argc);
    for (int i = 0; i < argc; i++)
        put(&b, argv[i]);
    size_t nenv = 0;
    for (char **e = environ; *e; e++)
        nenv += strchr(*e, '=') && !starts(*e, "MIRECC_CLIENT_RULES=");
    put(&b, "env");
    put_int(&b, (long)nenv + (rules_file ? 1 : 0));
    for (char **e = environ; *e; e++)
        if (strchr(*e, '=') && !starts(*e, "MIRECC_CLIENT_RULES="))
            put(&b, *e);
    if (rules_file) {
        char *ask = malloc(strlen(rules_file) + 32);
        sprintf(ask, "MIRECC_CLIENT_RULES=%s", rules_file);
        put(&b, ask);
        free(ask);
    }
    int fds[5] = {0, 1, 2};
    int nfds = 3 + jobserver_fds(fds + 3);
    put(&b, "fds");
    put_int(&b, nfds);
    for (int i = 0; i < nfds; i++)
        put_int(&b, fds[i]);

    char head[9];
    snprintf(head, sizeof head, "%08zx", b.len);
    struct iovec iov = {.iov_base = head, .iov_len = 8};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 5)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    if (sendmsg(s, &msg, MSG_NOSIGNAL) != 8) {
        *why = "the compile server closed the connection";
        close(s);
        return -1;
    }
    for (size_t sent = 0; sent < b.len;) {
        ssize_t n = send(s, b.data + sent, b.len - sent, MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            *why = "the compile server closed the connection";
            close(s);
            return -1;
        }
        sent += (size_t)n;
    }
    free(b.data);

    /* signals from here on go to the call */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; i++)
        sigaction(forwarded[i], &sa, NULL);
    pid_t call = 0;
    int sent_signal = 0;
    char reply[4096];
    size_t len = 0;
    for (;;) {
        if (pending_signal && call > 0 && !sent_signal) {
            sent_signal = pending_signal;
            kill(-call, sent_signal);
        }
        ssize_t n = read(s, reply + len, sizeof reply - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        reply[len] = 0;
        char *nl;
        while ((nl = strchr(reply, '\n'))) {
            *nl = 0;
            if (starts(reply, "pid ")) {
                call = (pid_t)atol(reply + 4);
            } else if (starts(reply, "exit ")) {
                close(s);
                return atoi(reply + 5);
            } else if (starts(reply, "signal ")) {
                int sig = atoi(reply + 7);
                close(s);
                signal(sig, SIG_DFL);
                raise(sig);
                return 128 + sig;
            } else if (starts(reply, "retry ")) {
                close(s);
                return -2;
            } else if (starts(reply, "refused ") || starts(reply, "error ")) {
                static char msg[1024];
                snprintf(msg, sizeof msg, "the compile server refused the call: %s",
                         strchr(reply, ' ') + 1);
                *why = msg;
                close(s);
                return -1;
            }
            len -= (size_t)(nl + 1 - reply);
            memmove(reply, nl + 1, len + 1);
        }
        if (len >= sizeof reply - 1)
            len = 0;
    }
    close(s);
    int sig = sent_signal ? sent_signal : pending_signal;
    if (sig) { /* the call was stopped as asked: so is this process */
        signal(sig, SIG_DFL);
        raise(sig);
        return 128 + sig;
    }
    *why = call ? "the compile server's call ended without an answer (killed?)"
                : "the compile server closed the connection";
    return -1;
}

/* ------------------------------------------------------------ main */

static int hand_over(int argc, char **argv, const struct rules *r, const char *rules_file) {
    if (r && !r->server)
        return exec_python(argc, argv, rules_file, NULL);
    const char *why = NULL;
    int code = run_in_server(argc, argv, rules_file, &why);
    if (code == -2) /* the server was older than mirecc: it exits, a new one runs it */
        code = run_in_server(argc, argv, rules_file, &why);
    if (code == -2)
        why = "the compile server restarted twice";
    if (code >= 0)
        return code;
    /* the Python driver writes the rules and runs the call */
    return exec_python(argc, argv, rules_file, why);
}

int main(int argc, char **argv) {
    const char *name = strrchr(argv[0], '/');
    name = name ? name + 1 : argv[0];
    size_t nlen = strlen(name);
    mode = strstr(name, "nvcc")                          ? MODE_NVCC
           : (nlen >= 2 && !strcmp(name + nlen - 2, "++")) ? MODE_CXX
                                                         : MODE_C;
    argc--, argv++;
    const char *q = getenv("MIRECC_QUIET");
    quiet = q && *q && strcmp(q, "0");
    const char *client = getenv("MIRECC_CLIENT");
    if (client && !strcmp(client, "0")) /* the Python driver only */
        return exec_python(argc, argv, NULL, NULL);
    /* the rules' replay test: say where the call would go, run nothing */
    int classify_only = getenv("MIRECC_CLIENT_CLASSIFY") != NULL;
#define HAND_OVER(r, file, why)                                                                \
    do {                                                                                       \
        if (classify_only) {                                                                   \
            printf("handoff %s\n", why);                                                       \
            return 0;                                                                          \
        }                                                                                      \
        return hand_over(argc, argv, r, file);                                                 \
    } while (0)
    /* server: false (MIRECC_SERVER) before any rules say so: the Python driver */
    const char *server = getenv("MIRECC_SERVER");
    int no_server = server && (!*server || !strcmp(server, "0") || !strcasecmp(server, "false") ||
                               !strcasecmp(server, "no") || !strcasecmp(server, "off"));
    struct rules no_rules = {.server = 0};
    const struct rules *early = no_server ? &no_rules : NULL;
    if (mode == MODE_NVCC)
        HAND_OVER(early, NULL, "mirecc-nvcc calls go to the driver");
    if (getenv("MIRECC_DEBUG_FAULT"))
        HAND_OVER(early, NULL, "a fault is injected");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '@')
            HAND_OVER(early, NULL, "a response file");
        if (!strcmp(a, "--explain") || starts(a, "--explain=") || in_list(a, own_options))
            HAND_OVER(early, NULL, "one of mirecc's own options");
    }
    const char *why = NULL;
    const char *dir = run_dir(&why);
    if (!dir) {
        if (classify_only)
            HAND_OVER(NULL, NULL, why);
        return exec_python(argc, argv, NULL, why);
    }
    char rules_file[PATH_MAX];
    rules_path(dir, rules_file, sizeof rules_file);
    struct rules r;
    int loaded = load_rules(rules_file, &r, &why);
    if (loaded == -2 && !quiet && !classify_only)
        say("warning", "%s: %s; calls go through the Python driver", rules_file, why);
    if (loaded != 0)
        HAND_OVER(early, rules_file, why);
    if (!r.warnings)
        quiet = 1;
    const char *compiler = r.compiler[mode == MODE_CXX];
    if (!compiler)
        HAND_OVER(&r, NULL, "no compiler found for these settings");
    struct invocation inv;
    int split_read = 0;
    const char *code = r.disable ? "disabled" : route(argc, argv, &r, &why, &inv, &split_read);
    if (!code && split_read && r.direct_schema && !classify_only) {
        /* the ML path would try direct mode first: a hit needs no Python */
        int stale = 0;
        int rc = direct_hit(argc, argv, &r, compiler, &inv, &stale);
        if (rc >= 0)
            return rc;
        if (stale) /* the driver writes the rules again */
            HAND_OVER(&r, rules_file, "the rules' pipeline keys are stale");
    }
    if (!code)
        HAND_OVER(&r, NULL, why);
    if (classify_only) {
        printf("plain %s\n", code);
        return 0;
    }
    count(&r, code);
    return exec_final(&r, compiler, argc, argv);
}
