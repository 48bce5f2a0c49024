// SPDX-License-Identifier: MIT
/*
 * Description: the card runner (serve/runner_card.c) in the VM, on the
 * seeded tiny model: batched steps as an engine makes them — prefill
 * chunks of two prompts with a decode interleaved, then all three
 * sequences decoding together, blocks of 16 handed out with holes and out
 * of order, contexts crossing block boundaries — and each sequence's
 * sampled logits and greedy tokens against the CPU reference run on that
 * sequence alone (model/ref.c: prefill, then one decode per token). fp32:
 * logits within 1e-4 of the largest |logit| (+1e-3), every greedy token
 * equal; fp16: logits within 1e-2 of the largest, the tokens equal where
 * the reference's best two differ by more than twice that. A careless engine's
 * batches (a token past the vocabulary, a block id past the cache, a
 * position that is not the context's, query_start not increasing, too many
 * rows) are -EINVAL naming the fault, and the runner goes on serving.
 * Launch graphs: a runner that replays its decode steps (the default) and
 * one that launches them one by one (no_graphs), fed the same steps, give
 * the same greedy tokens and bit-identical logits, every decode after a
 * sequence count's first replayed.
 * Built with SERVE_CARD_WITH_CPU (serve.mk, when serve/runner_cpu.c is in
 * the tree) every step also runs on the CPU runner (model/ref_paged.c) and
 * the card's sampled logits and tokens are checked against it the same way.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ref.h"
#include "runner_card.h"
#include "spyre_isa.h"
#include "spyre_isa_codec.h"
#include "weights.h"
#include "../../tests/tap.h"
#ifdef SERVE_CARD_WITH_CPU
#include "runner_cpu.h"
#endif

#define NSEQ	3
#define BS	16
#define DECODES	12

static struct spyre_model_config cfg;
static struct spyre_model_weights w;
static spyre_device_t *dev;

/* A sequence as the engine sees it: its prompt, tokens so far, blocks. */
struct seq {
	int32_t toks[256];
	uint32_t prompt, len;		/* prompt length; tokens in toks */
	uint32_t done;			/* tokens whose K/V are in the cache */
	int32_t blocks[16];
	struct spyre_ref *ref;
	float *ref_logits;
	bool ref_fed;			/* the reference has consumed toks[0..len-1] but for the last */
};

/* Rows of one step under construction. */
struct stepb {
	int32_t tokens[256], positions[256], bt[NSEQ * 16];
	int64_t slots[256];
	uint32_t qs[NSEQ + 1], ctx[NSEQ], nt, ns, which[NSEQ];
};

static void add_rows(struct stepb *st, struct seq *s, uint32_t si, uint32_t n)
{
	st->qs[st->ns] = st->nt;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = s->done + i;

		st->tokens[st->nt] = s->toks[p];
		st->positions[st->nt] = (int32_t)p;
		st->slots[st->nt] = (int64_t)s->blocks[p / BS] * BS + p % BS;
		st->nt++;
	}
	memcpy(st->bt + st->ns * 16, s->blocks, sizeof(s->blocks));
	st->ctx[st->ns] = s->done + n;
	st->which[st->ns] = si;
	st->ns++;
	st->qs[st->ns] = st->nt;
	s->done += n;
}

static double max_abs(const float *v, uint32_t n)
{
	double m = 0;

	for (uint32_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

/* The gap between the reference's best and second-best logits. */
static double top2_gap(const float *v, uint32_t n)
{
	double a = -INFINITY, b = -INFINITY;

	for (uint32_t i = 0; i < n; i++) {
		if (v[i] > a) {
			b = a;
			a = v[i];
		} else if (v[i] > b) {
			b = v[i];
		}
	}
	return a - b;
}

static void run_dtype(uint32_t dt)
{
	struct spyre_runner *rp;
	char err[512] = "";
	struct spyre_runner_card_opts o = { .dtype = dt, .cores = 8, .block_size = BS, .num_blocks = 24,
					    .max_num_seqs = 4, .max_num_batched_tokens = 64 };
	struct seq S[NSEQ];
	/* blocks out of order, holes (4, 9, 11, ... never used), 0 used */
	static const int32_t blocks[NSEQ][4] = { { 7, 2, 0, 19 }, { 5, 13, 8, 22 }, { 3, 1, 6, 10 } };
	static const uint32_t prompt[NSEQ] = { 5, 17, 40 };
	double rel = dt == SPYRE_DT_FP32 ? 1e-4 : 1e-2;
	uint32_t steps = 0, compared = 0, tok_ok = 0, tok_cmp = 0, logit_bad = 0;
	double worst_rel = 0;
	uint64_t step_ns[3] = { 0 }, step_launches[3] = { 0 };
	float *logits = malloc((size_t)NSEQ * cfg.vocab * 4);
	int32_t argmax[NSEQ];
	int ret = spyre_runner_card_new(dev, &cfg, &w, &o, &rp, err, sizeof(err));

	if (!TAP_CHECK(ret == 0 && rp, "%s runner: %s", spyre_dtype_name(dt), err)) {
		free(logits);
		return;
	}
	struct spyre_runner r = *rp;
#ifdef SERVE_CARD_WITH_CPU
	struct spyre_runner *cpu = NULL;
	float *cpu_logits = malloc((size_t)NSEQ * cfg.vocab * 4);
	int32_t cpu_argmax[NSEQ];
	uint32_t cpu_cmp = 0, cpu_tok = 0, cpu_tok_cmp = 0, cpu_bad = 0;

	ret = spyre_runner_cpu_new_from(&cfg, &w, dt, o.num_blocks, BS, &cpu, err, sizeof(err));
	TAP_CHECK(ret == 0 && cpu, "%s CPU runner: %s", spyre_dtype_name(dt), err);
#endif

	TAP_CHECK(r.vocab == cfg.vocab && r.block_size == BS && r.num_blocks == 24 && !strcmp(r.name, "card"),
		  "runner sizes: vocab %u block %u blocks %u name %s", r.vocab, r.block_size, r.num_blocks, r.name);
	memset(S, 0, sizeof(S));
	for (uint32_t i = 0; i < NSEQ; i++) {
		S[i].prompt = S[i].len = prompt[i];
		for (uint32_t j = 0; j < prompt[i]; j++)
			S[i].toks[j] = (int32_t)((i * 131 + j * 37 + 11) % cfg.vocab);
		for (uint32_t j = 0; j < 16; j++)
			S[i].blocks[j] = j < 4 ? blocks[i][j] : -1;
		S[i].ref = spyre_ref_new(&cfg, &w, dt);
		S[i].ref_logits = malloc((size_t)cfg.vocab * 4);
	}
	/*
	 * step 0: A's prompt (5), B's first chunk (10); step 1: B's last 7 (to 17, past a
	 * block end), C's prompt 40 rows (3 blocks) and A's first decode; then all decode.
	 */
	for (uint32_t stepno = 0; stepno < 2 + DECODES; stepno++) {
		struct stepb st;
		struct spyre_runner_batch b;
		struct spyre_runner_stats rs = { 0 };

		memset(&st, 0, sizeof(st));
		if (stepno == 0) {
			add_rows(&st, &S[0], 0, 5);
			add_rows(&st, &S[1], 1, 10);
		} else if (stepno == 1) {
			add_rows(&st, &S[0], 0, 1);
			add_rows(&st, &S[1], 1, 7);
			add_rows(&st, &S[2], 2, 40);
		} else {
			for (uint32_t i = 0; i < NSEQ; i++)
				add_rows(&st, &S[i], i, 1);
		}
		b = (struct spyre_runner_batch){ .num_tokens = st.nt, .tokens = st.tokens, .positions = st.positions,
						 .slot_mapping = st.slots, .num_seqs = st.ns, .query_start = st.qs,
						 .context_lens = st.ctx, .block_tables = st.bt, .max_blocks = 16,
						 .logits = logits, .argmax = argmax };
		ret = r.ops->step(r.self, &b, &rs, err, sizeof(err));
		if (!TAP_CHECK(ret == 0, "%s step %u (%u rows, %u sequences): %s", spyre_dtype_name(dt), stepno, st.nt,
			       st.ns, err))
			break;
#ifdef SERVE_CARD_WITH_CPU
		if (cpu) {
			struct spyre_runner_batch cb = b;

			cb.logits = cpu_logits;
			cb.argmax = cpu_argmax;
			ret = cpu->ops->step(cpu->self, &cb, NULL, err, sizeof(err));
			TAP_CHECK(ret == 0, "%s CPU runner step %u: %s", spyre_dtype_name(dt), stepno, err);
			for (uint32_t k = 0; k < st.ns && ret == 0; k++) {
				const float *want = cpu_logits + (uint64_t)k * cfg.vocab, *got = logits + (uint64_t)k * cfg.vocab;
				double tol = rel * max_abs(want, cfg.vocab) + 1e-3, worst = 0;

				if (S[st.which[k]].done < S[st.which[k]].len)
					continue;	/* not sampled */
				for (uint32_t v = 0; v < cfg.vocab; v++)
					worst = fmax(worst, fabs((double)got[v] - want[v]));
				cpu_cmp++;
				cpu_bad += worst > tol;
				if (dt == SPYRE_DT_FP32 || top2_gap(want, cfg.vocab) > 2 * tol) {
					cpu_tok_cmp++;
					cpu_tok += argmax[k] == cpu_argmax[k];
				}
			}
		}
#endif
		steps++;
		step_ns[stepno < 2 ? stepno : 2] = rs.device_ns;
		step_launches[stepno < 2 ? stepno : 2] = rs.launches;
		if (stepno == 0)
			TAP_CHECK(rs.launches > 0 && rs.device_ns > 0, "step 0: %llu launches, %llu ns modeled",
				  (unsigned long long)rs.launches, (unsigned long long)rs.device_ns);
		for (uint32_t k = 0; k < st.ns; k++) {
			struct seq *s = &S[st.which[k]];
			const float *got = logits + (uint64_t)k * cfg.vocab;
			double tol, m, worst = 0;
			uint32_t wi = 0;

			if (s->done < s->len)
				continue;	/* a chunk that does not end the prompt: not sampled */
			/* the reference: the whole prompt at once, then one token at a time */
			if (!s->ref_fed)
				ret = spyre_ref_prefill(s->ref, s->toks, s->len, s->ref_logits);
			else
				ret = spyre_ref_decode(s->ref, s->toks[s->len - 1], s->ref_logits);
			s->ref_fed = true;
			if (!TAP_CHECK(ret == 0, "reference: %s", spyre_ref_error(s->ref)))
				continue;
			m = max_abs(s->ref_logits, cfg.vocab);
			tol = rel * m + 1e-3;
			for (uint32_t v = 0; v < cfg.vocab; v++)
				if (fabs((double)got[v] - s->ref_logits[v]) > worst) {
					worst = fabs((double)got[v] - s->ref_logits[v]);
					wi = v;
				}
			compared++;
			worst_rel = fmax(worst_rel, worst / m);
			if (worst > tol) {
				logit_bad++;
				TAP_CHECK(0, "%s step %u seq %u: logit %u got %g want %g (tolerance %g)",
					  spyre_dtype_name(dt), stepno, st.which[k], wi, got[wi], s->ref_logits[wi], tol);
			}
			int32_t want = spyre_argmax(s->ref_logits, cfg.vocab);

			if (dt == SPYRE_DT_FP32 || top2_gap(s->ref_logits, cfg.vocab) > 2 * tol) {
				tok_cmp++;
				if (argmax[k] == want)
					tok_ok++;
				else
					TAP_CHECK(0, "%s step %u seq %u: greedy token %d, the reference's %d",
						  spyre_dtype_name(dt), stepno, st.which[k], argmax[k], want);
			}
			/* the reference's token goes on (so both stay on the same path) */
			s->toks[s->len++] = want;
		}
	}
	TAP_CHECK(steps == 2 + DECODES && logit_bad == 0 && tok_ok == tok_cmp && tok_cmp > 0,
		  "%s: %u steps, %u sampled rows compared, logits all within tolerance (%u off), greedy tokens "
		  "%u of %u equal", spyre_dtype_name(dt), steps, compared, logit_bad, tok_ok, tok_cmp);
	tap_line_("# ", "%s: greedy tokens %u of %u compared equal; worst logit error %.2e of the largest |logit|; modeled device time: step 0 (15 "
		  "prefill rows) %llu ns in %llu launches, step 1 (48 rows) %llu ns, a decode of 3 %llu ns in %llu "
		  "launches", spyre_dtype_name(dt), tok_ok, tok_cmp, worst_rel, (unsigned long long)step_ns[0],
		  (unsigned long long)step_launches[0], (unsigned long long)step_ns[1], (unsigned long long)step_ns[2],
		  (unsigned long long)step_launches[2]);
#ifdef SERVE_CARD_WITH_CPU
	TAP_CHECK(cpu && cpu_cmp == compared && cpu_bad == 0 && cpu_tok == cpu_tok_cmp && cpu_tok_cmp > 0,
		  "%s against the CPU runner: %u sampled rows, logits within tolerance (%u off), greedy tokens %u of %u "
		  "equal", spyre_dtype_name(dt), cpu_cmp, cpu_bad, cpu_tok, cpu_tok_cmp);
	spyre_runner_free(cpu);
	free(cpu_logits);
#endif
	/* C's context: 40 prompt + decodes, crossing into its 4th block */
	TAP_CHECK(S[2].done == 40 + DECODES, "sequence C holds %u positions (want %u)", S[2].done, 40 + DECODES);

	/* a careless engine's batches: -EINVAL naming the fault; the runner goes on */
	{
		int32_t tok[2] = { 1, 2 }, pos[2] = { 0, 1 }, btab[16] = { 4, -1 };
		int64_t sl[2] = { 64, 65 };
		uint32_t qs[2] = { 0, 2 }, ctx[1] = { 2 };
		struct spyre_runner_batch b = { .num_tokens = 2, .tokens = tok, .positions = pos, .slot_mapping = sl,
						.num_seqs = 1, .query_start = qs, .context_lens = ctx,
						.block_tables = btab, .max_blocks = 16, .argmax = argmax };
		static const struct {
			const char *what, *needle;
		} bad[] = {
			{ "token past the vocabulary", "vocabulary" }, { "block id past the cache", "block 0" },
			{ "position not the context's", "position" }, { "slot past the cache", "slot" },
			{ "query_start not reaching num_tokens", "query_start" }, { "too many rows", "num_tokens" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			int32_t t0 = tok[1], b0 = btab[0], p0 = pos[1];
			int64_t s0 = sl[1];
			uint32_t q1 = qs[1], n0 = b.num_tokens;

			switch (i) {
			case 0: tok[1] = (int32_t)cfg.vocab; break;
			case 1: btab[0] = 24; break;
			case 2: pos[1] = 5; break;
			case 3: sl[1] = 24 * BS; break;
			case 4: qs[1] = 1; break;
			default: b.num_tokens = 65; break;
			}
			err[0] = 0;
			ret = r.ops->step(r.self, &b, NULL, err, sizeof(err));
			TAP_CHECK(ret == -EINVAL && strstr(err, bad[i].needle), "%s: %d \"%s\" (want -EINVAL naming %s)",
				  bad[i].what, ret, err, bad[i].needle);
			tok[1] = t0;
			btab[0] = b0;
			pos[1] = p0;
			sl[1] = s0;
			qs[1] = q1;
			b.num_tokens = n0;
		}
		ret = r.ops->step(r.self, &b, NULL, err, sizeof(err));
		TAP_CHECK(ret == 0 && argmax[0] >= 0 && (uint32_t)argmax[0] < cfg.vocab,
			  "a good batch after the bad ones: %d (%s), token %d", ret, err, argmax[0]);
	}
	for (uint32_t i = 0; i < NSEQ; i++) {
		spyre_ref_free(S[i].ref);
		free(S[i].ref_logits);
	}
	free(logits);
	spyre_runner_free(rp);
}

static void test_fp32(void)
{
	run_dtype(SPYRE_DT_FP32);
}

static void test_fp16(void)
{
	run_dtype(SPYRE_DT_FP16);
}

static void test_bad_options(void)
{
	struct spyre_runner *r = (struct spyre_runner *)&cfg;	/* set to NULL by a failed constructor */
	char err[256] = "";
	struct spyre_runner_card_opts o = { .dtype = 9 };

	TAP_CHECK(spyre_runner_card_new(dev, &cfg, &w, &o, &r, err, sizeof(err)) == -EINVAL && strstr(err, "dtype") &&
		  !r, "dtype 9: %s", err);
	o = (struct spyre_runner_card_opts){ .dtype = SPYRE_DT_FP16, .num_blocks = 1u << 30 };
	TAP_CHECK(spyre_runner_card_new(dev, &cfg, &w, &o, &r, err, sizeof(err)) == -ENOMEM && strstr(err, "MiB"),
		  "2^30 blocks: %s", err);
	o = (struct spyre_runner_card_opts){ .dtype = SPYRE_DT_FP16, .max_num_seqs = 8, .max_num_batched_tokens = 4 };
	TAP_CHECK(spyre_runner_card_new(dev, &cfg, &w, &o, &r, err, sizeof(err)) == -EINVAL,
		  "more sequences than tokens: %s", err);
}

/* One step of @ns sequences of @rows rows each, contexts of @rows (fresh prompts) in block 0. */
static int step_shape(struct spyre_runner *r, uint32_t ns, uint32_t rows, struct spyre_runner_stats *st,
		      char *err, size_t errlen)
{
	static int32_t tok[64], pos[64], bt[8 * 4], am[8];	/* every table entry block 0 */
	static int64_t slot[64];
	static uint32_t qs[9], ctx[8];

	for (uint32_t s = 0, i = 0; s < ns; s++) {
		qs[s] = i;
		ctx[s] = rows;
		for (uint32_t k = 0; k < rows; k++, i++) {
			tok[i] = (int32_t)(i % cfg.vocab);
			pos[i] = (int32_t)k;
			slot[i] = k % BS;
		}
	}
	qs[ns] = ns * rows;
	memset(st, 0, sizeof(*st));
	return r->ops->step(r->self, &(struct spyre_runner_batch){ .num_tokens = ns * rows, .tokens = tok,
			    .positions = pos, .slot_mapping = slot, .num_seqs = ns, .query_start = qs,
			    .context_lens = ctx, .block_tables = bt, .max_blocks = (rows + BS - 1) / BS, .argmax = am },
			    st, err, errlen);
}

/*
 * Warm-up: every decode shape (1..max_num_seqs sequences of one row) and
 * row bucket is built at creation; serving them builds nothing, a prefill
 * chunk of a new length builds its attention only (once). Without it the
 * first step builds its kernels.
 */
static void test_warmup(void)
{
	struct spyre_runner_card_opts o = { .dtype = SPYRE_DT_FP32, .cores = 8, .block_size = BS, .num_blocks = 8,
					    .max_num_seqs = 4, .max_num_batched_tokens = 64, .warmup = true };
	struct spyre_runner_stats st;
	struct spyre_runner *r;
	char err[512] = "";

	if (!TAP_CHECK(!spyre_runner_card_new(dev, &cfg, &w, &o, &r, err, sizeof(err)), "warm-up: %s", err))
		return;
	TAP_EQ(4u, r->max_num_seqs);
	TAP_EQ(64u, r->max_num_tokens);
	for (uint32_t ns = 1; ns <= 4; ns++) {
		TAP_CHECK(!step_shape(r, ns, 1, &st, err, sizeof(err)), "%u decodes: %s", ns, err);
		TAP_EQ(0ull, (unsigned long long)st.builds);
	}
	TAP_CHECK(!step_shape(r, 1, 20, &st, err, sizeof(err)), "a chunk of 20: %s", err);
	TAP_EQ(1ull, (unsigned long long)st.builds);	/* its attention: 20 rows of one sequence */
	TAP_CHECK(!step_shape(r, 1, 20, &st, err, sizeof(err)), "a chunk of 20 again: %s", err);
	TAP_EQ(0ull, (unsigned long long)st.builds);
	TAP_CHECK(!step_shape(r, 1, 64, &st, err, sizeof(err)), "a chunk of 64: %s", err);
	TAP_EQ(0ull, (unsigned long long)st.builds);	/* the bucket of 64 was warmed with one sequence */
	TAP_EQ(-EINVAL, step_shape(r, 5, 1, &st, err, sizeof(err)));	/* beyond max_num_seqs */
	TAP_CHECK(strstr(err, "num_seqs 5"), "'%s'", err);
	spyre_runner_free(r);

	o.warmup = false;
	if (!TAP_CHECK(!spyre_runner_card_new(dev, &cfg, &w, &o, &r, err, sizeof(err)), "no warm-up: %s", err))
		return;
	TAP_CHECK(!step_shape(r, 2, 1, &st, err, sizeof(err)), "2 decodes: %s", err);
	TAP_CHECK(st.builds >= 10, "the first step built %llu kernels", (unsigned long long)st.builds);
	TAP_CHECK(!step_shape(r, 2, 1, &st, err, sizeof(err)), "2 decodes again: %s", err);
	TAP_EQ(0ull, (unsigned long long)st.builds);
	spyre_runner_free(r);
}

/*
 * Launch graphs: a runner that replays its decode steps and one that
 * launches them one by one, fed the same steps (a prefill of three
 * prompts, then decodes of three and of two sequences, some asking for the
 * logits, each fed its own greedy tokens), give the same tokens and
 * bit-identical logits; the first decode of a sequence count runs one by
 * one (and is captured), the later ones are replays.
 */
#define GSEQ 3
struct gseq {
	uint32_t ctx;		/* tokens whose K/V are in the cache after the last step */
	int32_t last;		/* the token the next decode feeds */
};

static int gstep(struct spyre_runner *r, struct gseq *q, const uint32_t *which, uint32_t ns, const uint32_t *rows,
		 float *logits, int32_t *am, struct spyre_runner_stats *st, char *err, size_t errlen)
{
	int32_t tok[64], pos[64], bt[GSEQ * 4];
	int64_t slot[64];
	uint32_t qs[GSEQ + 1], ctx[GSEQ], n = 0;

	for (uint32_t i = 0; i < ns; i++) {
		uint32_t s = which[i], c0 = q[s].ctx;

		qs[i] = n;
		ctx[i] = c0 + rows[i];
		for (uint32_t k = 0; k < rows[i]; k++, n++) {
			uint32_t p = c0 + k;

			/* a prompt's tokens from its index; a decode feeds the last greedy token */
			tok[n] = rows[i] == 1 && c0 ? q[s].last : (int32_t)((s * 97 + p * 31 + 7) % cfg.vocab);
			pos[n] = (int32_t)p;
			slot[n] = (int64_t)(s * 4 + p / BS) * BS + p % BS;	/* sequence s owns blocks 4s..4s+3 */
		}
		for (uint32_t b = 0; b < 4; b++)
			bt[i * 4 + b] = (int32_t)(s * 4 + b);
	}
	qs[ns] = n;
	memset(st, 0, sizeof(*st));
	return r->ops->step(r->self, &(struct spyre_runner_batch){ .num_tokens = n, .tokens = tok, .positions = pos,
			    .slot_mapping = slot, .num_seqs = ns, .query_start = qs, .context_lens = ctx,
			    .block_tables = bt, .max_blocks = 4, .logits = logits, .argmax = am }, st, err, errlen);
}

static void test_graphs(void)
{
	struct spyre_runner_card_opts o = { .dtype = SPYRE_DT_FP32, .cores = 8, .block_size = BS, .num_blocks = 16,
					    .max_num_seqs = 4, .max_num_batched_tokens = 64 };
	struct spyre_runner *r[2] = { NULL, NULL };	/* [0] graphs, [1] one by one */
	struct gseq q[2][GSEQ];
	float *lg[2] = { malloc((size_t)GSEQ * cfg.vocab * 4), malloc((size_t)GSEQ * cfg.vocab * 4) };
	static const uint32_t all[GSEQ] = { 0, 1, 2 }, two[2] = { 0, 2 }, prompt[GSEQ] = { 5, 9, 3 };
	static const uint32_t ones[GSEQ] = { 1, 1, 1 };
	uint64_t replays = 0, tokens_equal = 0, logits_equal = 0, compared = 0;
	char err[512] = "";

	for (int g = 0; g < 2; g++) {
		o.no_graphs = g == 1;
		if (!TAP_CHECK(!spyre_runner_card_new(dev, &cfg, &w, &o, &r[g], err, sizeof(err)), "runner %d: %s", g,
			       err))
			goto out;
		memset(q[g], 0, sizeof(q[g]));
	}
	/* step 0: the prompts; steps 1..6: three decodes; 7..9: two; 10..11: three again */
	for (uint32_t stepno = 0; stepno < 12; stepno++) {
		const uint32_t *which = stepno >= 7 && stepno < 10 ? two : all;
		uint32_t ns = stepno >= 7 && stepno < 10 ? 2 : GSEQ;
		bool want_logits = stepno % 3 == 2;
		int32_t am[2][GSEQ];
		struct spyre_runner_stats st[2];

		for (int g = 0; g < 2; g++) {
			int ret = gstep(r[g], q[g], which, ns, stepno ? ones : prompt, want_logits ? lg[g] : NULL, am[g],
					&st[g], err, sizeof(err));

			if (!TAP_CHECK(!ret, "step %u runner %d: %s", stepno, g, err))
				goto out;
			for (uint32_t i = 0; i < ns; i++) {
				q[g][which[i]].ctx += stepno ? 1 : prompt[i];
				q[g][which[i]].last = am[g][i];
			}
		}
		/* the first decode of 3 (step 1) and of 2 (step 7) run one by one; the others replay */
		TAP_CHECK(st[0].replays == (stepno && stepno != 1 && stepno != 7), "step %u: %llu replays", stepno,
			  (unsigned long long)st[0].replays);
		TAP_EQ(0ull, (unsigned long long)st[1].replays);
		replays += st[0].replays;
		compared++;
		tokens_equal += !memcmp(am[0], am[1], ns * sizeof(int32_t));
		if (want_logits)
			logits_equal += !memcmp(lg[0], lg[1], (size_t)ns * cfg.vocab * 4);
	}
	TAP_EQ(9ull, (unsigned long long)replays);
	TAP_CHECK(tokens_equal == compared, "greedy tokens equal in %llu of %llu steps",
		  (unsigned long long)tokens_equal, (unsigned long long)compared);
	TAP_CHECK(logits_equal == 4, "logits bit-identical in %llu of 4 steps that asked", (unsigned long long)logits_equal);
	tap_diag("graphs: %llu replayed decode steps, tokens and logits as launched one by one",
		 (unsigned long long)replays);
out:
	spyre_runner_free(r[0]);
	spyre_runner_free(r[1]);
	free(lg[0]);
	free(lg[1]);
}

/*
 * Tensor parallel: a runner split over the first two cards
 * (spyre_runner_card_new_tp()) fed the steps of test_graphs gives the
 * one-card runner's greedy tokens in every step and its logits within 1e-4
 * of the largest (fp32: the ranks' partial sums only change the order of
 * the additions); it never replays a graph; a split that does not divide
 * the heads, and one card twice, are refused.
 */
static void test_tp(void)
{
	struct spyre_runner_card_opts o = { .dtype = SPYRE_DT_FP32, .block_size = BS, .num_blocks = 16,
					    .max_num_seqs = 4, .max_num_batched_tokens = 64 };
	struct spyre_runner *r[2] = { NULL, NULL };	/* [0] one card, [1] two */
	struct gseq q[2][GSEQ];
	float *lg[2] = { malloc((size_t)GSEQ * cfg.vocab * 4), malloc((size_t)GSEQ * cfg.vocab * 4) };
	static const uint32_t all[GSEQ] = { 0, 1, 2 }, two[2] = { 0, 2 }, prompt[GSEQ] = { 5, 9, 3 };
	static const uint32_t ones[GSEQ] = { 1, 1, 1 };
	uint64_t tokens_equal = 0, compared = 0;
	spyre_device_t *devs[2] = { dev, NULL };
	double worst = 0;
	char err[512] = "";

	if (spyre_device_count() < 2 || spyre_device_open(1, &devs[1])) {
		tap_skip("tensor parallel needs two cards");
		goto out;
	}
	TAP_EQ(-EINVAL, spyre_runner_card_new_tp(devs, 3, &cfg, &w, &o, &r[1], err, sizeof(err)));
	TAP_CHECK(strstr(err, "3 does not divide num_attention_heads (4)") != NULL, "%s", err);
	TAP_EQ(-EINVAL, spyre_runner_card_new_tp((spyre_device_t *[]){ dev, dev }, 2, &cfg, &w, &o, &r[1], err,
						 sizeof(err)));
	TAP_CHECK(strstr(err, "same device handle") != NULL, "%s", err);
	if (!TAP_CHECK(!spyre_runner_card_new(dev, &cfg, &w, &o, &r[0], err, sizeof(err)), "one card: %s", err) ||
	    !TAP_CHECK(!spyre_runner_card_new_tp(devs, 2, &cfg, &w, &o, &r[1], err, sizeof(err)), "two cards: %s",
		       err))
		goto out;
	memset(q, 0, sizeof(q));
	for (uint32_t stepno = 0; stepno < 12; stepno++) {
		const uint32_t *which = stepno >= 7 && stepno < 10 ? two : all;
		uint32_t ns = stepno >= 7 && stepno < 10 ? 2 : GSEQ;
		int32_t am[2][GSEQ];
		struct spyre_runner_stats st[2];

		for (int g = 0; g < 2; g++) {
			int ret = gstep(r[g], q[g], which, ns, stepno ? ones : prompt, lg[g], am[g], &st[g], err,
					sizeof(err));

			if (!TAP_CHECK(!ret, "step %u runner %d: %s", stepno, g, err))
				goto out;
			for (uint32_t i = 0; i < ns; i++) {
				q[g][which[i]].ctx += stepno ? 1 : prompt[i];
				q[g][which[i]].last = am[g][i];
			}
		}
		TAP_EQ(0ull, (unsigned long long)st[1].replays);
		compared++;
		tokens_equal += !memcmp(am[0], am[1], ns * sizeof(int32_t));
		for (uint32_t i = 0; i < ns; i++) {
			const float *a = lg[0] + (size_t)i * cfg.vocab, *b = lg[1] + (size_t)i * cfg.vocab;
			double mx = 0, d = 0;

			for (uint32_t v = 0; v < cfg.vocab; v++) {
				mx = fabs(a[v]) > mx ? fabs(a[v]) : mx;
				d = fabs((double)a[v] - b[v]) > d || b[v] != b[v] ? fabs((double)a[v] - b[v]) : d;
			}
			worst = mx > 0 && d / mx > worst ? d / mx : worst;
		}
	}
	TAP_CHECK(tokens_equal == compared, "greedy tokens equal in %llu of %llu steps",
		  (unsigned long long)tokens_equal, (unsigned long long)compared);
	TAP_CHECK(worst <= 1e-4, "logits of two cards off by %.2e of the largest (tolerance 1e-4)", worst);
	tap_diag("tensor parallel over 2 cards: %llu steps, tokens as one card's, logits within %.2e",
		 (unsigned long long)compared, worst);
out:
	spyre_runner_free(r[0]);
	spyre_runner_free(r[1]);
	if (devs[1])
		spyre_device_close(devs[1]);
	free(lg[0]);
	free(lg[1]);
}

static const struct tap_case cases[] = {
	{ "fp32", test_fp32 },
	{ "warmup", test_warmup },
	{ "graphs", test_graphs },
	{ "fp16", test_fp16 },
	{ "bad_options", test_bad_options },
	{ "tp", test_tp },
};

int main(int argc, char **argv)
{
	int ret;

	if (spyre_model_config_preset("tiny", &cfg) || spyre_model_weights_random(&cfg, 1234, &w)) {
		printf("Bail out! the tiny model\n");
		return 1;
	}
	if (spyre_device_count() < 1) {
		printf("1..0 # SKIP no spyre device\n");
		return 0;
	}
	if (spyre_device_open(0, &dev)) {
		printf("Bail out! device 0: %s\n", spyre_last_error());
		return 1;
	}
	ret = tap_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
	spyre_device_close(dev);
	spyre_model_weights_free(&w);
	return ret;
}
