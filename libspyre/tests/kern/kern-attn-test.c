// SPDX-License-Identifier: MIT
/*
 * Description: the kernel library's ROPE and ATTENTION kernels on the
 * engine against CPU references in double computed from the rounded inputs.
 *
 * ROPE: positions pos0 0, 5 and 200 (scalar from spyre_kernel_rope_scalar),
 * head_dim 32/64/128 (and 48, 96: both rotate_half paths), heads 1..8,
 * token counts 1, 7, 9, 64, every dtype,
 * 1, 7 and 32 cores, both addressing forms, a small scratchpad. Tolerance:
 * one rounding of the output (kh_tol) + 1e-6 relative to sum |x cos| +
 * |x sin| (fp32 arithmetic: two products and one sum, the tables rounded to
 * fp32 once: a few 2^-24).
 *
 * ATTENTION: prefill for sequence lengths 1, 2, 7, 8, 9, 63, 64, 65, 127,
 * 128, 129 and 257 in every dtype, heads 1..8 with GQA ratios 1, 2 and 4,
 * head_dim 32 and 64, 1, 7 and 32 cores, both addressing forms, small
 * scratchpads (key tiles with the online softmax); the caches compared
 * exactly (the new rows written where they belong, nothing else touched).
 * Decode after a prefill: steps n, n+1, ... with one program (its image
 * bytes identical for every position) against full causal attention over
 * all tokens so far; decode at chosen positions (0, the stick, chunk and
 * tail boundaries of the key loop, max_pos - 1) of caches holding stale
 * rows past the position; -EINVAL past the cache. The granite case prints
 * the modeled time of a Granite-8B layer's attention (KERN_ATTN_BIG=1 adds
 * prefill of 512 and 1024 tokens and decode with max_pos 4096).
 * Tolerance: one rounding of the output, kh_tol(dt) * |o|, plus 2e-5
 * absolute (|v| <= 1): the fp32 intermediates (scores accumulated over
 * head_dim <= 64 products, exp, sums over <= 257 keys, 1/l as rsqrt^2) err
 * by a few 2^-24 relative each, well under 1e-5 of the largest |v|.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- ROPE ---------------------------------------------------------------- */

static bool rope_case(uint32_t dt, uint32_t cores, uint32_t m, uint32_t heads, uint32_t hd, uint32_t pos0,
		      uint32_t max_pos, uint32_t flags, uint32_t sp_bytes)
{
	uint64_t n = (uint64_t)m * heads * hd, tp = spyre_kernel_pitch(hd, SPYRE_DT_FP32);
	float *x = kh_alloc(4 * n), *y = kh_alloc(4 * n), *ref = kh_alloc(4 * n), *err = kh_alloc(4 * n);
	uint8_t *ct = kh_alloc(max_pos * tp), *st = kh_alloc(max_pos * tp);
	const float theta = 10000.0f;
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = dt, .cores = cores, .m = m,
				 .heads = heads, .head_dim = hd, .max_pos = max_pos, .flags = flags,
				 .sp_bytes = sp_bytes };
	struct kh_slot s[] = {
		KH_IN_G(x, m, (uint64_t)heads * hd, hd), KH_RAW(ct, max_pos * tp), KH_RAW(st, max_pos * tp),
		KH_OUT_G(y, m, (uint64_t)heads * hd, hd),
	};
	uint64_t sc = spyre_kernel_rope_scalar(&d, pos0);
	bool ok = false;

	kh_fill(x, n, -2, 2);
	spyre_kernel_rope_tables(ct, st, max_pos, hd, theta);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t h = 0; h < heads; h++) {
			const float *xr = x + ((uint64_t)i * heads + h) * hd;

			for (uint32_t e = 0; e < hd; e++) {
				uint32_t f = e % (hd / 2);
				double ang = (double)(pos0 + i) * pow(theta, -2.0 * f / hd);
				double a = kh_round(xr[e], dt);
				double b = e < hd / 2 ? -(double)kh_round(xr[e + hd / 2], dt) :
							(double)kh_round(xr[e - hd / 2], dt);
				uint64_t o = ((uint64_t)i * heads + h) * hd + e;

				ref[o] = (float)(a * cos(ang) + b * sin(ang));
				err[o] = (float)(fabs(a) + fabs(b));
			}
		}
	if (kh_run(&d, s, 4, &sc, 1, NULL) == 0) {
		char what[128];
		double tol = kh_tol(dt);
		uint64_t bad = 0, worst = 0;
		double wd = 0;

		for (uint64_t i = 0; i < n; i++) {
			double dd = fabs((double)y[i] - ref[i]);

			if (!(dd <= tol * fabs(ref[i]) + 1e-6 * err[i])) {
				if (!bad || dd > wd)
					wd = dd, worst = i;
				bad++;
			}
		}
		snprintf(what, sizeof(what), "rope %s m%u h%u hd%u pos0 %u c%u%s sp%u", spyre_dtype_name(dt), m, heads, hd, pos0,
			 cores, flags ? " reloc" : "", sp_bytes);
		ok = TAP_CHECK(!bad, "%s: %llu of %llu off, worst [%llu] got %.8g want %.8g", what,
			       (unsigned long long)bad, (unsigned long long)n, (unsigned long long)worst,
			       y[worst], ref[worst]);
	}
	free(x);
	free(y);
	free(ref);
	free(err);
	free(ct);
	free(st);
	return ok;
}

static void test_rope(void)
{
	static const uint32_t pos[] = { 0, 5, 200 }, hds[] = { 32, 64, 128 }, ms[] = { 1, 7, 9, 64 };
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++)
			for (unsigned hi = 0; hi < 3; hi++)
				for (unsigned pi = 0; pi < 3; pi++, i++) {
					uint32_t heads = 1 + (i * 3) % 8, m = ms[i % 4];

					rope_case(kh_dtypes[di], kh_cores[ci], m, heads, hds[hi], pos[pi], 300,
						  (i & 1) ? SPYRE_KF_RELOC : 0, 0);
				}
	/* every head count once at decode (m = 1) on 32 cores */
	for (uint32_t h = 1; h <= 8; h++)
		rope_case(SPYRE_DT_FP16, 32, 1, h, 128, 200, 300, 0, 0);
	/* head_dim whose halves are not whole fp32 sticks: rotate_half by the matrix R (also hd 32 above) */
	rope_case(SPYRE_DT_BF16, 7, 9, 3, 96, 200, 300, 0, 0);
	rope_case(SPYRE_DT_DL16, 32, 1, 8, 48, 5, 300, SPYRE_KF_RELOC, 0);
	rope_case(SPYRE_DT_FP32, 1, 7, 2, 96, 0, 300, 0, 0);
	/* tiled through a small scratchpad: heads and tokens both cut */
	rope_case(SPYRE_DT_FP16, 2, 65, 8, 128, 5, 300, 0, 64 << 10);
	rope_case(SPYRE_DT_FP32, 1, 9, 8, 64, 200, 300, SPYRE_KF_RELOC, 32 << 10);
}

static void test_rope_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = SPYRE_DT_FP16, .m = 4,
				 .heads = 2, .head_dim = 33, .max_pos = 16 };

	kh_expect_einval(&d, "head_dim 33");
	d.head_dim = 64;
	d.m = 17;
	kh_expect_einval(&d, "max_pos");
	d.m = 4;
	d.head_dim = 96;	/* halves of 48: rotate_half by the matrix R */
	d.sp_bytes = 16 << 10;	/* the 96x96 fp16 rotation matrix alone is 24 KiB */
	kh_expect_einval(&d, "rotation matrix");
}

/* ---- ATTENTION ------------------------------------------------------------ */

struct attn_io {
	uint32_t dt, heads, kvh, hd, max_pos;
	float *kc, *vc;		/* host caches [kvh*max_pos x hd], as the device holds them */
};

/*
 * Reference: queries q [m x heads*hd] at positions pos0.. attend over cache
 * rows 0..pos0+i of kc/vc (already holding the rounded new rows).
 */
static void attn_ref(const struct attn_io *io, const float *q, uint32_t m, uint32_t pos0, float scale, float *o)
{
	uint32_t hd = io->hd, r = io->heads / io->kvh;
	double *p = malloc(sizeof(double) * io->max_pos);

	for (uint32_t i = 0; i < m; i++)
		for (uint32_t h = 0; h < io->heads; h++) {
			const float *qr = q + ((uint64_t)i * io->heads + h) * hd;
			uint64_t base = (uint64_t)(h / r) * io->max_pos;
			uint32_t n = pos0 + i + 1;
			double mx = -INFINITY, sum = 0;

			for (uint32_t k = 0; k < n; k++) {
				const float *kr = io->kc + (base + k) * hd;
				double s = 0;

				for (uint32_t e = 0; e < hd; e++)
					s += (double)kh_round(qr[e], io->dt) * kr[e];
				p[k] = s * scale;
				mx = p[k] > mx ? p[k] : mx;
			}
			for (uint32_t k = 0; k < n; k++)
				sum += p[k] = exp(p[k] - mx);
			for (uint32_t e = 0; e < hd; e++) {
				double acc = 0;

				for (uint32_t k = 0; k < n; k++)
					acc += p[k] * io->vc[(base + k) * hd + e];
				o[((uint64_t)i * io->heads + h) * hd + e] = (float)(acc / sum);
			}
		}
	free(p);
}

static char *attn_name(char *buf, size_t len, const char *what, const struct attn_io *io, uint32_t m, uint32_t pos,
		       uint32_t cores, uint32_t flags, uint32_t sp)
{
	snprintf(buf, len, "%s %s m%u pos %u h%u/%u hd%u max_pos %u c%u%s%s", what, spyre_dtype_name(io->dt), m, pos, io->heads,
		 io->kvh, io->hd, io->max_pos, cores, (flags & SPYRE_KF_RELOC) ? " reloc" : "",
		 sp ? " small-sp" : "");
	return buf;
}

/*
 * One launch: m new tokens at pos0 (prefill: pos0 = 0; decode: m = 1 with
 * the scalars of pos0). Updates io's caches from the device and checks them
 * and O against the reference. @image (optional) gets the program bytes.
 */
static bool attn_step(struct attn_io *io, uint32_t m, uint32_t pos0, uint32_t cores, uint32_t flags, uint32_t sp,
		      void **image, size_t *image_size, struct spyre_kernel_info *info)
{
	uint32_t hd = io->hd, heads = io->heads, kvh = io->kvh;
	uint64_t nq = (uint64_t)m * heads * hd, nk = (uint64_t)m * kvh * hd, nc = (uint64_t)kvh * io->max_pos * hd;
	float *q = kh_alloc(4 * nq), *k = kh_alloc(4 * nk), *v = kh_alloc(4 * nk), *o = kh_alloc(4 * nq);
	float *ref = kh_alloc(4 * nq), *kc_want = kh_alloc(4 * nc), *vc_want = kh_alloc(4 * nc);
	bool decode = (flags & SPYRE_KF_DECODE) != 0, ok = false;
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ATTENTION, .dtype = io->dt, .cores = cores,
				 .m = m, .heads = heads, .kv_heads = kvh, .head_dim = hd, .max_pos = io->max_pos,
				 .flags = flags, .sp_bytes = sp };
	struct kh_slot s[] = {
		KH_IN_G(q, m, (uint64_t)heads * hd, hd), KH_IN_G(k, m, (uint64_t)kvh * hd, hd),
		KH_IN_G(v, m, (uint64_t)kvh * hd, hd), KH_INOUT(io->kc, (uint64_t)kvh * io->max_pos, hd),
		KH_INOUT(io->vc, (uint64_t)kvh * io->max_pos, hd), KH_OUT_G(o, m, (uint64_t)heads * hd, hd),
	};
	uint64_t sc[36];	/* 4 + one loop count per possible key part (32) */
	char what[160];

	attn_name(what, sizeof(what), decode ? "decode" : "prefill", io, m, pos0, cores, flags, sp);
	kh_fill(q, nq, -1, 1);
	kh_fill(k, nk, -1, 1);
	kh_fill(v, nk, -1, 1);
	memcpy(kc_want, io->kc, 4 * nc);
	memcpy(vc_want, io->vc, 4 * nc);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t g = 0; g < kvh; g++)
			for (uint32_t e = 0; e < hd; e++) {
				uint64_t row = (uint64_t)g * io->max_pos + pos0 + i, src = ((uint64_t)i * kvh + g) * hd + e;

				kc_want[row * hd + e] = kh_round(k[src], io->dt);
				vc_want[row * hd + e] = kh_round(v[src], io->dt);
			}
	{
		struct attn_io want = *io;

		want.kc = kc_want;
		want.vc = vc_want;
		attn_ref(&want, q, m, pos0, (float)(1.0 / sqrt(hd)), ref);
	}
	if (image) {
		struct spyre_kernel_info bi = { .size = sizeof(bi) };

		if (!TAP_CHECK(spyre_kernel_build(&d, image, image_size, &bi) == 0, "%s: build: %s", what,
			       spyre_last_error()))
			goto out;
	}
	if (decode && !TAP_CHECK(spyre_kernel_attention_scalars(&d, pos0, sc) == 0, "%s: scalars: %s", what,
				 spyre_last_error()))
		goto out;
	if (kh_run(&d, s, 6, decode ? sc : NULL, decode ? 36 : 0, info) == 0) {
		char w2[200];

		ok = kh_close(what, o, ref, nq, kh_tol(io->dt), 2e-5);
		snprintf(w2, sizeof(w2), "%s: K cache", what);
		ok &= kh_close(w2, io->kc, kc_want, nc, 0, 0);
		snprintf(w2, sizeof(w2), "%s: V cache", what);
		ok &= kh_close(w2, io->vc, vc_want, nc, 0, 0);
	}
out:
	free(q);
	free(k);
	free(v);
	free(o);
	free(ref);
	free(kc_want);
	free(vc_want);
	return ok;
}

static void attn_io_init(struct attn_io *io, uint32_t dt, uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t max_pos)
{
	*io = (struct attn_io){ .dt = dt, .heads = heads, .kvh = kvh, .hd = hd, .max_pos = max_pos };
	io->kc = kh_alloc(4ull * kvh * max_pos * hd);	/* zero-filled, as the API asks */
	io->vc = kh_alloc(4ull * kvh * max_pos * hd);
}

/* Random (rounded) rows in every row of the caches, as a stale earlier sequence leaves them. */
static void attn_io_fill(struct attn_io *io)
{
	uint64_t n = (uint64_t)io->kvh * io->max_pos * io->hd;

	kh_fill(io->kc, n, -1, 1);
	kh_fill(io->vc, n, -1, 1);
	for (uint64_t i = 0; i < n; i++) {
		io->kc[i] = kh_round(io->kc[i], io->dt);
		io->vc[i] = kh_round(io->vc[i], io->dt);
	}
}

static void attn_io_fini(struct attn_io *io)
{
	free(io->kc);
	free(io->vc);
}

static const uint32_t seqs[] = { 1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 257 };

/* every length in every dtype; heads, GQA ratio, head_dim, cores and addressing vary with the case */
static void test_prefill(void)
{
	static const uint32_t ratio[] = { 1, 2, 4 };
	unsigned i = 0;

	for (unsigned di = 0; di < 4; di++)
		for (unsigned si = 0; si < sizeof(seqs) / sizeof(seqs[0]); si++, i++) {
			uint32_t m = seqs[si], rr = ratio[i % 3], kvh = 1 + (i / 3) % (8 / rr), heads = kvh * rr;
			uint32_t hd = (i / 2) % 2 ? 64 : 32, cores = kh_cores[(i + di) % 3];
			struct attn_io io;

			if (m > 128 && heads > 4)	/* keep the file fast: the longest sequences with <= 4 heads */
				kvh = 1, heads = rr;
			attn_io_init(&io, kh_dtypes[di], heads, kvh, hd, m + 3);
			attn_step(&io, m, 0, cores, (i & 1) ? SPYRE_KF_RELOC : 0, 0, NULL, NULL, NULL);
			attn_io_fini(&io);
		}
}

/* every head count 1..8 (GQA ratios 1, 2, 4 where they divide) at one length */
static void test_prefill_heads(void)
{
	for (uint32_t h = 1; h <= 8; h++)
		for (uint32_t rr = 1; rr <= 4; rr *= 2) {
			struct attn_io io;

			if (h % rr)
				continue;
			attn_io_init(&io, SPYRE_DT_FP16, h, h / rr, 64, 40);
			attn_step(&io, 33, 0, kh_cores[(h + rr) % 3], rr == 2 ? SPYRE_KF_RELOC : 0, 0, NULL, NULL, NULL);
			attn_io_fini(&io);
		}
}

/* more KV heads than cores (several per core), and teams of cores per KV head */
static void test_prefill_cores(void)
{
	static const uint32_t cfg[][5] = {	/* heads, kv_heads, m, cores, hd */
		{ 8, 8, 100, 3, 64 }, { 16, 8, 96, 5, 64 }, { 8, 4, 130, 6, 32 }, { 6, 3, 77, 32, 64 },
		{ 32, 8, 64, 32, 128 }, { 4, 2, 200, 2, 64 },
		{ 4, 2, 65, 7, 40 }, { 3, 1, 9, 32, 33 },	/* head_dim not a multiple of a stick */
	};

	for (unsigned i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++) {
		struct attn_io io;

		attn_io_init(&io, kh_dtypes[i % 4], cfg[i][0], cfg[i][1], cfg[i][4], cfg[i][2] + 5);
		attn_step(&io, cfg[i][2], 0, cfg[i][3], (i & 1) ? SPYRE_KF_RELOC : 0, 0, NULL, NULL, NULL);
		attn_io_fini(&io);
	}
}

/* small scratchpads: keys in tiles with the online softmax, query blocks cut */
static void test_prefill_tiled(void)
{
	struct attn_io io;

	attn_io_init(&io, SPYRE_DT_FP16, 4, 2, 64, 300);
	attn_step(&io, 257, 0, 7, 0, 64 << 10, NULL, NULL, NULL);
	attn_io_fini(&io);
	attn_io_init(&io, SPYRE_DT_FP32, 8, 2, 32, 130);
	attn_step(&io, 129, 0, 1, SPYRE_KF_RELOC, 32 << 10, NULL, NULL, NULL);
	attn_io_fini(&io);
	attn_io_init(&io, SPYRE_DT_BF16, 2, 1, 64, 70);
	attn_step(&io, 65, 0, 32, 0, 16 << 10, NULL, NULL, NULL);
	attn_io_fini(&io);
}

/* prefill n, then decode n, n+1, ... with the same program */
static void decode_chain(uint32_t dt, uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t max_pos, uint32_t n,
			 uint32_t steps, uint32_t cores, uint32_t flags, uint32_t sp)
{
	struct attn_io io;
	void *img0 = NULL;
	size_t sz0 = 0;
	bool same = true;

	attn_io_init(&io, dt, heads, kvh, hd, max_pos);
	if (n)
		attn_step(&io, n, 0, cores, flags, sp, NULL, NULL, NULL);
	for (uint32_t s = 0; s < steps && n + s < max_pos; s++) {
		void *img = NULL;
		size_t sz = 0;

		attn_step(&io, 1, n + s, cores, flags | SPYRE_KF_DECODE, sp, &img, &sz, NULL);
		if (!img0) {
			img0 = img;
			sz0 = sz;
		} else {
			same &= img && sz == sz0 && !memcmp(img, img0, sz);
			free(img);
		}
	}
	TAP_CHECK(same, "decode %s h%u/%u hd%u max_pos %u c%u: one program for every position", spyre_dtype_name(dt), heads, kvh,
		  hd, max_pos, cores);
	free(img0);
	attn_io_fini(&io);
}

static void test_decode(void)
{
	for (unsigned di = 0; di < 4; di++)
		for (unsigned ci = 0; ci < 3; ci++) {
			uint32_t rr = 1u << ((di + ci) % 3), kvh = 1 + (di + 2 * ci) % 3;

			decode_chain(kh_dtypes[di], kvh * rr, kvh, (di + ci) % 2 ? 64 : 32, 100 + 31 * ci,
				     kh_edge[(di + ci) % 10], 4, kh_cores[ci], (di & 1) ? SPYRE_KF_RELOC : 0, 0);
		}
	/* around stick boundaries of the mask: positions 31, 32, 33 and 63, 64, 65 */
	decode_chain(SPYRE_DT_FP16, 8, 2, 64, 200, 31, 3, 32, 0, 0);
	decode_chain(SPYRE_DT_BF16, 4, 4, 32, 66, 63, 3, 7, SPYRE_KF_RELOC, 0);
	/* a scratchpad too small for the whole key range: tiles of 32 keys */
	decode_chain(SPYRE_DT_FP16, 4, 1, 64, 300, 200, 2, 1, 0, 32 << 10);
	decode_chain(SPYRE_DT_DL16, 8, 2, 128, 260, 129, 2, 32, 0, 64 << 10);
}

/*
 * Decode at chosen positions of a cache holding random (rounded) rows
 * everywhere, also past the position (a stale earlier sequence: masked):
 * the chunk and tail boundaries of the key loop, position 0, the last.
 */
static void decode_at(uint32_t dt, uint32_t heads, uint32_t kvh, uint32_t hd, uint32_t max_pos, uint32_t cores,
		      uint32_t flags, uint32_t sp, const uint32_t *pos, uint32_t npos)
{
	struct attn_io io;

	attn_io_init(&io, dt, heads, kvh, hd, max_pos);
	attn_io_fill(&io);
	for (uint32_t i = 0; i < npos; i++)
		if (pos[i] < max_pos)
			attn_step(&io, 1, pos[i], cores, flags | SPYRE_KF_DECODE, sp, NULL, NULL, NULL);
	attn_io_fini(&io);
}

static void test_decode_positions(void)
{
	static const uint32_t p300[] = { 0, 1, 31, 32, 33, 127, 128, 129, 200, 255, 256, 257, 299 };
	static const uint32_t p1000[] = { 0, 5, 63, 64, 65, 500, 959, 960, 961, 999 };
	static const uint32_t p77[] = { 0, 31, 32, 63, 64, 76 };

	/* hd 64 fp16: chunks of 128 keys, 2 full + a tail of 44; 2 parts per KV head */
	decode_at(SPYRE_DT_FP16, 4, 2, 64, 300, 32, 0, 0, p300, 13);
	/* hd 128 fp16: chunks of 64 keys, 15 full + a tail of 40, up to 15 parts */
	decode_at(SPYRE_DT_FP16, 8, 1, 128, 1000, 32, SPYRE_KF_RELOC, 0, p1000, 10);
	decode_at(SPYRE_DT_BF16, 8, 2, 128, 1000, 7, 0, 0, p1000, 10);
	/* fp32 hd 128: chunks of 32 keys; dl16 hd 32 in a small scratchpad: 32-key tiles inside 128-key chunks */
	decode_at(SPYRE_DT_FP32, 2, 1, 128, 300, 32, 0, 0, p300, 13);
	decode_at(SPYRE_DT_DL16, 8, 1, 32, 300, 7, SPYRE_KF_RELOC, 24 << 10, p300, 13);
	/* head_dim not a multiple of a stick */
	decode_at(SPYRE_DT_FP16, 4, 2, 72, 150, 32, 0, 0, p300, 13);
	/* every KV head on one core, and more KV heads than cores */
	decode_at(SPYRE_DT_FP16, 8, 8, 64, 77, 1, 0, 0, p77, 6);
	decode_at(SPYRE_DT_BF16, 8, 8, 64, 77, 7, SPYRE_KF_RELOC, 0, p77, 6);
}

/* the last position of the cache, and past it */
static void test_decode_last(void)
{
	struct attn_io io;
	struct spyre_kdesc d;
	uint64_t sc[36];	/* 4 + one loop count per possible key part (32) */
	int rc;

	for (unsigned ci = 0; ci < 3; ci++) {
		uint32_t max_pos = 64 + 33 * ci;

		attn_io_init(&io, kh_dtypes[ci + 1], 4, 2, 64, max_pos);
		attn_io_fill(&io);
		attn_step(&io, 1, max_pos - 1, kh_cores[ci], SPYRE_KF_DECODE, 0, NULL, NULL, NULL);
		attn_io_fini(&io);
	}
	d = (struct spyre_kdesc){ .size = sizeof(d), .op = SPYRE_KOP_ATTENTION, .dtype = SPYRE_DT_FP16, .m = 1,
				  .heads = 4, .kv_heads = 2, .head_dim = 64, .max_pos = 64, .flags = SPYRE_KF_DECODE };
	rc = spyre_kernel_attention_scalars(&d, 63, sc);
	TAP_CHECK(rc == 0, "pos 63 of 64: rc %d", rc);
	rc = spyre_kernel_attention_scalars(&d, 64, sc);
	TAP_CHECK(rc == -EINVAL && strstr(spyre_last_error(), "max_pos 64"), "pos 64 of 64: rc %d, %s", rc,
		  spyre_last_error());
	d.flags = 0;
	rc = spyre_kernel_attention_scalars(&d, 3, sc);
	TAP_CHECK(rc == -EINVAL, "scalars of a prefill descriptor: rc %d", rc);
}

/* the modeled time of a Granite-8B layer's attention: 32 heads, 8 KV heads, head_dim 128, fp16, 32 cores */
static void granite(uint32_t m, uint32_t pos, uint32_t max_pos)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	struct attn_io io;
	bool decode = m == 1 && pos;

	attn_io_init(&io, SPYRE_DT_FP16, 32, 8, 128, max_pos);
	if (decode)
		attn_io_fill(&io);
	if (attn_step(&io, m, pos, 32, decode ? SPYRE_KF_DECODE : 0, 0, NULL, NULL, &info))
		tap_diag("granite-8b attention %s m %u pos %u max_pos %u: est_ns %llu device_ns %llu "
			 "utilization %.2f cores %u image %llu bytes (%s)", decode ? "decode" : "prefill", m, pos,
			 max_pos, (unsigned long long)info.est_ns, (unsigned long long)kh_last_device_ns,
			 kh_last_utilization, info.cores, (unsigned long long)info.image_bytes, info.name);
	attn_io_fini(&io);
}

static void granite_rope(uint32_t m, uint32_t heads, uint32_t pos0)
{
	struct spyre_kernel_info info = { .size = sizeof(info) };
	uint64_t tp = spyre_kernel_pitch(128, SPYRE_DT_FP32), n = (uint64_t)m * heads * 128;
	uint8_t *ct = kh_alloc(1024 * tp), *st = kh_alloc(1024 * tp);
	float *x = kh_alloc(4 * n), *y = kh_alloc(4 * n);
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ROPE, .dtype = SPYRE_DT_FP16, .cores = 32,
				 .m = m, .heads = heads, .head_dim = 128, .max_pos = 1024 };
	struct kh_slot s[] = { KH_IN_G(x, m, n / m, 128), KH_RAW(ct, 1024 * tp), KH_RAW(st, 1024 * tp),
			       KH_OUT_G(y, m, n / m, 128) };
	uint64_t sc = spyre_kernel_rope_scalar(&d, pos0);

	spyre_kernel_rope_tables(ct, st, 1024, 128, 10000.0f);
	kh_fill(x, n, -1, 1);
	if (kh_run(&d, s, 4, &sc, 1, &info) == 0)
		tap_diag("granite-8b rope m %u heads %u: est_ns %llu device_ns %llu utilization %.2f cores %u", m, heads,
			 (unsigned long long)info.est_ns, (unsigned long long)kh_last_device_ns, kh_last_utilization,
			 info.cores);
	free(ct);
	free(st);
	free(x);
	free(y);
}

static void test_granite(void)
{
	granite_rope(1, 32, 1000);
	granite_rope(1, 8, 1000);
	granite_rope(128, 32, 0);
	granite_rope(128, 8, 0);
	granite(1, 1023, 1024);
	granite(1, 100, 1024);
	granite(128, 0, 1024);
	if (getenv("KERN_ATTN_BIG")) {
		granite(1024, 0, 1024);
		granite(512, 0, 1024);
		granite(1, 0, 1024);
		granite(1, 4095, 4096);
	}
}

static void test_attn_errors(void)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = SPYRE_KOP_ATTENTION, .dtype = SPYRE_DT_FP16, .m = 8,
				 .heads = 6, .kv_heads = 4, .head_dim = 64, .max_pos = 16 };

	kh_expect_einval(&d, "kv_heads 4");
	d.kv_heads = 2;
	d.m = 17;
	kh_expect_einval(&d, "max_pos 16");
	d.m = 2;
	d.flags = SPYRE_KF_DECODE;
	kh_expect_einval(&d, "m = 1");
	d.m = 1;
	d.head_dim = 0;
	kh_expect_einval(&d, "head_dim");
	d.head_dim = 128;
	d.sp_bytes = 16 << 10;
	kh_expect_einval(&d, "does not fit");
	d.sp_bytes = 0;
	d.strategy = SPYRE_KSTRAT_SPLIT_M;	/* attention has no strategies to force: AUTO only */
	kh_expect_einval(&d, "strategy");
}

static const struct tap_case cases[] = {
	{ "rope", test_rope },
	{ "rope_errors", test_rope_errors },
	{ "prefill", test_prefill },
	{ "prefill_heads", test_prefill_heads },
	{ "prefill_cores", test_prefill_cores },
	{ "prefill_tiled", test_prefill_tiled },
	{ "decode", test_decode },
	{ "decode_positions", test_decode_positions },
	{ "decode_last", test_decode_last },
	{ "granite", test_granite },
	{ "attn_errors", test_attn_errors },
};

int main(int argc, char **argv)
{
	return KH_MAIN(cases, argc, argv);
}
