/* guided_filter: the general band, running column sums in double (any guide, any window).
 * Included by kernel.c (one translation unit per ISA level), after the shared row machinery. */

/* --- running column sums ---------------------------------------------------------------------- */
/* Terms are float32 values widened to double: a + b - c of such terms is exact in double while the
 * sums stay below 2^29 times the smallest term's ulp, so a sum never drifts along a column. */

static void gf_lin_update(double *restrict cs, const float *restrict xa, const float *restrict xb,
                          int64_t w) {
    for (int64_t x = 0; x < w; x++) cs[x] += (double)xa[x] - (double)xb[x];
}

static void gf_prod_update(double *restrict cs, const float *restrict xa, const float *restrict ya,
                           const float *restrict xb, const float *restrict yb, int64_t w) {
    for (int64_t x = 0; x < w; x++) cs[x] += (double)(xa[x] * ya[x]) - (double)(xb[x] * yb[x]);
}

static void gf_lin_accum(double *restrict cs, const float *restrict xa, double wt, int64_t w) {
    for (int64_t x = 0; x < w; x++) cs[x] += wt * (double)xa[x];
}

static void gf_prod_accum(double *restrict cs, const float *restrict xa, const float *restrict ya,
                          double wt, int64_t w) {
    for (int64_t x = 0; x < w; x++) cs[x] += wt * (double)(xa[x] * ya[x]);
}

/* cs1 += wt * Q(rows a). */
static void gf_stage1_accum(const gf_t *g, double *cs1, const float *ga, const float *sa, double wt) {
    for (int64_t q = 0; q < g->k1; q++) {
        const float *xa, *ya;
        gf_quantity(g, q, ga, sa, &xa, &ya);
        if (ya)
            gf_prod_accum(cs1 + q * g->w, xa, ya, wt, g->w);
        else
            gf_lin_accum(cs1 + q * g->w, xa, wt, g->w);
    }
}

/* --- horizontal window sums of a double row --------------------------------------------------- */

/* out[x] = sum over the horizontal window of x of cs (reflected), as float. */
static void gf_hbox(const gf_t *g, const double *restrict cs, float *restrict out,
                    gf_scratch *sc) {
    const int64_t w = g->w, r = g->r, plen = g->pad_len;
    float *restrict pad = sc->pad;
    if (g->hfull == 0 && r <= w) { /* hstart = -r: the row, r reflected values either side */
        for (int64_t x = 0; x < w; x++) pad[r + x] = (float)cs[x];
        for (int64_t j = 0; j < r; j++) pad[j] = (float)cs[r - 1 - j];
        for (int64_t j = r + w; j < plen; j++) pad[j] = (float)cs[2 * w - 1 - (j - r)];
    } else {
        for (int64_t j = 0; j < plen; j++) pad[j] = (float)cs[gf_reflect(g->hstart + j, w)];
    }
    if (g->hlen > 0)
        gf_window_sums(pad, w, g->hlen, out, sc->s4, sc->s16);
    else
        for (int64_t x = 0; x < w; x++) out[x] = 0.0f;
    if (g->hfull > 0) { /* whole periods: every column twice per period */
        double t = 0.0;
        for (int64_t x = 0; x < w; x++) t += cs[x];
        const float add = (float)(2.0 * (double)g->hfull * t);
        for (int64_t x = 0; x < w; x++) out[x] += add;
    }
}

/* cs1 += Q(rows a) - Q(rows b), each quantity's window sums right after its update, while its
 * running sums are still in L1. */
static void gf_stage1_update(const gf_t *g, gf_scratch *s, const float *ga, const float *sa,
                             const float *gb, const float *sb) {
    const int64_t w = g->w;
    for (int64_t q = 0; q < g->k1; q++) {
        const float *xa, *ya, *xb, *yb;
        gf_quantity(g, q, ga, sa, &xa, &ya);
        gf_quantity(g, q, gb, sb, &xb, &yb);
        if (ya)
            gf_prod_update(s->cs1 + q * w, xa, ya, xb, yb, w);
        else
            gf_lin_update(s->cs1 + q * w, xa, xb, w);
        gf_hbox(g, s->cs1 + q * w, s->sum1 + q * w, s);
    }
}

/* --- one band --------------------------------------------------------------------------------- */

static void gf_band(const gf_t *g, gf_scratch *s, int64_t y0, int64_t y1) {
    const int64_t w = g->w, h = g->h, r = g->r, k1 = g->k1, k2 = g->k2, R = g->ring;
    const int64_t lo = y0 - r > 0 ? y0 - r : 0, hi = A2R_MIN(h - 1, y1 - 1 + r);
    int64_t done = lo - 1; /* last stage-1 row whose a, b are in the ring */
    const float *ga, *sa, *gb, *sb;
    for (int64_t y = y0; y < y1; y++) {
        /* Stage 1 up to the lowest row stage 2 reads at y (all rows when r >= h). */
        const int64_t need = A2R_MIN(hi, y + r);
        while (done < need) {
            const int64_t m = ++done;
            int fresh = 0; /* window sums already taken by gf_stage1_update */
            if (m == lo) {
                gf_window_counts(m, r, h, s->cnt);
                memset(s->cs1, 0, (size_t)(k1 * w) * sizeof(double));
                for (int64_t j = 0; j < h; j++) {
                    if (!s->cnt[j]) continue;
                    gf_rows(g, j, s->ga, s->sa, &ga, &sa);
                    gf_stage1_accum(g, s->cs1, ga, sa, (double)s->cnt[j]);
                }
            } else {
                const int64_t jn = gf_reflect(m + r, h), jo = gf_reflect(m - r - 1, h);
                if (jn != jo) {
                    gf_rows(g, jn, s->ga, s->sa, &ga, &sa);
                    gf_rows(g, jo, s->gb, s->sb, &gb, &sb);
                    gf_stage1_update(g, s, ga, sa, gb, sb);
                    fresh = 1;
                }
            }
            if (!fresh)
                for (int64_t q = 0; q < k1; q++) gf_hbox(g, s->cs1 + q * w, s->sum1 + q * w, s);
            gf_coefficients(g, s, s->ringbuf + (m % R) * k2 * w);
        }
        /* Stage 2: running sums of a, b over the rows around y. */
        int fresh = 0;
        if (y == y0) {
            gf_window_counts(y, r, h, s->cnt);
            memset(s->cs2, 0, (size_t)(k2 * w) * sizeof(double));
            for (int64_t j = 0; j < h; j++) {
                if (!s->cnt[j]) continue;
                const float *slot = s->ringbuf + (j % R) * k2 * w;
                for (int64_t q = 0; q < k2; q++)
                    gf_lin_accum(s->cs2 + q * w, slot + q * w, (double)s->cnt[j], w);
            }
        } else {
            const int64_t jn = gf_reflect(y + r, h), jo = gf_reflect(y - r - 1, h);
            if (jn != jo) {
                const float *na = s->ringbuf + (jn % R) * k2 * w,
                            *ol = s->ringbuf + (jo % R) * k2 * w;
                for (int64_t q = 0; q < k2; q++) { /* update, then window sums while in L1 */
                    gf_lin_update(s->cs2 + q * w, na + q * w, ol + q * w, w);
                    gf_hbox(g, s->cs2 + q * w, s->sum2 + q * w, s);
                }
                fresh = 1;
            }
        }
        if (!fresh)
            for (int64_t q = 0; q < k2; q++) gf_hbox(g, s->cs2 + q * w, s->sum2 + q * w, s);
        gf_output(g, s, y);
    }
}
