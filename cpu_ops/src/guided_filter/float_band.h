/* guided_filter: the band with float running sums (any guide, window narrower than two periods:
 * gf_t.fast). Included by kernel.c (one translation unit per ISA level), after the shared row
 * machinery. */

/* --- float running sums --------------------------------------------------------------------- */
/* Float running column sums, replaced by a fresh sum at every step that is a multiple of
 * gf_t.resum (GF_RESUM_ROWS, or the window height 2r + 1 when that is more; absolute rows, so the
 * replacements fall on the same rows whatever the bands). The fresh sum of step M is accumulated
 * alongside the updates of steps M - 2r .. M: each adds its entering row, and those 2r + 1 rows
 * are the window of M (reflection included). That costs one more add per quantity in the update
 * pass instead of a separate re-sum of 2r + 1 rows (1024^2, r = 8: 11% of the gray-guide time).
 * A band's first step, and a replacement whose accumulation would begin at or before it, sum the
 * window's rows from scratch instead.
 * Error bound: a fresh sum of the L = 2r+1 window rows carries at most (L - 1) u S, u = 2^-24,
 * S = sum of |terms| in that window (as the fresh double-then-float sum did, to one rounding).
 * Each update cs + (t_new - t_old) rounds twice: at most u (|t_new| + |t_old|) + u |cs'| <= 3 u S'
 * with S' the largest window |sum| seen since the re-sum. After k < K updates the drift is at
 * most 3 K u S_max = 5.7e-6 S_max for K = 32 (random signs: about sqrt(K) u); with K = L, of the
 * order of the fresh sum's own bound. It cannot outlive K rows, so a huge value that has left the
 * window leaves no trace after the next replacement (tests: drift, re-sum boundary). K = 32: 16
 * cost 4% more time, 64 saved nothing measurable (1024^2, r = 8, with the separate re-sum).
 * A colour guide's covariance inverse amplifies the error by at most what it amplifies float32
 * rounding of the guide itself: measured against the float64 reference, 1e-6 (256^2, r 3..20,
 * eps 1e-4..1e-2, random, smooth and x100 guides; double sums gave half of that; the tests allow
 * 1e-4). */
#define GF_RESUM_ROWS 32

/* cs += xa - xb; fs += xa when fs (the fresh sum being accumulated). */
static void gf_lin_update_f(float *restrict cs, float *restrict fs, const float *restrict xa,
                            const float *restrict xb, int64_t w) {
    if (fs)
        for (int64_t x = 0; x < w; x++) {
            cs[x] += xa[x] - xb[x];
            fs[x] += xa[x];
        }
    else
        for (int64_t x = 0; x < w; x++) cs[x] += xa[x] - xb[x];
}

/* cs += xa * ya - xb * yb; fs += xa * ya when fs. */
static void gf_prod_update_f(float *restrict cs, float *restrict fs, const float *restrict xa,
                             const float *restrict ya, const float *restrict xb,
                             const float *restrict yb, int64_t w) {
    if (fs)
        for (int64_t x = 0; x < w; x++) {
            const float a = xa[x] * ya[x];
            cs[x] += a - xb[x] * yb[x];
            fs[x] += a;
        }
    else
        for (int64_t x = 0; x < w; x++) cs[x] += xa[x] * ya[x] - xb[x] * yb[x];
}

/* c1 += xa - xb, c2 += xa * ya - xb * yb: one pass over the input rows for two quantities;
 * f1 += xa, f2 += xa * ya when f1 (f2 then too). */
static void gf_pair_update_f(float *restrict c1, float *restrict c2, float *restrict f1,
                             float *restrict f2, const float *xa, const float *ya, const float *xb,
                             const float *yb, int64_t w) {
    if (f1)
        for (int64_t x = 0; x < w; x++) {
            const float a = xa[x], b = xb[x], ay = a * ya[x];
            c1[x] += a - b;
            c2[x] += ay - b * yb[x];
            f1[x] += a;
            f2[x] += ay;
        }
    else
        for (int64_t x = 0; x < w; x++) {
            const float a = xa[x], b = xb[x];
            c1[x] += a - b;
            c2[x] += a * ya[x] - b * yb[x];
        }
}

static void gf_accum_f(float *restrict cs, const float *restrict xa, const float *restrict ya,
                       float wt, int64_t w) {
    if (ya)
        for (int64_t x = 0; x < w; x++) cs[x] += wt * (xa[x] * ya[x]);
    else
        for (int64_t x = 0; x < w; x++) cs[x] += wt * xa[x];
}

/* Reflected margins of a padded row (interior at offset r). */
static void gf_margins_f(const gf_t *g, float *restrict row) {
    const int64_t w = g->w, r = g->r;
    float *restrict c = row + r;
    if (r <= w) {
        for (int64_t j = 0; j < r; j++) {
            row[r - 1 - j] = c[j];
            c[w + j] = c[w - 1 - j];
        }
    } else {
        for (int64_t j = 0; j < r; j++) {
            row[r - 1 - j] = c[gf_reflect(-1 - j, w)];
            c[w + j] = c[gf_reflect(w + j, w)];
        }
    }
}

/* Reflected margins of a padded row, then its horizontal window sums. */
static void gf_hbox_f(const gf_t *g, float *restrict row, float *restrict out, gf_scratch *s) {
    gf_margins_f(g, row);
    gf_window_sums(row, g->w, g->hlen, out, s->s4, s->s16);
}

/* --- gray guide and src, windows of at most 5 terms (gf_t.fused) ---------------------------- */
/* The last horizontal pass (the sum of the window's terms) is done inside its consumer, the a, b
 * pass of stage 1 and the output pass of stage 2: the window sums are never stored and read back
 * (6 rows of stores and loads per image row). Bit-identical to the unfused passes. */

/* Margins and block sums of padded row `row` (quantity q's buffers); t: its 5 terms. */
static void gf_terms_f(const gf_t *g, gf_scratch *s, float *row, int64_t q, const float *t[5]) {
    float *s4 = s->blocks + 2 * q * g->pad_len, *s16 = s4 + g->pad_len;
    const float *all[10];
    gf_margins_f(g, row);
    gf_window_blocks(row, g->w, g->hlen, s4, s16);
    const int nt = gf_window_terms(g->hlen, row, s4, s16, all);
    for (int k = 0; k < 5; k++) t[k] = k < nt ? all[k] : s->zero;
}

#define GF_TERMS5(v, t)                                                                          \
    const float *restrict v##0 = (t)[0], *restrict v##1 = (t)[1], *restrict v##2 = (t)[2],       \
                *restrict v##3 = (t)[3], *restrict v##4 = (t)[4]
#define GF_SUM5(v, x) (((v##0[x] + v##1[x]) + (v##2[x] + v##3[x])) + v##4[x])

/* a, b of one row into slot (planes a, b) from the terms of I, I*I, p, I*p. */
GF_HPASS static void gf_coefficients_fused(const gf_t *g, const float *const t[4][5],
                                           float *slot) {
    const int64_t w = g->w;
    const float ia = (float)(1.0 / ((double)(2 * g->r + 1) * (double)(2 * g->r + 1))), eps = g->eps;
    GF_TERMS5(i, t[0]);
    GF_TERMS5(ii, t[1]);
    GF_TERMS5(p, t[2]);
    GF_TERMS5(ip, t[3]);
    float *restrict a = slot, *restrict b = slot + w;
    #pragma GCC ivdep
    for (int64_t x = 0; x < w; x++)
        gf_gray_ab(GF_SUM5(i, x), GF_SUM5(ii, x), GF_SUM5(p, x), GF_SUM5(ip, x), ia, eps, a + x,
                   b + x);
}

/* Output row y from the terms of a and b (and the detail blend, as gf_output). */
GF_HPASS static void gf_output_fused(const gf_t *g, int64_t y, const float *const t[2][5]) {
    const int64_t w = g->w;
    const float ia = (float)(1.0 / ((double)(2 * g->r + 1) * (double)(2 * g->r + 1)));
    GF_TERMS5(a, t[0]);
    GF_TERMS5(b, t[1]);
    const float *restrict I = g->guide + y * w;
    float *restrict o = g->out + y * w;
    if (g->detail == 0.0f) {
        #pragma GCC ivdep
        for (int64_t x = 0; x < w; x++) o[x] = (GF_SUM5(a, x) * I[x] + GF_SUM5(b, x)) * ia;
    } else {
        const float d = g->detail, *restrict p = g->src + y * w;
        #pragma GCC ivdep
        for (int64_t x = 0; x < w; x++) {
            const float q = (GF_SUM5(a, x) * I[x] + GF_SUM5(b, x)) * ia;
            o[x] = q + d * (p[x] - q);
        }
    }
}

/* Planar guide and src rows of image row j (pointers into the input for one channel), the
 * multi-channel ones from a ring of deinterleaved rows, deinterleaved on a miss: a row enters the
 * window as new and leaves it 2r + 1 rows later as old, read once each way (the deinterleave was
 * ~10% of the gray-guide 3ch time). avoid: slot in use by the other row (spare buffers then). */
static void gf_rows_cached(const gf_t *g, gf_scratch *s, int64_t j, int64_t avoid, float *gspare,
                           float *sspare, const float **gp, const float **sp) {
    const int64_t slot = j % g->ring, w = g->w;
    const int64_t gn = g->gc > 1 ? g->gc : 0, sn = g->sc > 1 ? g->sc : 0;
    float *row = s->srows + slot * (gn + sn) * w;
    *gp = g->gc > 1 ? row : g->guide + j * w;
    *sp = g->sc > 1 ? row + gn * w : g->src + j * w;
    if (gn + sn == 0 || s->stag[slot] == j) return;
    if (slot == avoid) {
        if (gn) gf_deinterleave(g->guide + j * w * gn, gn, w, gspare);
        if (sn) gf_deinterleave(g->src + j * w * sn, sn, w, sspare);
        *gp = gn ? gspare : *gp;
        *sp = sn ? sspare : *sp;
        return;
    }
    if (gn) gf_deinterleave(g->guide + j * w * gn, gn, w, row);
    if (sn) gf_deinterleave(g->src + j * w * sn, sn, w, row + gn * w);
    s->stag[slot] = j;
}

/* Where step m (of a band whose first step is lo) stands in the replacement schedule: returns 1
 * when m adds its entering row to the fresh sums, with *first when it is the first such step (the
 * fresh sums start at 0) and *replace when it is the replacement step. */
static int gf_fresh_step(const gf_t *g, int64_t m, int64_t lo, int *first, int *replace) {
    const int64_t K = g->resum, M = (m + K - 1) / K * K, start = M - 2 * g->r;
    *first = m == start;
    *replace = m == M;
    return start > lo && m >= start;
}

/* Step m of one running sum over nq padded rows cs (fresh sums fs): kind of work to do. */
enum { GF_FULL, GF_UPDATE, GF_KEEP };

static int gf_step_kind(const gf_t *g, int64_t m, int64_t lo, int64_t jn, int64_t jo, int acc,
                        int replace) {
    if (m == lo || (m % g->resum == 0 && !acc)) return GF_FULL;
    return jn != jo || replace ? GF_UPDATE : GF_KEEP;
}

static void gf_swap(float **a, float **b) {
    float *t = *a;
    *a = *b;
    *b = t;
}

static void gf_band_float(const gf_t *g, gf_scratch *s, int64_t y0, int64_t y1) {
    const int64_t w = g->w, h = g->h, r = g->r, k1 = g->k1, k2 = g->k2, R = g->ring;
    const int64_t P = g->pad_len, lo = y0 - r > 0 ? y0 - r : 0, hi = A2R_MIN(h - 1, y1 - 1 + r);
    int64_t done = lo - 1;
    const float *ga, *sa, *gb, *sb;
    const float *t1[4][5], *t2[2][5]; /* g->fused: terms of the stage-1 and stage-2 window sums */
    for (int64_t i = 0; i < R; i++) s->stag[i] = -1;
    for (int64_t y = y0; y < y1; y++) {
        const int64_t need = A2R_MIN(hi, y + r);
        while (done < need) {
            const int64_t m = ++done;
            const int64_t jn = gf_reflect(m + r, h), jo = gf_reflect(m - r - 1, h);
            int first, replace;
            const int acc = gf_fresh_step(g, m, lo, &first, &replace);
            const int kind = gf_step_kind(g, m, lo, jn, jo, acc, replace);
            if (kind == GF_FULL) {
                gf_window_counts(m, r, h, s->cnt);
                memset(s->cf1, 0, (size_t)(k1 * P) * sizeof(float));
                for (int64_t j = 0; j < h; j++) {
                    if (!s->cnt[j]) continue;
                    gf_rows(g, j, s->ga, s->sa, &ga, &sa);
                    for (int64_t q = 0; q < k1; q++) {
                        const float *xa, *ya;
                        gf_quantity(g, q, ga, sa, &xa, &ya);
                        gf_accum_f(s->cf1 + q * P + r, xa, ya, (float)s->cnt[j], w);
                    }
                }
            } else {
                float *fs = acc ? s->nf1 : NULL;
                if (first) memset(fs, 0, (size_t)(k1 * P) * sizeof(float));
                if (jn != jo && !replace) {
                    gf_rows_cached(g, s, jo, -1, s->gb, s->sb, &gb, &sb);
                    gf_rows_cached(g, s, jn, jo % R, s->ga, s->sa, &ga, &sa);
                    if (g->gc == 1) {
                        /* Gray guide: quantities in pairs (x, x*y) that share their input rows:
                         * one pass reads them. */
                        gf_pair_update_f(s->cf1 + r, s->cf1 + P + r, fs ? fs + r : NULL,
                                         fs ? fs + P + r : NULL, ga, ga, gb, gb, w);
                        for (int64_t k = 0; k < g->sc; k++) {
                            const int64_t q = 2 + k, qp = 2 + g->sc + k;
                            gf_pair_update_f(s->cf1 + q * P + r, s->cf1 + qp * P + r,
                                             fs ? fs + q * P + r : NULL, fs ? fs + qp * P + r : NULL,
                                             sa + k * w, ga, sb + k * w, gb, w);
                        }
                    } else {
                        for (int64_t q = 0; q < k1; q++) {
                            const float *xa, *ya, *xb, *yb;
                            gf_quantity(g, q, ga, sa, &xa, &ya);
                            gf_quantity(g, q, gb, sb, &xb, &yb);
                            float *fq = fs ? fs + q * P + r : NULL;
                            if (ya)
                                gf_prod_update_f(s->cf1 + q * P + r, fq, xa, ya, xb, yb, w);
                            else
                                gf_lin_update_f(s->cf1 + q * P + r, fq, xa, xb, w);
                        }
                    }
                } else if (acc) { /* the running sums are replaced or unchanged: only the add */
                    gf_rows_cached(g, s, jn, -1, s->ga, s->sa, &ga, &sa);
                    for (int64_t q = 0; q < k1; q++) {
                        const float *xa, *ya;
                        gf_quantity(g, q, ga, sa, &xa, &ya);
                        gf_accum_f(fs + q * P + r, xa, ya, 1.0f, w);
                    }
                }
                if (replace) gf_swap(&s->cf1, &s->nf1);
            }
            /* GF_KEEP: the same rows enter and leave, the window sums (terms) are unchanged */
            float *slot = s->ringbuf + (m % R) * k2 * w;
            if (g->fused) {
                if (kind != GF_KEEP)
                    for (int64_t q = 0; q < k1; q++) gf_terms_f(g, s, s->cf1 + q * P, q, t1[q]);
                gf_coefficients_fused(g, (const float *const(*)[5])t1, slot);
            } else {
                if (kind != GF_KEEP)
                    for (int64_t q = 0; q < k1; q++)
                        gf_hbox_f(g, s->cf1 + q * P, s->sum1 + q * w, s);
                gf_coefficients(g, s, slot);
            }
        }
        const int64_t jn = gf_reflect(y + r, h), jo = gf_reflect(y - r - 1, h);
        int first, replace;
        const int acc = gf_fresh_step(g, y, y0, &first, &replace);
        const int kind = gf_step_kind(g, y, y0, jn, jo, acc, replace);
        if (kind == GF_FULL) {
            gf_window_counts(y, r, h, s->cnt);
            memset(s->cf2, 0, (size_t)(k2 * P) * sizeof(float));
            for (int64_t j = 0; j < h; j++) {
                if (!s->cnt[j]) continue;
                const float *slot = s->ringbuf + (j % R) * k2 * w;
                for (int64_t q = 0; q < k2; q++)
                    gf_accum_f(s->cf2 + q * P + r, slot + q * w, NULL, (float)s->cnt[j], w);
            }
        } else {
            float *fs = acc ? s->nf2 : NULL;
            if (first) memset(fs, 0, (size_t)(k2 * P) * sizeof(float));
            const float *na = s->ringbuf + (jn % R) * k2 * w, *ol = s->ringbuf + (jo % R) * k2 * w;
            for (int64_t q = 0; q < k2; q++) {
                if (jn != jo && !replace)
                    gf_lin_update_f(s->cf2 + q * P + r, fs ? fs + q * P + r : NULL, na + q * w,
                                    ol + q * w, w);
                else if (acc)
                    gf_accum_f(fs + q * P + r, na + q * w, NULL, 1.0f, w);
            }
            if (replace) gf_swap(&s->cf2, &s->nf2);
        }
        if (g->fused) {
            if (kind != GF_KEEP)
                for (int64_t q = 0; q < k2; q++) gf_terms_f(g, s, s->cf2 + q * P, k1 + q, t2[q]);
            gf_output_fused(g, y, (const float *const(*)[5])t2);
        } else {
            if (kind != GF_KEEP)
                for (int64_t q = 0; q < k2; q++) gf_hbox_f(g, s->cf2 + q * P, s->sum2 + q * w, s);
            gf_output(g, s, y);
        }
    }
}
