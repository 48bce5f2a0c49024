// SPDX-License-Identifier: MIT
/*
 * The BERT encoder on a spyre card (bert_device.h), fp32. A batch of B
 * sentences is padded to L tokens (the longest, rounded up to a stick: 32
 * fp32), M = B*L rows, nh heads of hd:
 *
 *	x = LayerNorm(word[ids] + postype[0..L-1])	EMBEDDING x2, ADD, LAYERNORM
 *	mask [B*nh*L x L] = ones [B*nh*L x 1] . maskrow[b] [1 x L]	BMM (k 1), once a batch
 *	per layer:
 *	  q, k, v = x Wq + bq, ...			LINEAR (+bias) x3
 *	  qh, vh = [B, L, nh, hd] -> [B, nh, L, hd]	PERMUTE x2
 *	  kt = [B, L, H] -> [B, H, L] (each head's K^T)	PERMUTE (k 1)
 *	  s = mask + scale * qh kt			BMM, BINARY ADD (reverse, alpha)
 *	  p = softmax(s); o = p vh				SOFTMAX, BMM
 *	  a = [B, nh, L, hd] -> [B, L, nh, hd]		PERMUTE
 *	  x = LayerNorm(x + a Wo + bo)			LINEAR, ADD, LAYERNORM
 *	  x = LayerNorm(x + GELU(x Wi + bi) Wd + bd)	LINEAR, GELU, LINEAR, ADD, LAYERNORM
 *	pooled [B x H] = poolw [B x 1 x L] . x		BMM (1/len on the sentence's rows, 0 on padding)
 *	out = pooled * rsqrt(sum(pooled^2))		BINARY MUL, REDUCE SUM, UNARY RSQRT, BINARY MUL (col)
 *
 * The mask is -1e30 on padding keys: a padded key's score is -1e30 after
 * the add, its exp underflows to exactly 0, as PyTorch's additive mask of
 * finfo.min. Padding rows compute finite values nobody reads.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bert_device.h"
#include "dmem.h"
#include "spyre_kernels.h"
#include "spyre_isa.h"
#include "clock.h"

#define EMBED_CHUNK 128			/* token ids per EMBEDDING launch (launch scalars) */
#define PAD_TO (SPYRE_STICK_BYTES / 4)	/* fp32 elements of a stick */
#define MASK_NEG (-1e30f)

struct dlayer {
	spyre_dptr_t wq, bq, wk, bk, wv, bv, wo, bo, ln1_w, ln1_b, wi, bi, wd, bd, ln2_w, ln2_b;
};

/* Activations for a batch shape (grown when a larger one comes). */
struct acts {
	uint64_t rows, len, batch;	/* capacity: M, L, B */
	spyre_dptr_t x, h, t, q, k, v, qh, vh, kt, s, mask, o, f, ones, maskrow, poolw, pooled, sq, red, out;
	float *host_out;		/* pinned [B x H] */
	float *host_in;			/* pinned: mask rows and pooling weights [2 x B x L] */
};

struct spyre_dbert {
	spyre_device_t *dev;
	spyre_stream_t *stream;
	spyre_kcache_t *kcache;
	struct spyre_bert_config cfg;
	uint32_t cores, sp_bytes;
	spyre_dptr_t word, postype, ln_w, ln_b;
	struct dlayer *layer;
	struct acts a;
	struct spyre_dmem mem;		/* the weights' allocations */
	pthread_mutex_t lock;
	char *err;			/* the caller's, during a call */
	size_t errlen;
};

static int fail(struct spyre_dbert *db, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct spyre_dbert *db, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = spyre_model_errv(db->err, db->errlen, ret, true, fmt, ap);
	va_end(ap);
	return ret;
}

static struct spyre_kdesc kd(const struct spyre_dbert *db, uint32_t op, uint64_t m, uint64_t n, uint64_t k)
{
	return (struct spyre_kdesc){ .size = sizeof(struct spyre_kdesc), .op = op, .dtype = SPYRE_DT_FP32,
				     .cores = db->cores, .m = m, .n = n, .k = k, .sp_bytes = db->sp_bytes };
}

static int launch(struct spyre_dbert *db, const struct spyre_kdesc *d, const spyre_dptr_t *slots, uint32_t n,
		  const uint64_t *scalars, uint32_t ns)
{
	spyre_kernel_t *k;
	int ret = spyre_kernel_get(db->kcache, d, &k);

	if (ret)
		return fail(db, ret, "%s kernel (m %llu, n %llu, k %llu)", spyre_kernel_op_name(d->op),
			    (unsigned long long)d->m, (unsigned long long)d->n, (unsigned long long)d->k);
	ret = spyre_kernel_launch(db->stream, k, slots, n, scalars, ns);
	spyre_kernel_put(k);
	if (ret)
		return fail(db, ret, "launching %s", spyre_kernel_op_name(d->op));
	return 0;
}

/* ---- weights ------------------------------------------------------------------- */

/* A host fp32 matrix [rows x cols] in the stick layout. */
static int upload(struct spyre_dbert *db, spyre_dptr_t *p, const float *src, uint64_t rows, uint64_t cols)
{
	return spyre_dmem_upload_matrix(&db->mem, p, src, rows, cols, SPYRE_DT_FP32);
}

/* Slot @slot (1: W from the checkpoint's [out x in], 2: the bias) of LINEAR @d. */
static int upload_linear(struct spyre_dbert *db, spyre_dptr_t *p, const struct spyre_kdesc *d, uint32_t slot,
			 const float *src)
{
	return spyre_dmem_upload_weight(&db->mem, p, d, slot, src);
}

static struct spyre_kdesc linear_desc(const struct spyre_dbert *db, uint64_t m, uint64_t n, uint64_t k)
{
	struct spyre_kdesc d = kd(db, SPYRE_KOP_LINEAR, m, n, k);

	d.flags = SPYRE_KF_BIAS;
	return d;
}

static void free_acts(struct spyre_dbert *db)
{
	spyre_dptr_t *p[] = { &db->a.x, &db->a.h, &db->a.t, &db->a.q, &db->a.k, &db->a.v, &db->a.qh, &db->a.vh,
			      &db->a.kt, &db->a.s, &db->a.mask, &db->a.o, &db->a.f, &db->a.ones, &db->a.maskrow,
			      &db->a.poolw, &db->a.pooled, &db->a.sq, &db->a.red, &db->a.out };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		if (*p[i])
			spyre_free(db->dev, *p[i]);
	if (db->a.host_out)
		spyre_free_host(db->dev, db->a.host_out);
	if (db->a.host_in)
		spyre_free_host(db->dev, db->a.host_in);
	memset(&db->a, 0, sizeof(db->a));
}

void spyre_dbert_free(struct spyre_dbert *db)
{
	if (!db)
		return;
	if (db->stream)
		spyre_stream_synchronize(db->stream);
	free_acts(db);
	spyre_dmem_free(&db->mem);
	free(db->layer);
	if (db->kcache)
		spyre_kcache_destroy(db->kcache);
	if (db->stream)
		spyre_stream_destroy(db->stream);
	pthread_mutex_destroy(&db->lock);
	free(db);
}

int spyre_dbert_new(spyre_device_t *dev, const struct spyre_bert *m, uint32_t cores, struct spyre_dbert **out,
		    char *err, size_t errlen)
{
	const struct spyre_bert_config *c = &m->cfg;
	struct spyre_device_props props = { .size = sizeof(props) };
	struct spyre_dbert *db;
	uint32_t H = c->hidden, F = c->ffn;
	float *postype = NULL;
	int ret;

	*out = NULL;
	db = calloc(1, sizeof(*db));
	if (!db) {
		snprintf(err, errlen, "out of host memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&db->lock, NULL);
	db->dev = dev;
	db->cfg = *c;
	db->err = err;
	db->errlen = errlen;
	db->mem = (struct spyre_dmem){ .dev = dev, .err = err, .errlen = errlen };
	ret = spyre_device_get_props(dev, &props);
	if (ret) {
		fail(db, ret, "device properties");
		goto out;
	}
	db->cores = cores ? cores : props.num_cores;
	db->sp_bytes = props.scratchpad_bytes;
	if (db->cores > props.num_cores) {
		ret = fail(db, -EINVAL, "%u cores requested, the device has %u", db->cores, props.num_cores);
		goto out;
	}
	/* the permutes move a head's rows as whole sticks */
	if ((c->head_dim * 4) % SPYRE_STICK_BYTES) {
		ret = fail(db, -EINVAL, "head_dim %u: the card's encoder needs head_dim * 4 bytes a multiple of %u "
			   "(fp32 heads of whole sticks)", c->head_dim, SPYRE_STICK_BYTES);
		goto out;
	}
	uint64_t need = ((uint64_t)c->vocab + c->max_pos + 2) * H * 4 +
			(uint64_t)c->layers * (4ull * H * H + 2ull * H * F + 9ull * H + F) * 4;
	if (need > props.mem_size) {
		ret = fail(db, -ENOMEM, "the encoder's weights need %.1f MiB of device memory, the device has %.1f MiB",
			   need / 1048576.0, props.mem_size / 1048576.0);
		goto out;
	}
	ret = spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &db->stream);
	if (ret) {
		fail(db, ret, "stream");
		goto out;
	}
	ret = spyre_kcache_create(dev, 256, &db->kcache);
	if (ret) {
		fail(db, ret, "kernel cache");
		goto out;
	}
	db->layer = calloc(c->layers, sizeof(*db->layer));
	postype = malloc((size_t)c->max_pos * H * sizeof(float));
	if (!db->layer || !postype) {
		ret = fail(db, -ENOMEM, "host memory");
		goto out;
	}
	/* position + token type 0, one table: a row per position */
	for (size_t i = 0; i < (size_t)c->max_pos * H; i++)
		postype[i] = m->w.pos[i] + m->w.type[i % H];
	if ((ret = upload(db, &db->word, m->w.word, c->vocab, H)) ||
	    (ret = upload(db, &db->postype, postype, c->max_pos, H)) ||
	    (ret = upload(db, &db->ln_w, m->w.ln_w, 1, H)) || (ret = upload(db, &db->ln_b, m->w.ln_b, 1, H)))
		goto out;
	struct spyre_kdesc dhh = linear_desc(db, 1, H, H), dfh = linear_desc(db, 1, F, H), dhf = linear_desc(db, 1, H, F);

	for (uint32_t l = 0; l < c->layers; l++) {
		const struct spyre_bert_layer *w = &m->w.layer[l];
		struct dlayer *y = &db->layer[l];

		if ((ret = upload_linear(db, &y->wq, &dhh, 1, w->wq)) || (ret = upload_linear(db, &y->bq, &dhh, 2, w->bq)) ||
		    (ret = upload_linear(db, &y->wk, &dhh, 1, w->wk)) || (ret = upload_linear(db, &y->bk, &dhh, 2, w->bk)) ||
		    (ret = upload_linear(db, &y->wv, &dhh, 1, w->wv)) || (ret = upload_linear(db, &y->bv, &dhh, 2, w->bv)) ||
		    (ret = upload_linear(db, &y->wo, &dhh, 1, w->wo)) || (ret = upload_linear(db, &y->bo, &dhh, 2, w->bo)) ||
		    (ret = upload_linear(db, &y->wi, &dfh, 1, w->wi)) || (ret = upload_linear(db, &y->bi, &dfh, 2, w->bi)) ||
		    (ret = upload_linear(db, &y->wd, &dhf, 1, w->wd)) || (ret = upload_linear(db, &y->bd, &dhf, 2, w->bd)) ||
		    (ret = upload(db, &y->ln1_w, w->ln1_w, 1, H)) || (ret = upload(db, &y->ln1_b, w->ln1_b, 1, H)) ||
		    (ret = upload(db, &y->ln2_w, w->ln2_w, 1, H)) || (ret = upload(db, &y->ln2_b, w->ln2_b, 1, H)))
			goto out;
	}
	free(postype);
	db->err = NULL;
	db->errlen = 0;
	db->mem.err = NULL;
	db->mem.errlen = 0;
	*out = db;
	return 0;
out:
	free(postype);
	db->err = NULL;
	spyre_dbert_free(db);
	return ret ? ret : -EINVAL;
}

/* ---- a batch -------------------------------------------------------------------- */

/* Activations for @B sentences of @L tokens (kept; grown when needed). */
static int ensure_acts(struct spyre_dbert *db, uint64_t B, uint64_t L)
{
	const struct spyre_bert_config *c = &db->cfg;
	uint64_t M = B * L, H = c->hidden, S = B * c->heads * L;
	uint64_t ph = spyre_kernel_pitch(H, SPYRE_DT_FP32), pl = spyre_kernel_pitch(L, SPYRE_DT_FP32);
	int ret = 0;

	if (db->a.rows && B <= db->a.batch && L <= db->a.len)
		return 0;
	/* grow to at least what was there, so alternating shapes do not reallocate */
	B = B > db->a.batch ? B : db->a.batch;
	L = L > db->a.len ? L : db->a.len;
	M = B * L;
	S = B * c->heads * L;
	pl = spyre_kernel_pitch(L, SPYRE_DT_FP32);
	free_acts(db);
#define A(field, bytes) (ret = ret ?: spyre_malloc(db->dev, (bytes), &db->a.field))
	A(x, M * ph);
	A(h, M * ph);
	A(t, M * ph);
	A(q, M * ph);
	A(k, M * ph);
	A(v, M * ph);
	A(qh, M * ph);
	A(vh, M * ph);
	A(kt, B * H * pl);
	A(o, M * ph);
	A(f, M * spyre_kernel_pitch(c->ffn, SPYRE_DT_FP32));
	A(s, S * pl);
	A(mask, S * pl);
	A(ones, S * SPYRE_STICK_BYTES);
	A(maskrow, B * pl);
	A(poolw, B * pl);
	A(pooled, B * ph);
	A(sq, B * ph);
	A(red, spyre_kernel_pitch(B, SPYRE_DT_FP32));
	A(out, B * ph);
#undef A
	ret = ret ?: spyre_malloc_host(db->dev, B * ph, (void **)&db->a.host_out);
	ret = ret ?: spyre_malloc_host(db->dev, 2 * B * pl, (void **)&db->a.host_in);
	if (ret) {
		free_acts(db);
		return fail(db, ret, "device memory for a batch of %llu sentences of %llu tokens",
			    (unsigned long long)B, (unsigned long long)L);
	}
	/* the ones of the mask's broadcast: element 0 of each row's stick */
	float *one = calloc(S, SPYRE_STICK_BYTES);

	if (!one) {
		free_acts(db);
		return fail(db, -ENOMEM, "host memory");
	}
	for (uint64_t r = 0; r < S; r++)
		one[r * PAD_TO] = 1.0f;
	ret = spyre_memcpy(db->dev, db->a.ones, (uint64_t)(uintptr_t)one, S * SPYRE_STICK_BYTES, SPYRE_MEMCPY_H2D);
	free(one);
	if (ret) {
		free_acts(db);
		return fail(db, ret, "uploading the mask's ones");
	}
	db->a.batch = B;
	db->a.len = L;
	db->a.rows = M;
	return 0;
}

/* Gather rows of @table ([n x H]) by @idx (@m of them) into @dst's rows, in chunks. */
static int gather(struct spyre_dbert *db, spyre_dptr_t table, uint64_t n, const int32_t *idx, uint64_t m,
		  spyre_dptr_t dst)
{
	uint64_t ph = spyre_kernel_pitch(db->cfg.hidden, SPYRE_DT_FP32), sc[EMBED_CHUNK];
	int ret;

	for (uint64_t i = 0; i < m; i += EMBED_CHUNK) {
		uint64_t c = m - i < EMBED_CHUNK ? m - i : EMBED_CHUNK;
		struct spyre_kdesc d = kd(db, SPYRE_KOP_EMBEDDING, c, n, db->cfg.hidden);

		if (spyre_kernel_embedding_scalars(&d, idx + i, sc))
			return fail(db, -EINVAL, "embedding row ids");
		ret = launch(db, &d, (spyre_dptr_t[]){ table, dst + i * ph }, 2, sc, (uint32_t)c);
		if (ret)
			return ret;
	}
	return 0;
}

/* x = LayerNorm(x + t) with weight @w, bias @b: a post-LayerNorm residual over M rows. */
static int add_norm(struct spyre_dbert *db, uint64_t M, spyre_dptr_t w, spyre_dptr_t b)
{
	const struct acts *a = &db->a;
	struct spyre_kdesc d = kd(db, SPYRE_KOP_ADD, M, db->cfg.hidden, 0);
	int ret = launch(db, &d, (spyre_dptr_t[]){ a->x, a->t, a->x }, 3, NULL, 0);

	if (ret)
		return ret;
	d = kd(db, SPYRE_KOP_LAYERNORM, M, db->cfg.hidden, 0);
	d.eps = db->cfg.norm_eps;
	return launch(db, &d, (spyre_dptr_t[]){ a->x, w, b, a->x }, 4, NULL, 0);
}

/* The kernels of one batch: B sentences of L (padded) tokens, ids and positions [B*L]. */
static int run(struct spyre_dbert *db, uint32_t B, uint32_t L, const int32_t *tok, const int32_t *pos)
{
	const struct spyre_bert_config *c = &db->cfg;
	const struct acts *a = &db->a;
	uint64_t M = (uint64_t)B * L, H = c->hidden, F = c->ffn, nh = c->heads, hd = c->head_dim;
	uint64_t S = (uint64_t)B * nh * L;
	struct spyre_kdesc d;
	int ret;

	if ((ret = gather(db, db->word, c->vocab, tok, M, a->x)) ||
	    (ret = gather(db, db->postype, c->max_pos, pos, M, a->t)))
		return ret;
	d = kd(db, SPYRE_KOP_ADD, M, H, 0);
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->x, a->t, a->x }, 3, NULL, 0)))
		return ret;
	d = kd(db, SPYRE_KOP_LAYERNORM, M, H, 0);
	d.eps = c->norm_eps;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->x, db->ln_w, db->ln_b, a->x }, 4, NULL, 0)))
		return ret;
	/* the additive mask of every (sentence, head, query) row: ones [S x 1] . maskrow [1 x L] */
	d = kd(db, SPYRE_KOP_BMM, nh * L, L, 1);
	d.batch = B;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->ones, a->maskrow, a->mask }, 3, NULL, 0)))
		return ret;
	for (uint32_t l = 0; l < c->layers; l++) {
		const struct dlayer *y = &db->layer[l];

		d = linear_desc(db, M, H, H);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->x, y->wq, y->bq, a->q }, 4, NULL, 0)) ||
		    (ret = launch(db, &d, (spyre_dptr_t[]){ a->x, y->wk, y->bk, a->k }, 4, NULL, 0)) ||
		    (ret = launch(db, &d, (spyre_dptr_t[]){ a->x, y->wv, y->bv, a->v }, 4, NULL, 0)))
			return ret;
		/* [B, L, nh, hd] -> [B, nh, L, hd] */
		d = kd(db, SPYRE_KOP_PERMUTE, L, nh, hd);
		d.batch = B;
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->q, a->qh }, 2, NULL, 0)) ||
		    (ret = launch(db, &d, (spyre_dptr_t[]){ a->v, a->vh }, 2, NULL, 0)))
			return ret;
		/* [B, L, H] -> [B, H, L]: row h*hd+e of sentence b is K^T of head h */
		d = kd(db, SPYRE_KOP_PERMUTE, L, H, 1);
		d.batch = B;
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->k, a->kt }, 2, NULL, 0)))
			return ret;
		d = kd(db, SPYRE_KOP_BMM, L, L, hd);
		d.batch = (uint32_t)(B * nh);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->qh, a->kt, a->s }, 3, NULL, 0)))
			return ret;
		/* s = mask + scale * s */
		d = kd(db, SPYRE_KOP_BINARY, S, L, 0);
		d.fn = SPYRE_KFN_ADD;
		d.flags = SPYRE_KF_REVERSE;
		d.alpha = 1.0f / sqrtf((float)hd);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->s, a->mask, a->s }, 3, NULL, 0)))
			return ret;
		d = kd(db, SPYRE_KOP_SOFTMAX, S, L, 0);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->s, a->s }, 2, NULL, 0)))
			return ret;
		d = kd(db, SPYRE_KOP_BMM, L, hd, L);
		d.batch = (uint32_t)(B * nh);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->s, a->vh, a->o }, 3, NULL, 0)))
			return ret;
		/* [B, nh, L, hd] -> [B, L, nh, hd] */
		d = kd(db, SPYRE_KOP_PERMUTE, nh, L, hd);
		d.batch = B;
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->o, a->q }, 2, NULL, 0)))
			return ret;
		d = linear_desc(db, M, H, H);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->q, y->wo, y->bo, a->t }, 4, NULL, 0)))
			return ret;
		if ((ret = add_norm(db, M, y->ln1_w, y->ln1_b)))
			return ret;
		d = linear_desc(db, M, F, H);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->x, y->wi, y->bi, a->f }, 4, NULL, 0)))
			return ret;
		d = kd(db, SPYRE_KOP_GELU, M, F, 0);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->f, a->f }, 2, NULL, 0)))
			return ret;
		d = linear_desc(db, M, H, F);
		if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->f, y->wd, y->bd, a->t }, 4, NULL, 0)))
			return ret;
		if ((ret = add_norm(db, M, y->ln2_w, y->ln2_b)))
			return ret;
	}
	/* mean over each sentence's tokens: poolw [1 x L] . x [L x H] per sentence */
	d = kd(db, SPYRE_KOP_BMM, 1, H, L);
	d.batch = B;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->poolw, a->x, a->pooled }, 3, NULL, 0)))
		return ret;
	if (!c->normalize) {
		return spyre_memcpy_async(db->stream, (uint64_t)(uintptr_t)a->host_out, a->pooled,
					  B * spyre_kernel_pitch(H, SPYRE_DT_FP32), SPYRE_MEMCPY_D2H);
	}
	d = kd(db, SPYRE_KOP_BINARY, B, H, 0);
	d.fn = SPYRE_KFN_MUL;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->pooled, a->pooled, a->sq }, 3, NULL, 0)))
		return ret;
	d = kd(db, SPYRE_KOP_REDUCE, B, H, 0);
	d.fn = SPYRE_KFN_SUM;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->sq, a->red }, 2, NULL, 0)))
		return ret;
	d = kd(db, SPYRE_KOP_UNARY, 1, B, 0);
	d.fn = SPYRE_KFN_RSQRT;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->red, a->red }, 2, NULL, 0)))
		return ret;
	d = kd(db, SPYRE_KOP_BINARY, B, H, 0);
	d.fn = SPYRE_KFN_MUL;
	d.flags = SPYRE_KF_BCAST_COL;
	if ((ret = launch(db, &d, (spyre_dptr_t[]){ a->pooled, a->red, a->out }, 3, NULL, 0)))
		return ret;
	return spyre_memcpy_async(db->stream, (uint64_t)(uintptr_t)a->host_out, a->out,
				  B * spyre_kernel_pitch(H, SPYRE_DT_FP32), SPYRE_MEMCPY_D2H);
}

static int embed_locked(struct spyre_dbert *db, const int32_t *ids, const uint32_t *lens, uint32_t B, float *out,
			struct spyre_dbert_stats *st)
{
	const struct spyre_bert_config *c = &db->cfg;
	struct spyre_kcache_stats k0 = { .size = sizeof(k0) }, k1 = { .size = sizeof(k1) };
	struct spyre_stream_stats s = { .size = sizeof(s) };
	uint32_t L = 0;
	uint64_t t0 = mono_ns();
	int32_t *tok, *pos;
	int ret;

	ret = spyre_bert_check_batch(c, ids, lens, B, db->err, db->errlen);
	if (ret)
		return ret;
	for (uint32_t b = 0; b < B; b++)
		L = lens[b] > L ? lens[b] : L;
	L = (L + PAD_TO - 1) / PAD_TO * PAD_TO;
	ret = ensure_acts(db, B, L);
	if (ret)
		return ret;
	tok = malloc((size_t)B * L * sizeof(*tok));
	pos = malloc((size_t)B * L * sizeof(*pos));
	if (!tok || !pos) {
		free(tok);
		free(pos);
		return fail(db, -ENOMEM, "host memory");
	}
	/* ids padded with pad_token_id; the mask rows and the pooling weights */
	uint64_t pl = spyre_kernel_pitch(L, SPYRE_DT_FP32) / 4;
	float *mrow = db->a.host_in, *pw = db->a.host_in + B * pl;
	const int32_t *p = ids;

	for (uint32_t b = 0; b < B; b++) {
		for (uint32_t i = 0; i < L; i++) {
			bool in = i < lens[b];

			tok[(size_t)b * L + i] = in ? p[i] : (int32_t)c->pad_token_id;
			/* a padding row past the position table reads its last row (never read back) */
			pos[(size_t)b * L + i] = (int32_t)(i < c->max_pos ? i : c->max_pos - 1);
			mrow[b * pl + i] = in ? 0.0f : MASK_NEG;
			pw[b * pl + i] = in ? 1.0f / (float)lens[b] : 0.0f;
		}
		p += lens[b];
	}
	spyre_kcache_get_stats(db->kcache, &k0);
	ret = spyre_stream_reset_stats(db->stream);
	ret = ret ?: spyre_memcpy_async(db->stream, db->a.maskrow, (uint64_t)(uintptr_t)mrow, B * pl * 4,
					SPYRE_MEMCPY_H2D);
	ret = ret ?: spyre_memcpy_async(db->stream, db->a.poolw, (uint64_t)(uintptr_t)pw, B * pl * 4,
					SPYRE_MEMCPY_H2D);
	if (ret)
		fail(db, ret, "copying the batch's mask");
	ret = ret ?: run(db, B, L, tok, pos);
	free(tok);
	free(pos);
	{
		int sret = spyre_stream_synchronize(db->stream);

		if (!ret && sret)
			ret = fail(db, sret, "the batch on the card");
	}
	if (ret)
		return ret;
	ret = spyre_stream_get_stats(db->stream, &s);
	if (ret)
		return fail(db, ret, "stream statistics");
	if (s.failed_launches)
		return fail(db, -EIO, "%llu kernels of the batch faulted", (unsigned long long)s.failed_launches);
	spyre_kernel_unpack(out, db->a.host_out, B, c->hidden, 0, SPYRE_DT_FP32);
	if (st) {
		spyre_kcache_get_stats(db->kcache, &k1);
		st->host_ns = mono_ns() - t0;
		st->device_ns = s.device_ns;
		st->launches = s.launches;
		st->padded_len = L;
		st->kernel_misses = k1.misses - k0.misses;
	}
	return 0;
}

int spyre_dbert_embed(struct spyre_dbert *db, const int32_t *ids, const uint32_t *lens, uint32_t batch,
		      float *out, struct spyre_dbert_stats *st, char *err, size_t errlen)
{
	int ret;

	pthread_mutex_lock(&db->lock);
	db->err = err;
	db->errlen = errlen;
	ret = embed_locked(db, ids, lens, batch, out, st);
	db->err = NULL;
	db->errlen = 0;
	pthread_mutex_unlock(&db->lock);
	return ret;
}
