// SPDX-License-Identifier: MIT
/* A model's device memory (dmem.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dmem.h"

int spyre_model_errv(char *err, size_t errlen, int ret, bool detail, const char *fmt, va_list ap)
{
	int n;

	if (err && errlen) {
		n = vsnprintf(err, errlen, fmt, ap);
		if (detail && n >= 0 && (size_t)n + 4 < errlen && ret < 0 && *spyre_last_error())
			snprintf(err + n, errlen - (size_t)n, ": %s", spyre_last_error());
	}
	return ret < 0 ? ret : -EINVAL;
}

static int fail(struct spyre_dmem *m, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct spyre_dmem *m, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = spyre_model_errv(m->err, m->errlen, ret, true, fmt, ap);
	va_end(ap);
	return ret;
}

int spyre_dmem_alloc(struct spyre_dmem *m, uint64_t bytes, spyre_dptr_t *p)
{
	int ret;

	if (m->nallocs == m->capallocs) {
		uint32_t cap = m->capallocs ? 2 * m->capallocs : 64;
		spyre_dptr_t *n = realloc(m->allocs, cap * sizeof(*n));

		if (!n)
			return fail(m, -ENOMEM, "host memory");
		m->allocs = n;
		m->capallocs = cap;
	}
	ret = spyre_malloc(m->dev, bytes, p);
	if (ret)
		return fail(m, ret, "device memory: %llu bytes", (unsigned long long)bytes);
	m->allocs[m->nallocs++] = *p;
	return 0;
}

int spyre_dmem_upload(struct spyre_dmem *m, spyre_dptr_t *p, void *buf, uint64_t bytes)
{
	int ret = spyre_dmem_alloc(m, bytes, p);

	if (!ret && (ret = spyre_memcpy(m->dev, *p, (uint64_t)(uintptr_t)buf, bytes, SPYRE_MEMCPY_H2D)))
		fail(m, ret, "uploading weights");
	free(buf);
	return ret;
}

int spyre_dmem_upload_matrix(struct spyre_dmem *m, spyre_dptr_t *p, const float *src, uint64_t rows,
			     uint64_t cols, uint32_t dtype)
{
	uint64_t bytes = rows * spyre_kernel_pitch(cols, dtype);
	void *buf = malloc(bytes);

	if (!buf)
		return fail(m, -ENOMEM, "host memory");
	spyre_kernel_pack(buf, src, rows, cols, 0, dtype);
	return spyre_dmem_upload(m, p, buf, bytes);
}

int spyre_dmem_upload_weight(struct spyre_dmem *m, spyre_dptr_t *p, const struct spyre_kdesc *d, uint32_t slot,
			     const float *src)
{
	size_t bytes = 0;
	void *buf;
	int ret = spyre_kernel_pack_weight(d, slot, SPYRE_KW_OUT_IN, src, SPYRE_DT_FP32, NULL, &bytes);

	if (ret)
		return fail(m, ret, "%s weight", spyre_kernel_op_name(d->op));
	buf = malloc(bytes);
	if (!buf)
		return fail(m, -ENOMEM, "host memory");
	ret = spyre_kernel_pack_weight(d, slot, SPYRE_KW_OUT_IN, src, SPYRE_DT_FP32, buf, &bytes);
	if (ret) {
		free(buf);
		return fail(m, ret, "%s weight", spyre_kernel_op_name(d->op));
	}
	return spyre_dmem_upload(m, p, buf, bytes);
}

void spyre_dmem_free(struct spyre_dmem *m)
{
	for (uint32_t i = 0; i < m->nallocs; i++)
		spyre_free(m->dev, m->allocs[i]);
	free(m->allocs);
	m->allocs = NULL;
	m->nallocs = m->capallocs = 0;
}

static struct spyre_kdesc desc(const struct spyre_kdesc *base, uint32_t op, uint64_t n, uint64_t k)
{
	struct spyre_kdesc d = *base;

	d.size = sizeof(d);
	d.op = op;
	d.m = 1;
	d.n = n;
	d.k = k;
	return d;
}

int spyre_dmem_upload_decoder(struct spyre_dmem *m, const struct spyre_model_config *cfg,
			      const struct spyre_model_weights *w, const struct spyre_kdesc *base, bool lm_head,
			      uint64_t cache_bytes, struct spyre_ddecoder *out)
{
	uint32_t hd = cfg->head_dim, qd = cfg->heads * hd, kvd = cfg->kv_heads * hd, dt = base->dtype;
	struct spyre_kdesc dq = desc(base, SPYRE_KOP_LINEAR, qd, cfg->hidden);
	struct spyre_kdesc dkv = desc(base, SPYRE_KOP_LINEAR, kvd, cfg->hidden);
	struct spyre_kdesc dout = desc(base, SPYRE_KOP_LINEAR, cfg->hidden, qd);
	struct spyre_kdesc dmlp = desc(base, SPYRE_KOP_MLP, cfg->ffn, cfg->hidden);
	struct spyre_kdesc dlm = desc(base, SPYRE_KOP_LINEAR, cfg->vocab, cfg->hidden);
	uint64_t tb = (uint64_t)cfg->max_pos * spyre_kernel_pitch(hd, SPYRE_DT_FP32);
	void *cs, *sn;
	int ret;

	out->layer = calloc(cfg->layers, sizeof(*out->layer));
	if (!out->layer)
		return fail(m, -ENOMEM, "host memory");
	dq.out_group = dkv.out_group = hd;
	dout.in_group = hd;
	if ((ret = spyre_dmem_upload_matrix(m, &out->embed, w->embed, cfg->vocab, cfg->hidden, dt)) ||
	    (ret = spyre_dmem_upload_matrix(m, &out->final_norm, w->final_norm, 1, cfg->hidden, dt)) ||
	    (lm_head && (ret = spyre_dmem_upload_weight(m, &out->lm_head, &dlm, 1, w->lm_head))))
		return ret;
	for (uint32_t l = 0; l < cfg->layers; l++) {
		const struct spyre_layer_weights *lw = &w->layer[l];
		struct spyre_dlayer *lb = &out->layer[l];

		if ((ret = spyre_dmem_upload_matrix(m, &lb->attn_norm, lw->attn_norm, 1, cfg->hidden, dt)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wq, &dq, 1, lw->wq)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wk, &dkv, 1, lw->wk)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wv, &dkv, 1, lw->wv)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wo, &dout, 1, lw->wo)) ||
		    (ret = spyre_dmem_upload_matrix(m, &lb->mlp_norm, lw->mlp_norm, 1, cfg->hidden, dt)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wg, &dmlp, 1, lw->w_gate)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wu, &dmlp, 2, lw->w_up)) ||
		    (ret = spyre_dmem_upload_weight(m, &lb->wd, &dmlp, 3, lw->w_down)) ||
		    (ret = spyre_dmem_alloc(m, cache_bytes, &lb->kc)) ||
		    (ret = spyre_dmem_alloc(m, cache_bytes, &lb->vc)))
			return ret;
	}
	/* RoPE tables (fp32) */
	cs = malloc(tb);
	sn = malloc(tb);
	if (!cs || !sn) {
		free(cs);
		free(sn);
		return fail(m, -ENOMEM, "host memory");
	}
	spyre_kernel_rope_tables(cs, sn, cfg->max_pos, hd, cfg->rope_theta);
	ret = spyre_dmem_alloc(m, tb, &out->rope_cos);
	ret = ret ?: spyre_dmem_alloc(m, tb, &out->rope_sin);
	if (!ret && ((ret = spyre_memcpy(m->dev, out->rope_cos, (uint64_t)(uintptr_t)cs, tb, SPYRE_MEMCPY_H2D)) ||
		     (ret = spyre_memcpy(m->dev, out->rope_sin, (uint64_t)(uintptr_t)sn, tb, SPYRE_MEMCPY_H2D))))
		fail(m, ret, "RoPE tables");
	free(cs);
	free(sn);
	return ret;
}
