/* The replica simulator's default configuration, compiled: the scheduler policy policy.VLLMv1 on the
 * KV allocator kv.KVBlocks, one pool of independent replicas (clock.run_replicas), in Python.
 *
 * WHY: verification replays 20,000 requests per model and check (rounds, trim, over-provisioning),
 * and the Python event loop was about 90% of a verified `hetinfra plan`. This file is the same
 * algorithm statement by statement: the same events in the same order, the same integer
 * arithmetic (Python's floor division and modulo, below), and the same floating-point operations
 * in the same order (compiled with -ffp-contract=off, so no fused multiply-add), so its results are
 * bit-identical to the Python code's (tests/sim/test_core.py checks it on drawn units).
 * The Python is the reference: read it for the why of every rule; this file only keeps its
 * structure (names follow it: waiting, running, prefilling, the decode aggregate, windows).
 * It states ONE policy and never grows another: any other scheduler policy, KV allocator or route
 * between pools (hetinfra/sim/pools.py) runs on the Python loop (core.compiled decides).
 *
 * Entry point: run(stages, factor, pp, budget, blocks, block_size, max_seqs, replicas,
 *                  arrival, prompt, output, first, finish, replica, preempted, stats)
 * stages: a bytes-like of 19 doubles per stage (the estimator Engine's coefficients, STAGE order);
 * arrival/prompt/output: the unit's requests in arrival order (float64, int64, int64); first,
 * finish (float64), replica, preempted (int64): filled per request; stats (float64, NSTATS per replica):
 * busy_s, seq_area, steps, q_area, q_max, kv_area, kv_max, preemptions, q_t, used, seq_max.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

/* statistics per replica, in hetinfra.sim.core.STATS's order */
#define NSTATS 11

/* the estimator Engine's step coefficients (hetinfra.perf.estimator.Engine.step_s) */
enum { W_GPU, MOE_P, BW, KV_TOK_BW, C_DLIN, C_DATTN, C_PLIN, C_PATTN, PP, SERIAL, AR_LAT, AR_TOK, P2P_LAT, P2P_TOK,
       FIXED, PER_SEQ, PER_REQ, ISL, OVERLAP, NCOEF };

typedef struct {
    const double *st;  /* nstages x NCOEF */
    int nst;
    int scaled;
    double factor;
} StepModel;

static double stage_step(const double *s, double pt, double pos, double b, double ctx, double seqs) {
    double tok = b + pt;  /* every token of the step routes to its experts (MoE weight traffic) */
    double w = s[MOE_P] < 1.0 ? s[W_GPU] * (1.0 - pow(1.0 - s[MOE_P], tok)) : s[W_GPU];
    double mem = w / s[BW] + ctx * s[KV_TOK_BW];
    double comp = b * s[C_DLIN] + ctx * s[C_DATTN] + pt * s[C_PLIN] + pos * s[C_PATTN];
    double sr = s[SERIAL];
    double adm = pt / s[ISL];
    double gpu = s[PP] * ((mem > comp ? mem + sr * comp : comp + sr * mem) + s[AR_LAT] + s[AR_TOK] * tok)
                 + s[P2P_LAT] + s[P2P_TOK] * tok;
    double cpu = s[FIXED] + s[PER_SEQ] * seqs + s[PER_REQ] * adm;
    return gpu + cpu - s[OVERLAP] * (cpu < gpu ? cpu : gpu);
}

static double step_s(const StepModel *m, double pt, double pos, double b, double ctx, double seqs) {
    double v = stage_step(m->st, pt, pos, b, ctx, seqs);
    for (int k = 1; k < m->nst; k++) {  /* a mixed pipeline: its slowest stage (Python's max keeps the first) */
        double x = stage_step(m->st + (size_t)k * NCOEF, pt, pos, b, ctx, seqs);
        if (x > v) v = x;
    }
    return m->scaled ? m->factor * v : v;
}

/* Python's // and % (floor), for operands that may be negative */
static inline i64 pymod(i64 a, i64 b) { i64 r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline i64 pyfloordiv(i64 a, i64 b) { i64 q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }

typedef struct { i64 clock, seq, gen, req; } Fin;
typedef struct { i64 req, n; } Chunk;

/* the unit's requests (replica.Request) */
typedef struct {
    const double *arrival;
    const i64 *prompt, *output;
    double *first, *finish;
    i64 *replica, *preempted;
    i64 *g, *computed, *xb, *gen;
    char *dec, *running;
    i64 *prev, *next;  /* the running list of the request's replica, in admission order */
} Reqs;

typedef struct {
    /* waiting: a ring buffer of request indices */
    i64 *wq; i64 wq_head, wq_len, wq_cap;
    i64 run_head, run_tail, n_running;
    i64 *pf; i64 pf_len;  /* prefilling, in admission order */
    i64 clock, nd, sum_xb; i64 *phase;
    Fin *fin; i64 fin_len, fin_cap; i64 seq;
    i64 used, blocks, budget, bs, max_seqs, pp;
    int busy; double busy_until; i64 version;
    double w_start, w_d0, w_a; i64 w_k; int w_pure; Chunk *chunks; i64 n_chunks; i64 w_used0;
    i64 outstanding, preemptions, steps, q_max, kv_max, seq_max;
    double busy_s, seq_area, q_area, q_t, kv_area;
} Rep;

typedef struct { const StepModel *m; Reqs *r; } Ctx;

/* set when an allocation fails (oom) or a step lasts no positive finite time (bad_step: the step
 * model is broken, and the reference raises); per thread, because run() releases the GIL */
static _Thread_local int oom, bad_step;

static inline double checked(double d) { if (!(d > 0.0) || d == HUGE_VAL) bad_step = 1; return d; }

static void *xmalloc(size_t n) { void *p = calloc(n ? n : 1, 1); if (!p) oom = 1; return p; }

/* ---- binary min-heaps, as Python's heapq: the entries' keys are unique, so the pop order is the same ---- */
#define DEFINE_HEAP(NAME, T, LT)                                                                  \
    static void NAME##_push(T **h, i64 *len, i64 *cap, T e) {                                     \
        if (*len == *cap) {                                                                       \
            i64 ncap = *cap ? 2 * *cap : 64;                                                      \
            T *nh = realloc(*h, (size_t)ncap * sizeof(T));                                        \
            if (!nh) { oom = 1; return; }                                                         \
            *h = nh; *cap = ncap;                                                                 \
        }                                                                                         \
        i64 i = (*len)++;                                                                         \
        while (i > 0) {                                                                           \
            i64 up = (i - 1) / 2;                                                                 \
            if (!LT(&e, &(*h)[up])) break;                                                        \
            (*h)[i] = (*h)[up]; i = up;                                                           \
        }                                                                                         \
        (*h)[i] = e;                                                                              \
    }                                                                                             \
    static T NAME##_pop(T *h, i64 *len) {                                                         \
        T top = h[0], last = h[--(*len)];                                                         \
        i64 i = 0, n = *len;                                                                      \
        while (1) {                                                                               \
            i64 c = 2 * i + 1;                                                                    \
            if (c >= n) break;                                                                    \
            if (c + 1 < n && LT(&h[c + 1], &h[c])) c++;                                           \
            if (!LT(&h[c], &last)) break;                                                         \
            h[i] = h[c]; i = c;                                                                   \
        }                                                                                         \
        if (n) h[i] = last;                                                                       \
        return top;                                                                               \
    }

/* a replica's finishing clocks (clock, seq, gen, request): by (clock, seq) */
static inline int fin_lt(const Fin *a, const Fin *b) { return a->clock < b->clock || (a->clock == b->clock && a->seq < b->seq); }
DEFINE_HEAP(fin, Fin, fin_lt)

static void fin_push_(Rep *p, Fin e) { fin_push(&p->fin, &p->fin_len, &p->fin_cap, e); }
static Fin fin_pop_(Rep *p) { return fin_pop(p->fin, &p->fin_len); }

/* ---- helpers (replica.Replica's) ---- */
static inline i64 blocks_for(const Rep *p, i64 tokens) { return -pyfloordiv(-tokens, p->bs); }

static inline void queue_mark(Rep *p, double t) { p->q_area += (double)p->wq_len * (t - p->q_t); p->q_t = t; }

static inline void set_busy(Rep *p, int busy, double until) { p->busy = busy; p->busy_until = until; p->version++; }

static i64 new_blocks(const Rep *p, i64 k) {
    if (!p->nd || k <= 0) return 0;
    i64 full = pyfloordiv(k, p->bs), r = pymod(k, p->bs), s = 0;
    for (i64 j = 0; j < r; j++) s += p->phase[pymod(-(p->clock + j), p->bs)];
    return full * p->nd + s;
}

static i64 max_steps_for(const Rep *p, i64 free_) {
    if (!p->nd) return (i64)1 << 60;
    i64 q = pyfloordiv(free_, p->nd), rem = pymod(free_, p->nd), r = 0, acc = 0;
    while (r < p->bs - 1) {
        acc += p->phase[pymod(-(p->clock + r), p->bs)];
        if (acc > rem) break;
        r++;
    }
    return q * p->bs + r;
}

static inline double span(const Rep *p, i64 k) { return (double)k * p->w_d0 + p->w_a * (double)k * (double)(k - 1) * 0.5; }

static i64 steps_until(const Rep *p, double h) {
    double d0 = p->w_d0, a = p->w_a;
    i64 j;
    if (h <= d0) return 1;
    if (a > 0) {
        double b = d0 - 0.5 * a;
        j = (i64)ceil((-b + sqrt(b * b + 2.0 * a * h)) / a);
    } else {
        j = (i64)ceil(h / d0);
    }
    if (j < 1) j = 1;
    while (j > 1 && span(p, j - 1) >= h) j--;
    while (span(p, j) < h) j++;
    return j;
}

static void wq_push_back(Rep *p, i64 x) { p->wq[(p->wq_head + p->wq_len) % p->wq_cap] = x; p->wq_len++; }
static void wq_push_front(Rep *p, i64 x) { p->wq_head = (p->wq_head + p->wq_cap - 1) % p->wq_cap; p->wq[p->wq_head] = x; p->wq_len++; }
static i64 wq_front(const Rep *p) { return p->wq[p->wq_head]; }
static void wq_pop_front(Rep *p) { p->wq_head = (p->wq_head + 1) % p->wq_cap; p->wq_len--; }

static void run_append(Rep *p, Reqs *r, i64 x) {
    r->running[x] = 1; r->prev[x] = p->run_tail; r->next[x] = -1;
    if (p->run_tail >= 0) r->next[p->run_tail] = x; else p->run_head = x;
    p->run_tail = x; p->n_running++;
}

static void run_remove(Rep *p, Reqs *r, i64 x) {
    r->running[x] = 0;
    if (r->prev[x] >= 0) r->next[r->prev[x]] = r->next[x]; else p->run_head = r->next[x];
    if (r->next[x] >= 0) r->prev[r->next[x]] = r->prev[x]; else p->run_tail = r->prev[x];
    p->n_running--;
}

static void pf_remove(Rep *p, i64 x) {
    for (i64 i = 0; i < p->pf_len; i++) {
        if (p->pf[i] == x) {
            memmove(p->pf + i, p->pf + i + 1, (size_t)(p->pf_len - i - 1) * sizeof(i64));
            p->pf_len--;
            return;
        }
    }
}

/* ---- the decode aggregate ---- */
static void to_decode(Rep *p, Reqs *r, i64 x) {
    r->dec[x] = 1;
    i64 xb = r->computed[x] - p->clock;
    r->xb[x] = xb;
    p->nd++;
    p->sum_xb += xb;
    p->phase[pymod(xb, p->bs)]++;
    p->seq++;
    Fin e = {p->clock + r->output[x] - r->g[x], p->seq, r->gen[x], x};
    fin_push_(p, e);
}

static void leave_decode(Rep *p, Reqs *r, i64 x) {
    r->computed[x] = r->xb[x] + p->clock;
    r->g[x] = r->computed[x] - r->prompt[x] + 1;
    r->dec[x] = 0;
    r->gen[x]++;
    p->nd--;
    p->sum_xb -= r->xb[x];
    p->phase[pymod(r->xb[x], p->bs)]--;
}

static void finish(Rep *p, Reqs *r, i64 x, double t) {
    if (r->dec[x]) leave_decode(p, r, x);
    r->finish[x] = t;
    p->used -= blocks_for(p, r->computed[x]);
    run_remove(p, r, x);
    p->outstanding--;
}

static i64 preempt(Rep *p, Reqs *r, double t) {
    i64 v = p->run_tail;
    if (r->dec[v]) leave_decode(p, r, v); else pf_remove(p, v);
    p->used -= blocks_for(p, r->computed[v]);
    r->computed[v] = 0;
    run_remove(p, r, v);
    queue_mark(p, t);
    wq_push_front(p, v);
    if (p->wq_len > p->q_max) p->q_max = p->wq_len;
    r->preempted[v]++;
    p->preemptions++;
    return v;
}

/* ---- the scheduler ---- */
static void decode_window(Rep *p, const Ctx *c, double t, i64 free_) {
    Reqs *r = c->r;
    while (p->fin[0].gen != r->gen[p->fin[0].req] || !r->dec[p->fin[0].req]) fin_pop_(p);
    i64 k = p->fin[0].clock - p->clock, lim = max_steps_for(p, free_);
    if (lim < k) k = lim;
    double nd = (double)p->nd, pp = (double)p->pp, seqs = (double)p->n_running;
    i64 ctx0 = p->sum_xb + p->nd * (p->clock + 1);
    double d0 = checked(step_s(c->m, 0.0, 0.0, nd / pp, (double)ctx0 / pp, seqs));
    double a = 0.0;
    if (k > 1) {
        a = step_s(c->m, 0.0, 0.0, nd / pp, (double)(ctx0 + p->nd) / pp, seqs) - d0;
        double last = checked(step_s(c->m, 0.0, 0.0, nd / pp, (double)(ctx0 + p->nd * (k - 1)) / pp, seqs));
        if (fabs(d0 + a * (double)(k - 1) - last) > 1e-9 * last) {
            i64 lo = 1, hi = k - 1;
            while (hi - lo > 1) {
                i64 mid = pyfloordiv(lo + hi, 2);
                double v = step_s(c->m, 0.0, 0.0, nd / pp, (double)(ctx0 + p->nd * mid) / pp, seqs);
                if (fabs(d0 + a * (double)mid - v) <= 1e-9 * v) lo = mid; else hi = mid;
            }
            k = lo + 1;
        }
    }
    p->w_start = t; p->w_d0 = d0; p->w_a = a; p->w_k = k; p->w_pure = 1; p->n_chunks = 0;
    p->w_used0 = p->used;
    set_busy(p, 1, t + span(p, k));
}

static void mixed_step(Rep *p, const Ctx *c, double t) {
    Reqs *r = c->r;
    int preempted = 0;
    if (p->nd) {
        i64 need = p->phase[pymod(-p->clock, p->bs)];
        while (need > p->blocks - p->used) {
            preempt(p, r, t);
            preempted = 1;
            need = p->nd ? p->phase[pymod(-p->clock, p->bs)] : 0;
        }
        p->used += need;
    }
    i64 budget = p->budget - p->nd;
    p->n_chunks = 0;
    /* a snapshot of prefilling: preemptions below remove from it */
    i64 npf = p->pf_len;
    i64 *snap = npf ? malloc((size_t)npf * sizeof(i64)) : NULL;
    if (npf && !snap) { oom = 1; return; }
    if (npf) memcpy(snap, p->pf, (size_t)npf * sizeof(i64));
    for (i64 i = 0; i < npf; i++) {
        i64 x = snap[i];
        if (!r->running[x]) continue;
        i64 n = r->prompt[x] + r->g[x] - r->computed[x];
        if (budget < n) n = budget;
        if (n <= 0) break;
        i64 nb = blocks_for(p, r->computed[x] + n) - blocks_for(p, r->computed[x]);
        while (nb > p->blocks - p->used) {
            preempted = 1;
            if (preempt(p, r, t) == x) break;
        }
        if (!r->running[x]) break;
        p->used += nb;
        p->chunks[p->n_chunks].req = x; p->chunks[p->n_chunks].n = n; p->n_chunks++;
        budget -= n;
    }
    free(snap);
    if (!preempted) {
        while (p->wq_len && budget > 0 && p->n_running < p->max_seqs) {
            i64 x = wq_front(p);
            i64 n = r->prompt[x] + r->g[x];
            if (budget < n) n = budget;
            i64 nb = blocks_for(p, n);
            if (nb > p->blocks - p->used) break;
            queue_mark(p, t);
            wq_pop_front(p);
            run_append(p, r, x);
            p->pf[p->pf_len++] = x;
            p->used += nb;
            p->chunks[p->n_chunks].req = x; p->chunks[p->n_chunks].n = n; p->n_chunks++;
            budget -= n;
        }
    }
    i64 nd = p->nd;
    if (!nd && !p->n_chunks) {
        p->w_k = 0;
        set_busy(p, 0, 0.0);
        return;
    }
    i64 pt = 0, pos = 0;
    for (i64 i = 0; i < p->n_chunks; i++) {
        i64 n = p->chunks[i].n;
        pt += n;
        pos += n * r->computed[p->chunks[i].req] + pyfloordiv(n * (n - 1), 2);
    }
    double pp = (double)p->pp;
    i64 ctx = p->sum_xb + nd * (p->clock + 1);
    double d = checked(step_s(c->m, (double)pt / pp, (double)pos / pp, (double)nd / pp, (double)ctx / pp,
                              (double)p->n_running));
    p->w_start = t; p->w_d0 = d; p->w_a = 0.0; p->w_k = 1; p->w_pure = 0;
    set_busy(p, 1, t + d);
}

static void schedule(Rep *p, const Ctx *c, double t) {
    Reqs *r = c->r;
    i64 nd = p->nd, free_ = p->blocks - p->used;
    if (nd && !p->pf_len) {
        i64 need = p->phase[pymod(-p->clock, p->bs)];
        if (need <= free_) {
            i64 left = p->budget - nd;
            int pure = !p->wq_len || left <= 0 || p->n_running >= p->max_seqs;
            if (!pure) {
                i64 x = wq_front(p), n = r->prompt[x] + r->g[x];
                if (left < n) n = left;
                pure = blocks_for(p, n) > free_ - need;
            }
            if (pure) { decode_window(p, c, t, free_); return; }
        }
    }
    mixed_step(p, c, t);
}

static void add(Rep *p, Reqs *r, i64 x, double t) {
    (void)r;
    queue_mark(p, t);
    wq_push_back(p, x);
    p->outstanding++;
    if (p->wq_len > p->q_max) p->q_max = p->wq_len;
    if (!p->busy) {
        p->w_start = t; p->w_d0 = 0.0; p->w_a = 0.0; p->w_k = 0; p->w_pure = 0; p->n_chunks = 0;
        set_busy(p, 1, t);
    } else if (p->w_k > 1) {
        i64 j = steps_until(p, t - p->w_start);
        if (j < p->w_k) {
            p->w_k = j;
            set_busy(p, 1, p->w_start + span(p, j));
        }
    }
}

static void complete(Rep *p, const Ctx *c) {
    Reqs *r = c->r;
    double t = p->busy_until;
    i64 k = p->w_k;
    double dur = (double)k * p->w_d0 + p->w_a * (double)k * (double)(k - 1) * 0.5;
    p->busy_s += dur;
    p->seq_area += (double)p->n_running * dur;
    if (p->n_running > p->seq_max) p->seq_max = p->n_running;
    p->steps += k;
    if (p->w_pure) {
        if (p->nd) p->used += new_blocks(p, k);
        p->kv_area += 0.5 * (double)(p->w_used0 + p->used) * dur;
    } else {
        p->kv_area += (double)p->used * dur;
    }
    if (p->used > p->kv_max) p->kv_max = p->used;
    if (p->nd) p->clock += k;
    while (p->fin_len && p->fin[0].clock <= p->clock) {
        Fin e = fin_pop_(p);
        if (e.gen == r->gen[e.req] && r->dec[e.req]) finish(p, r, e.req, t);
    }
    if (!p->w_pure) {
        for (i64 i = 0; i < p->n_chunks; i++) {
            i64 x = p->chunks[i].req, n = p->chunks[i].n;
            r->computed[x] += n;
            if (r->computed[x] == r->prompt[x] + r->g[x]) {
                r->g[x]++;
                if (r->g[x] == 1) r->first[x] = t;
                pf_remove(p, x);
                if (r->g[x] >= r->output[x]) finish(p, r, x, t); else to_decode(p, r, x);
            }
        }
    }
    schedule(p, c, t);
}

/* ---- run_replicas: the caller's event heap of (busy_until, replica, version) ---- */
typedef struct { double t; i64 i, ver; } Ev;

static inline int ev_lt(const Ev *a, const Ev *b) {
    return a->t < b->t || (a->t == b->t && (a->i < b->i || (a->i == b->i && a->ver < b->ver)));
}
DEFINE_HEAP(ev, Ev, ev_lt)

typedef struct { Ev *h; i64 len, cap; } Heap;

static void ev_push_(Heap *q, Ev e) { ev_push(&q->h, &q->len, &q->cap, e); }

static void until(Heap *q, Rep *reps, const Ctx *c, double t, int all) {
    while (q->len && !oom && !bad_step && (all || q->h[0].t < t)) {
        Ev e = ev_pop(q->h, &q->len);
        Rep *p = &reps[e.i];
        if (e.ver != p->version) continue;
        complete(p, c);
        if (p->busy) { Ev n = {p->busy_until, e.i, p->version}; ev_push_(q, n); }
    }
}

static int simulate(const StepModel *m, i64 pp, i64 budget, i64 blocks, i64 bs, i64 max_seqs, i64 nrep, i64 n,
                    Reqs *r, double *stats) {
    Rep *reps = xmalloc((size_t)nrep * sizeof(Rep));
    Heap q = {0};
    Ctx c = {m, r};
    if (!reps) return -1;
    for (i64 i = 0; i < nrep && !oom; i++) {
        Rep *p = &reps[i];
        p->wq_cap = n + 1; p->wq = xmalloc((size_t)p->wq_cap * sizeof(i64));
        p->pf = xmalloc((size_t)(max_seqs + 1) * sizeof(i64));
        p->chunks = xmalloc((size_t)(max_seqs + 1) * sizeof(Chunk));
        p->phase = xmalloc((size_t)bs * sizeof(i64));
        p->run_head = p->run_tail = -1;
        p->blocks = blocks; p->budget = budget; p->bs = bs; p->max_seqs = max_seqs; p->pp = pp;
    }
    for (i64 x = 0; x < n && !oom && !bad_step; x++) {
        double t = r->arrival[x];
        until(&q, reps, &c, t, 0);
        i64 i = 0, best = reps[0].outstanding;
        for (i64 j = 1; j < nrep; j++) {
            if (reps[j].outstanding < best) { i = j; best = reps[j].outstanding; }
        }
        Rep *p = &reps[i];
        r->replica[x] = i;
        i64 ver = p->version;
        add(p, r, x, t);
        if (p->version != ver && p->busy) { Ev e = {p->busy_until, i, p->version}; ev_push_(&q, e); }
    }
    until(&q, reps, &c, 0.0, 1);
    for (i64 i = 0; i < nrep; i++) {
        Rep *p = &reps[i];
        double *s = stats + NSTATS * i;
        s[0] = p->busy_s; s[1] = p->seq_area; s[2] = (double)p->steps; s[3] = p->q_area; s[4] = (double)p->q_max;
        s[5] = p->kv_area; s[6] = (double)p->kv_max; s[7] = (double)p->preemptions; s[8] = p->q_t; s[9] = (double)p->used;
        s[10] = (double)p->seq_max;
        free(p->wq); free(p->pf); free(p->chunks); free(p->phase); free(p->fin);
    }
    free(reps);
    free(q.h);
    return oom ? -1 : bad_step ? -2 : 0;
}

/* ---- the Python entry point ---- */
static int get_buf(PyObject *o, Py_buffer *b, int writable, Py_ssize_t itemsize, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (b->len != itemsize * n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", what, b->len, itemsize * n);
        PyBuffer_Release(b);
        b->obj = NULL;
        return -1;
    }
    return 0;
}

static PyObject *core_run(PyObject *self, PyObject *args) {
    PyObject *o_st, *o_arr, *o_pr, *o_out, *o_first, *o_fin, *o_rep, *o_pre, *o_stats;
    int scaled;
    double factor;
    long long pp, budget, blocks, bs, max_seqs, nrep;
    (void)self;
    if (!PyArg_ParseTuple(args, "OpdLLLLLLOOOOOOOO", &o_st, &scaled, &factor, &pp, &budget, &blocks, &bs, &max_seqs,
                          &nrep, &o_arr, &o_pr, &o_out, &o_first, &o_fin, &o_rep, &o_pre, &o_stats))
        return NULL;
    if (bs < 1 || max_seqs < 1 || nrep < 1 || pp < 1) {
        PyErr_SetString(PyExc_ValueError, "block_size, max_seqs, replicas and pp must be >= 1");
        return NULL;
    }
    Py_buffer b[9];
    memset(b, 0, sizeof(b));
    PyObject *res = NULL;
    Py_ssize_t n;
    if (PyObject_GetBuffer(o_st, &b[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (b[0].len == 0 || b[0].len % (Py_ssize_t)(NCOEF * sizeof(double))) {
        PyErr_SetString(PyExc_ValueError, "stages: a positive multiple of 19 doubles expected");
        goto done;
    }
    if (PyObject_GetBuffer(o_arr, &b[1], PyBUF_C_CONTIGUOUS) < 0) goto done;
    n = b[1].len / (Py_ssize_t)sizeof(double);
    if (get_buf(o_pr, &b[2], 0, 8, n, "prompt") || get_buf(o_out, &b[3], 0, 8, n, "output")
        || get_buf(o_first, &b[4], 1, 8, n, "first") || get_buf(o_fin, &b[5], 1, 8, n, "finish")
        || get_buf(o_rep, &b[6], 1, 8, n, "replica") || get_buf(o_pre, &b[7], 1, 8, n, "preempted")
        || get_buf(o_stats, &b[8], 1, 8, NSTATS * (Py_ssize_t)nrep, "stats"))
        goto done;
    {
        StepModel m = {(const double *)b[0].buf, (int)(b[0].len / (Py_ssize_t)(NCOEF * sizeof(double))), scaled, factor};
        Reqs r = {(const double *)b[1].buf, (const i64 *)b[2].buf, (const i64 *)b[3].buf, (double *)b[4].buf,
                  (double *)b[5].buf, (i64 *)b[6].buf, (i64 *)b[7].buf};
        size_t sz = (size_t)(n ? n : 1);
        oom = bad_step = 0;
        r.g = xmalloc(sz * 8); r.computed = xmalloc(sz * 8); r.xb = xmalloc(sz * 8); r.gen = xmalloc(sz * 8);
        r.prev = xmalloc(sz * 8); r.next = xmalloc(sz * 8); r.dec = xmalloc(sz); r.running = xmalloc(sz);
        for (Py_ssize_t i = 0; i < n; i++) { r.first[i] = r.finish[i] = NAN; r.preempted[i] = 0; r.replica[i] = -1; }
        int rc = oom ? -1 : 0;
        if (!rc) {
            Py_BEGIN_ALLOW_THREADS
            rc = simulate(&m, pp, budget, blocks, bs, max_seqs, nrep, n, &r, (double *)b[8].buf);
            Py_END_ALLOW_THREADS
        }
        free(r.g); free(r.computed); free(r.xb); free(r.gen); free(r.prev); free(r.next); free(r.dec); free(r.running);
        if (rc == -2) {
            PyErr_SetString(PyExc_ArithmeticError, "a step of non-positive or non-finite duration");
            goto done;
        }
        if (rc) { PyErr_NoMemory(); goto done; }
    }
    res = Py_None;
    Py_INCREF(res);
done:
    for (int i = 0; i < 9; i++) if (b[i].obj) PyBuffer_Release(&b[i]);
    return res;
}

/* ---- the request sampler: Python's random.Random (MT19937, CPython's _randommodule.c) ---- */
typedef struct { uint32_t mt[624]; int index; } MT;

static uint32_t genrand_uint32(MT *s) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t y, *mt = s->mt;
    if (s->index >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < 623; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[623] & 0x80000000U) | (mt[0] & 0x7fffffffU);
        mt[623] = mt[396] ^ (y >> 1) ^ mag01[y & 0x1U];
        s->index = 0;
    }
    y = mt[s->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

static void mt_load(MT *s, const Py_buffer *state) {  /* random.getstate()'s 624 words and index */
    memcpy(s->mt, state->buf, 624 * 4);
    s->index = (int)((const uint32_t *)state->buf)[624];
}

static double mt_random(MT *s) {  /* random.random() */
    uint32_t a = genrand_uint32(s) >> 5;
    uint32_t b = genrand_uint32(s) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

static i64 mt_below(MT *s, i64 n) {  /* workload.below: getrandbits(n.bit_length()) until < n; 1 <= n < 2**32 */
    int k = 0;
    while (k < 64 && ((i64)1 << k) <= n) k++;
    i64 r = genrand_uint32(s) >> (32 - k);
    while (r >= n) r = genrand_uint32(s) >> (32 - k);
    return r;
}

/* sample(state, cum, rules, rows, origins, cls, prompt, output, where, pick): draw._sample's loop.
 * state: 625 uint32 (random.getstate()'s words and index); cum: the classes' cumulative shares;
 * rules: 6 int64 per class (input first, n, output first, n, rows offset, rows count: SizeRule);
 * rows: int64 pairs; where is filled only when origins > 1. */
static PyObject *core_sample(PyObject *self, PyObject *args) {
    PyObject *o[9];
    int origins;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOpOOOOO", &o[0], &o[1], &o[2], &o[3], &origins, &o[4], &o[5], &o[6], &o[7], &o[8]))
        return NULL;
    Py_buffer b[9];
    memset(b, 0, sizeof(b));
    PyObject *res = NULL;
    for (int i = 0; i < 9; i++)
        if (PyObject_GetBuffer(o[i], &b[i], PyBUF_C_CONTIGUOUS | (i >= 4 ? PyBUF_WRITABLE : 0)) < 0) goto done;
    {
        Py_ssize_t nc = b[1].len / 8, n = b[5].len / 8, nrows = b[3].len / 16;
        if (b[0].len != 625 * 4 || nc < 1 || b[2].len != 6 * 8 * nc || b[4].len != 8 * n || b[6].len != 8 * n
            || b[7].len != 8 * n || b[8].len != 8 * n) {
            PyErr_SetString(PyExc_ValueError, "sample: inconsistent buffer sizes");
            goto done;
        }
        MT mt;
        mt_load(&mt, &b[0]);
        const double *cum = b[1].buf;
        const i64 *rules = b[2].buf, *rows = b[3].buf;
        i64 *cls = b[4].buf, *prompt = b[5].buf, *output = b[6].buf;
        double *where = b[7].buf, *pick = b[8].buf, total = cum[nc - 1];
        for (i64 k = 0; k < nc; k++) {
            const i64 *r = rules + 6 * k;
            if (r[1] < 0 || r[3] < 0 || r[1] >= ((i64)1 << 32) || r[3] >= ((i64)1 << 32) || r[5] < 0
                || r[5] >= ((i64)1 << 32) || r[4] < 0 || r[4] + r[5] > nrows) {
                PyErr_SetString(PyExc_ValueError, "sample: a size rule out of range");
                goto done;
            }
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            double u = mt_random(&mt) * total;
            i64 k = 0;  /* bisect_right(cum, u), at most the last class */
            while (k < nc && !(u < cum[k])) k++;
            if (k > nc - 1) k = nc - 1;
            const i64 *r = rules + 6 * k;
            cls[i] = k;
            if (r[5]) {
                const i64 *row = rows + 2 * (r[4] + mt_below(&mt, r[5]));
                prompt[i] = row[0];
                output[i] = row[1];
            } else {
                prompt[i] = r[1] ? r[0] + mt_below(&mt, r[1]) : r[0];
                output[i] = r[3] ? r[2] + mt_below(&mt, r[3]) : r[2];
            }
            where[i] = origins ? mt_random(&mt) : 0.0;
            pick[i] = mt_random(&mt);
        }
    }
    res = Py_None;
    Py_INCREF(res);
done:
    for (int i = 0; i < 9; i++) if (b[i].obj) PyBuffer_Release(&b[i]);
    return res;
}

/* exp_gaps(state, out): workload.arrival_gaps' Poisson loop, out[i] = -log(1.0 - random()), with the
 * generator of random.getstate()'s 625 words (libm's log, which math.log calls for these values). */
static PyObject *core_exp_gaps(PyObject *self, PyObject *args) {
    PyObject *o[2];
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1])) return NULL;
    Py_buffer state, out;
    if (get_buf(o[0], &state, 0, 4, 625, "state")) return NULL;
    if (PyObject_GetBuffer(o[1], &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&state);
        return NULL;
    }
    MT mt;
    mt_load(&mt, &state);
    double *gap = out.buf;
    for (Py_ssize_t i = 0, n = out.len / 8; i < n; i++) gap[i] = -log(1.0 - mt_random(&mt));
    PyBuffer_Release(&state);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* fsum(values): math.fsum of a float64 buffer, CPython's algorithm (Shewchuk's partials, then the
 * half-even fix-up across partials): the exact sum correctly rounded, so the same double. None where
 * a value is not finite or the partials outgrow their array (the caller then calls math.fsum). */
static PyObject *core_fsum(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const double *v = b.buf;
    Py_ssize_t len = b.len / 8;
    double p[256], x, y, t, hi, yr, lo = 0.0;
    int n = 0, ok = 1;
    for (Py_ssize_t k = 0; k < len && ok; k++) {
        x = v[k];
        if (!isfinite(x)) { ok = 0; break; }
        int i = 0;
        for (int j = 0; j < n; j++) {
            y = p[j];
            if (fabs(x) < fabs(y)) { t = x; x = y; y = t; }
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) p[i++] = lo;
            x = hi;
        }
        n = i;
        if (x != 0.0) {
            if (!isfinite(x) || n >= 256) { ok = 0; break; }
            p[n++] = x;
        }
    }
    PyBuffer_Release(&b);
    if (!ok) Py_RETURN_NONE;
    hi = 0.0;
    if (n > 0) {
        hi = p[--n];
        while (n > 0) {
            x = hi;
            y = p[--n];
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) break;
        }
        if (n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0))) {
            y = lo * 2.0;
            x = hi + y;
            yr = x - hi;
            if (y == yr) hi = x;
        }
    }
    return PyFloat_FromDouble(hi);
}

/* ---- the interpreter's frame-stack chunks --------------------------------------------------------
   CPython (3.11 on) keeps each thread's Python frames in chunks of 16 KiB that it maps when a call
   crosses a chunk's end and unmaps when that call returns (Python/pystate.c: push_chunk,
   _PyThreadState_PopFrame, through the arena allocator). A hot loop whose calls sit at that depth maps
   and unmaps a chunk on every call: the replica simulator's Python loop in an xdist worker's main
   thread made 780,000 of each (and as many page faults) for one test, 4.8 s of system time beside 5 s
   of work. keep_stack_chunks() puts an arena allocator in front of the interpreter's that keeps up to
   CHUNKS_KEPT freed chunks of that size for the next push instead of unmapping them; every other size
   goes to the allocator it replaced, unchanged. The arena allocator runs with the GIL held; a build
   without a GIL keeps the interpreter's own. */
#define CHUNK_BYTES 16384
#define CHUNKS_KEPT 16
static PyObjectArenaAllocator arena_before;
static void *chunks_kept[CHUNKS_KEPT];
static int chunks_n = 0, keeping = 0;

static void *keeping_alloc(void *ctx, size_t size) {
    (void)ctx;
    if (size == CHUNK_BYTES && chunks_n > 0) return chunks_kept[--chunks_n];
    return arena_before.alloc(arena_before.ctx, size);
}

static void keeping_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    if (size == CHUNK_BYTES && chunks_n < CHUNKS_KEPT) {
        chunks_kept[chunks_n++] = ptr;
        return;
    }
    arena_before.free(arena_before.ctx, ptr, size);
}

static PyObject *core_keep_stack_chunks(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
#ifdef Py_GIL_DISABLED
    Py_RETURN_FALSE;
#else
    if (!keeping) {
        PyObjectArenaAllocator mine = {NULL, keeping_alloc, keeping_free};
        PyObject_GetArenaAllocator(&arena_before);
        PyObject_SetArenaAllocator(&mine);
        keeping = 1;
    }
    Py_RETURN_TRUE;
#endif
}

static PyMethodDef methods[] = {
    {"exp_gaps", core_exp_gaps, METH_VARARGS, "Poisson arrival gaps' rate-free part (see hetinfra/sim/core.py)."},
    {"fsum", core_fsum, METH_O, "math.fsum of a float64 buffer (see hetinfra/sim/core.py)."},
    {"keep_stack_chunks", core_keep_stack_chunks, METH_NOARGS,
     "Keep freed frame-stack chunks for reuse instead of unmapping them (see hetinfra/sim/core.py)."},
    {"run", core_run, METH_VARARGS, "Simulate one unit's replicas (see hetinfra/sim/core.py)."},
    {"sample", core_sample, METH_VARARGS, "Draw a model's requests' classes and sizes (see hetinfra/sim/core.py)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", "hetinfra's compiled replica simulator.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&module);
    /* the stats per replica this build writes: hetinfra.sim.core uses a build only where it matches STATS
       (an in-place build from before a stat was added would refuse every unit's buffer) */
    if (m && PyModule_AddIntConstant(m, "NSTATS", NSTATS) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
