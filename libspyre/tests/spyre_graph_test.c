// SPDX-License-Identifier: MIT
/*
 * Description: libspyre's launch graphs on real cards (run in the VM; also
 * built with AddressSanitizer and ThreadSanitizer): a stream's kernel
 * launches (an embedding, then 29 adds and ReLUs of the kernel library),
 * copies and an event record captured into a graph, replayed again and
 * again with every result checked against a CPU reference; a replay of the
 * 30 launches is one SUBMIT (the stream's job count); new token scalars and
 * new bindings between replays, while a replay enqueued before the update
 * still computes with the old ones; replays on two streams in turn; a graph
 * of 600 launches split into jobs, each replay one SUBMIT per job and
 * counted in the stream's statistics (600 launches, their device time, no
 * failure: records of the stream's ring of 512, wrapped); capture
 * misuse (waits, pageable copies, patch-path programs, a second capture,
 * destroy) refused with -EBUSY / -ENOTSUP and a detail, bad node indices
 * and bindings refused with -EINVAL naming them; an exec replayed after the
 * stream of its previous replay was destroyed; a faulting node named in the
 * stream's error; threads capturing and replaying on their own streams;
 * replays counted in the stream's statistics (launches, device time, the
 * last launch, failed launches); pageable copies racing a capture on
 * another thread never captured; spyre_graph_instantiate() failing at each
 * of its allocations without a leak (a calloc() of the test's own, so not
 * in the sanitizer builds); an update whose replay a device reset canceled
 * sent again by the next replay, on a new stream; a host callback updating
 * the exec while a replay on its stream waits for it; one exec replayed by
 * several threads on their own streams while another updates it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "spyre.h"
#include "spyre_inject.h"
#include "spyre_kernels.h"
#include "spyre_progbuild.h"

#define M	4		/* tokens (rows) */
#define H	32		/* hidden: one fp32 stick per row */
#define V	64		/* vocabulary */
#define ROW	(H * 4)		/* bytes of a row */
#define BUF	(M * ROW)	/* bytes of an [M x H] matrix */
#define CHAIN	30		/* launches of the graph: an embedding, then add/relu in turn */

/* The kernels of the chain and the memory they work on. */
struct chain {
	spyre_device_t *dev;
	spyre_kcache_t *cache;
	spyre_kernel_t *emb, *add, *relu;
	struct spyre_kdesc emb_desc;
	spyre_dptr_t table, bias[2], x[2], out;
	float h_table[V * H], h_bias[2][M * H];
	float *pinned;			/* [M x H], spyre_malloc_host() */
};

static int chain_kernel(struct chain *c, uint32_t op, spyre_kernel_t **k, struct spyre_kdesc *keep)
{
	struct spyre_kdesc d = { .size = sizeof(d), .op = op, .dtype = SPYRE_DT_FP32, .cores = 2,
				 .m = M, .n = op == SPYRE_KOP_EMBEDDING ? V : H,
				 .k = op == SPYRE_KOP_EMBEDDING ? H : 0 };

	if (keep)
		*keep = d;
	return spyre_kernel_get(c->cache, &d, k);
}

/* Small integers: every sum is exact in fp32, on the card and here. */
static int chain_init(struct chain *c, spyre_device_t *dev, unsigned int seed)
{
	int i, b, ret;

	memset(c, 0, sizeof(*c));
	c->dev = dev;
	ret = spyre_kcache_create(dev, 16, &c->cache);
	ret = ret ?: chain_kernel(c, SPYRE_KOP_EMBEDDING, &c->emb, &c->emb_desc);
	ret = ret ?: chain_kernel(c, SPYRE_KOP_ADD, &c->add, NULL);
	ret = ret ?: chain_kernel(c, SPYRE_KOP_RELU, &c->relu, NULL);
	ret = ret ?: spyre_malloc(dev, V * ROW, &c->table);
	for (b = 0; b < 2 && !ret; b++) {
		ret = spyre_malloc(dev, BUF, &c->bias[b]);
		ret = ret ?: spyre_malloc(dev, BUF, &c->x[b]);
	}
	ret = ret ?: spyre_malloc(dev, BUF, &c->out);
	ret = ret ?: spyre_malloc_host(dev, BUF, (void **)&c->pinned);
	if (ret)
		return ret;
	for (i = 0; i < V * H; i++)
		c->h_table[i] = (float)((int)((i * 7 + seed * 13) % 41) - 20);
	for (b = 0; b < 2; b++)
		for (i = 0; i < M * H; i++)
			c->h_bias[b][i] = (float)((int)((i * 5 + b * 11 + seed) % 9) - 4 + b);
	ret = spyre_memcpy(dev, c->table, (uintptr_t)c->h_table, sizeof(c->h_table), SPYRE_MEMCPY_H2D);
	for (b = 0; b < 2 && !ret; b++)
		ret = spyre_memcpy(dev, c->bias[b], (uintptr_t)c->h_bias[b], BUF, SPYRE_MEMCPY_H2D);
	return ret;
}

static void chain_fini(struct chain *c)
{
	int b;

	if (c->pinned)
		spyre_free_host(c->dev, c->pinned);
	for (b = 0; b < 2; b++) {
		spyre_free(c->dev, c->bias[b]);
		spyre_free(c->dev, c->x[b]);
	}
	spyre_free(c->dev, c->table);
	spyre_free(c->dev, c->out);
	spyre_kernel_put(c->emb);
	spyre_kernel_put(c->add);
	spyre_kernel_put(c->relu);
	spyre_kcache_destroy(c->cache);
}

/* Launch i of the chain: 0 the embedding into x[0], then x[i % 2] = add(x[!], bias) or relu(x[!]). */
static int chain_launch(struct chain *c, spyre_stream_t *s, int i, const int32_t *tokens, int bias)
{
	uint64_t sc[M];
	int ret;

	if (i == 0) {
		ret = spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc);
		return ret ?: spyre_kernel_launch(s, c->emb, (spyre_dptr_t[]){ c->table, c->x[0] }, 2, sc, M);
	}
	if (i % 2)
		return spyre_kernel_launch(s, c->add, (spyre_dptr_t[]){ c->x[(i - 1) % 2], c->bias[bias],
					   c->x[i % 2] }, 3, NULL, 0);
	return spyre_kernel_launch(s, c->relu, (spyre_dptr_t[]){ c->x[(i - 1) % 2], c->x[i % 2] }, 2, NULL, 0);
}

/* The chain's result on the CPU; @bias_of[i] is the bias of launch i (an add). */
static void chain_ref(const struct chain *c, int n, const int32_t *tokens, const int *bias_of, float *y)
{
	int i, r, k;

	for (r = 0; r < M; r++)
		memcpy(y + r * H, c->h_table + tokens[r] * H, ROW);
	for (i = 1; i < n; i++)
		for (k = 0; k < M * H; k++)
			y[k] = i % 2 ? y[k] + c->h_bias[bias_of[i]][k] : (y[k] > 0 ? y[k] : 0);
}

/* Capture the chain of @n launches, then a D2D copy to out and a D2H copy to pinned. */
static int chain_capture(struct chain *c, spyre_stream_t *s, int n, const int32_t *tokens,
			 spyre_graph_t **g)
{
	int i, ret;

	ret = spyre_stream_begin_capture(s);
	for (i = 0; i < n && !ret; i++)
		ret = chain_launch(c, s, i, tokens, 0);
	ret = ret ?: spyre_memcpy_async(s, c->out, c->x[(n - 1) % 2], BUF, SPYRE_MEMCPY_D2D);
	ret = ret ?: spyre_memcpy_async(s, (uintptr_t)c->pinned, c->out, BUF, SPYRE_MEMCPY_D2H);
	if (ret) {
		spyre_graph_t *drop;

		if (!spyre_stream_end_capture(s, &drop))
			spyre_graph_destroy(drop);
		return ret;
	}
	return spyre_stream_end_capture(s, g);
}

/*
 * Allocation failures for spyre_graph_instantiate() (only without a
 * sanitizer, which has its own calloc): while @fail_armed on this thread,
 * the @fail_at-th call of calloc() returns NULL, and the blocks the others
 * return are tracked until freed (with their callers).
 */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define CALLOC_FAILS 1
#define TRACKED 64
extern void *__libc_calloc(size_t n, size_t size);
extern void __libc_free(void *p);
static __thread bool fail_armed;
static __thread int fail_at, fail_calls;
static __thread void *fail_where;	/* the caller of the calloc() that failed */
static __thread struct {
	void *p, *caller;
} tracked[TRACKED];

void *calloc(size_t n, size_t size)
{
	void *p;
	int i;

	if (!fail_armed)
		return __libc_calloc(n, size);
	if (++fail_calls == fail_at) {
		fail_where = __builtin_return_address(0);
		return NULL;
	}
	p = __libc_calloc(n, size);
	for (i = 0; p && i < TRACKED; i++)
		if (!tracked[i].p) {
			tracked[i].p = p;
			tracked[i].caller = __builtin_return_address(0);
			break;
		}
	return p;
}

void free(void *p)
{
	int i;

	for (i = 0; p && i < TRACKED; i++)
		if (tracked[i].p == p)
			tracked[i].p = NULL;
	__libc_free(p);
}

/* The blocks calloc() returned while armed, not freed since: their number; forgets them. */
static int tracked_live(char *why, size_t size)
{
	int i, n = 0, len = 0;

	for (i = 0; i < TRACKED; i++)
		if (tracked[i].p) {
			if (len >= 0 && (size_t)len < size)
				len += snprintf(why + len, size - (size_t)len, " %p", tracked[i].caller);
			tracked[i].p = NULL;
			n++;
		}
	return n;
}
#endif

static uint64_t stream_jobs(spyre_stream_t *s)
{
	struct spyre_stream_stats st = { .size = sizeof(st) };

	if (spyre_stream_get_stats(s, &st))
		return UINT64_MAX;
	return st.jobs;
}

FIXTURE(graph) {
	spyre_device_t *dev;
	spyre_stream_t *s;
	struct chain c;
};

FIXTURE_SETUP(graph)
{
	if (spyre_device_count() < 1)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, spyre_device_open(0, &self->dev)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &self->s));
	ASSERT_EQ(0, chain_init(&self->c, self->dev, 1)) TH_LOG("%s", spyre_last_error());
}

FIXTURE_TEARDOWN(graph)
{
	if (!self->dev)
		return;
	chain_fini(&self->c);
	spyre_device_close(self->dev);
}

TEST_F(graph, capture_replay_update_and_one_submit)
{
	struct spyre_graph_node_info ni = { .size = sizeof(ni) };
	struct spyre_graph_exec_info xi = { .size = sizeof(xi) };
	int32_t tokens[M] = { 3, 0, 63, 17 };
	int bias_of[CHAIN] = { 0 }, i, r, k;
	float ref[M * H], old_ref[M * H], *old;
	struct chain *c = &self->c;
	spyre_stream_t *s2;
	spyre_graph_exec_t *x;
	spyre_graph_t *g;
	spyre_event_t *ev;
	uint64_t jobs, sc[M];

	ASSERT_EQ(0, spyre_event_create(self->dev, &ev));
	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(1, spyre_stream_is_capturing(self->s));
	for (i = 0; i < CHAIN; i++)
		ASSERT_EQ(0, chain_launch(c, self->s, i, tokens, 0)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_memcpy_async(self->s, c->out, c->x[(CHAIN - 1) % 2], BUF, SPYRE_MEMCPY_D2D));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)c->pinned, c->out, BUF, SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_event_record(ev, self->s));
	ASSERT_EQ(0, spyre_stream_end_capture(self->s, &g));
	ASSERT_EQ(0, spyre_stream_is_capturing(self->s));
	/* Nothing ran while capturing. */
	ASSERT_EQ(0, stream_jobs(self->s));
	ASSERT_EQ(-EINVAL, spyre_event_query(ev));

	ASSERT_EQ(CHAIN + 3, spyre_graph_node_count(g));
	ASSERT_EQ(0, spyre_graph_get_node(g, 0, &ni));
	ASSERT_EQ(SPYRE_GRAPH_NODE_LAUNCH, ni.kind);
	ASSERT_EQ(2, ni.num_slots);
	ASSERT_EQ(M, ni.num_scalars);
	ASSERT_EQ(0, spyre_graph_get_node(g, CHAIN, &ni));
	ASSERT_EQ(SPYRE_GRAPH_NODE_COPY, ni.kind);
	ASSERT_EQ(BUF, ni.bytes);
	ASSERT_EQ(0, spyre_graph_get_node(g, CHAIN + 2, &ni));
	ASSERT_EQ(SPYRE_GRAPH_NODE_EVENT_RECORD, ni.kind);
	ASSERT_EQ(-EINVAL, spyre_graph_get_node(g, CHAIN + 3, &ni));

	ASSERT_EQ(0, spyre_graph_instantiate(g, &x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_destroy(g));		/* the exec stands on its own */
	ASSERT_EQ(0, spyre_graph_exec_get_info(x, &xi));
	ASSERT_EQ(CHAIN + 3, xi.num_nodes);
	ASSERT_EQ(1, xi.num_jobs);
	ASSERT_LE(CHAIN * 2 * 8, xi.arg_bytes);

	/* Replays, each one SUBMIT, each checked. */
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	for (r = 0; r < 5; r++) {
		memset(c->pinned, 0xff, BUF);
		jobs = stream_jobs(self->s);
		ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(jobs + 1, stream_jobs(self->s));
		for (k = 0; k < M * H; k++)
			ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("replay %d element %d", r, k);
		ASSERT_EQ(0, spyre_event_query(ev));	/* recorded by the replay */
	}

	/* New tokens and new biases: no rebuild, still one SUBMIT. */
	memcpy(old_ref, ref, sizeof(ref));
	old = calloc(1, BUF);
	ASSERT_NE(NULL, old);
	ASSERT_EQ(0, spyre_graph_launch(x, self->s));
	/* Stream order: this copy reads the replay enqueued before the update. */
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)c->pinned, c->out, BUF, SPYRE_MEMCPY_D2H));
	tokens[0] = 42;
	tokens[3] = 1;
	ASSERT_EQ(0, spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc));
	ASSERT_EQ(0, spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, sc, M)) TH_LOG("%s", spyre_last_error());
	for (i = 1; i < CHAIN; i += 4) {
		bias_of[i] = 1;
		ASSERT_EQ(0, spyre_graph_exec_set_kernel_args(x, (uint32_t)i, (spyre_dptr_t[]){
			c->x[(i - 1) % 2], c->bias[1], c->x[i % 2] }, 3, NULL, 0)) TH_LOG("%s", spyre_last_error());
	}
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	memcpy(old, c->pinned, BUF);
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(old_ref[k], old[k]) TH_LOG("the replay before the update, element %d", k);
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	ASSERT_NE(0, memcmp(ref, old_ref, sizeof(ref)));
	jobs = stream_jobs(self->s);
	ASSERT_EQ(0, spyre_graph_launch(x, self->s));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(jobs + 1, stream_jobs(self->s));	/* the update rides in the replay's job */
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("after the update, element %d", k);

	/* Replays on two streams in turn, updated in between: ordered, the last one wins. */
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2));
	for (r = 0; r < 6; r++) {
		tokens[1] = r * 9;
		ASSERT_EQ(0, spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc));
		ASSERT_EQ(0, spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, sc, M));
		ASSERT_EQ(0, spyre_graph_launch(x, r % 2 ? s2 : self->s)) TH_LOG("%s", spyre_last_error());
	}
	ASSERT_EQ(0, spyre_stream_synchronize(s2));	/* the last replay was on s2 */
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("two streams, element %d", k);

	/* The stream of the last replay destroyed: the next, on another, still works. */
	ASSERT_EQ(0, spyre_stream_destroy(s2));
	memset(c->pinned, 0, BUF);
	ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("after the destroy, element %d", k);

	free(old);
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_event_destroy(ev));
}

#define LONG_CHAIN 600

TEST_F(graph, long_graph_split_into_jobs)
{
	struct spyre_graph_exec_info xi = { .size = sizeof(xi) };
	int32_t tokens[M] = { 5, 6, 7, 8 };
	static int bias_of[LONG_CHAIN];
	struct chain *c = &self->c;
	struct spyre_stream_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	spyre_event_t *mid, *end;
	spyre_graph_exec_t *x;
	spyre_graph_t *g;
	float ref[M * H], ms;
	uint64_t jobs;
	int i, r, k;

	ASSERT_EQ(0, spyre_event_create(self->dev, &mid));
	ASSERT_EQ(0, spyre_event_create(self->dev, &end));
	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	for (i = 0; i < LONG_CHAIN; i++) {
		ASSERT_EQ(0, chain_launch(c, self->s, i, tokens, 0)) TH_LOG("%s", spyre_last_error());
		if (i == LONG_CHAIN / 4)
			ASSERT_EQ(0, spyre_event_record(mid, self->s));
	}
	ASSERT_EQ(0, spyre_memset_async(self->s, c->out, 0, BUF));
	ASSERT_EQ(0, spyre_memcpy_async(self->s, (uintptr_t)c->pinned, c->x[(LONG_CHAIN - 1) % 2], BUF,
					SPYRE_MEMCPY_D2H));
	ASSERT_EQ(0, spyre_event_record(end, self->s));
	ASSERT_EQ(0, spyre_stream_end_capture(self->s, &g));
	ASSERT_EQ(0, spyre_graph_instantiate(g, &x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_exec_get_info(x, &xi));
	ASSERT_EQ(3, xi.num_jobs);	/* 600 launches and a few packets, 253 a job */
	ASSERT_EQ(LONG_CHAIN + 4, xi.num_nodes);	/* two event records, a memset, a copy */
	ASSERT_EQ(0, spyre_graph_destroy(g));
	chain_ref(c, LONG_CHAIN, tokens, bias_of, ref);
	for (r = 0; r < 3; r++) {
		memset(c->pinned, 0xff, BUF);
		jobs = stream_jobs(self->s);
		ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st0));
		ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
		ASSERT_EQ(jobs + 3, stream_jobs(self->s));
		/* the replay's launches count as launches do: each, with its device time */
		ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st1));
		ASSERT_EQ(st0.launches + LONG_CHAIN, st1.launches);
		ASSERT_EQ(st0.failed_launches, st1.failed_launches);
		ASSERT_LT(st0.device_ns + LONG_CHAIN, st1.device_ns);
		ASSERT_LT(st0.core_busy_cycles, st1.core_busy_cycles);
		for (k = 0; k < M * H; k++)
			ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("replay %d element %d", r, k);
		ASSERT_EQ(0, spyre_event_elapsed_ms(mid, end, &ms)) TH_LOG("%s", spyre_last_error());
		ASSERT_LT(0, ms);
	}
	/* Every launch of every replay counted, across the stream's ring of launch records. */
	{
		struct spyre_stream_stats st = { .size = sizeof(st) };

		ASSERT_EQ(0, spyre_stream_get_stats(self->s, &st));
		EXPECT_EQ(3 * LONG_CHAIN, st.launches);
		EXPECT_EQ(9, st.jobs);
	}
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_event_destroy(mid));
	ASSERT_EQ(0, spyre_event_destroy(end));
}

static void *patch_image(size_t *size)
{
	return spyre_pb_relu_image(SPYRE_PB_ADDR_RELOC, 32, 4096, size);
}

TEST_F(graph, capture_misuse_and_bad_nodes)
{
	int32_t tokens[M] = { 1, 2, 3, 4 };
	struct chain *c = &self->c;
	spyre_program_t *pp;
	spyre_graph_exec_t *x;
	spyre_graph_t *g, *g2;
	spyre_event_t *ev;
	spyre_dptr_t small, io[2];
	float host[M * H];
	size_t size;
	void *img;

	img = patch_image(&size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &pp));
	free(img);
	ASSERT_EQ(0, spyre_event_create(self->dev, &ev));
	ASSERT_EQ(0, spyre_malloc(self->dev, 128, &small));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &io[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &io[1]));

	ASSERT_EQ(0, spyre_event_record(ev, self->s));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(-EINVAL, spyre_stream_end_capture(self->s, &g));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "not capturing"));
	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(-EBUSY, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(-EBUSY, spyre_stream_synchronize(self->s));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "capturing a graph")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EBUSY, spyre_stream_query(self->s));
	ASSERT_EQ(-EBUSY, spyre_stream_wait_event(self->s, ev));
	ASSERT_EQ(-EBUSY, spyre_stream_destroy(self->s));
	ASSERT_EQ(-EBUSY, spyre_stream_get_stats(self->s, &(struct spyre_stream_stats){ .size = 64 }));
	/* Pageable host memory needs staging and a wait: refused. */
	ASSERT_EQ(-EBUSY, spyre_memcpy_async(self->s, c->out, (uintptr_t)host, BUF, SPYRE_MEMCPY_H2D));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "spyre_malloc_host")) TH_LOG("%s", spyre_last_error());
	/* The patch path's shared image cannot be replayed. */
	ASSERT_EQ(-ENOTSUP, spyre_launch(self->s, pp, 1, io, 2, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "patch-free")) TH_LOG("%s", spyre_last_error());
	/* Arguments are checked as always, and a refused call adds no node. */
	ASSERT_EQ(-EINVAL, spyre_kernel_launch(self->s, c->relu, (spyre_dptr_t[]){ c->x[0], small }, 2, NULL, 0));
	ASSERT_EQ(0, chain_launch(c, self->s, 0, tokens, 0));
	ASSERT_EQ(0, chain_launch(c, self->s, 1, tokens, 0));
	ASSERT_EQ(0, spyre_event_record(ev, self->s));
	ASSERT_EQ(0, spyre_stream_end_capture(self->s, &g));
	ASSERT_EQ(3, spyre_graph_node_count(g));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));	/* capturing no more */

	ASSERT_EQ(0, spyre_graph_instantiate(g, &x));
	/* A replay into a capturing stream is refused. */
	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(-EBUSY, spyre_graph_launch(x, self->s));
	ASSERT_EQ(0, spyre_stream_end_capture(self->s, &g2));
	ASSERT_EQ(0, spyre_graph_node_count(g2));
	ASSERT_EQ(0, spyre_graph_destroy(g2));

	ASSERT_EQ(-EINVAL, spyre_graph_exec_set_kernel_args(x, 3, NULL, 0, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "no node 3")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EINVAL, spyre_graph_exec_set_kernel_args(x, 2, NULL, 0, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "graph node 2 is an event record, not a launch"))
		TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EINVAL, spyre_graph_exec_set_kernel_args(x, 1, (spyre_dptr_t[]){ c->x[0] }, 1, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "takes 3 slots")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EINVAL, spyre_graph_exec_set_kernel_args(x, 1, (spyre_dptr_t[]){ c->x[0], small, c->x[1] },
							    3, NULL, 0));
	ASSERT_NE(NULL, strstr(spyre_last_error(), "graph node 1: slot 1")) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(-EINVAL, spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, (uint64_t[]){ 1 }, 1));
	ASSERT_EQ(-EINVAL, spyre_graph_launch(NULL, self->s));
	ASSERT_EQ(-EINVAL, spyre_graph_launch(x, NULL));
	ASSERT_EQ(-EINVAL, spyre_graph_instantiate(NULL, &x));
	ASSERT_EQ(-EINVAL, spyre_stream_begin_capture(NULL));
	ASSERT_EQ(0, spyre_graph_launch(x, self->s));
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_graph_destroy(g));
	ASSERT_EQ(0, spyre_graph_exec_destroy(NULL));
	ASSERT_EQ(0, spyre_graph_destroy(NULL));

	/* A stream destroyed while capturing is refused; at close, the device drops the capture. */
	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(0, chain_launch(c, self->s, 0, tokens, 0));

	ASSERT_EQ(0, spyre_free(self->dev, small));
	ASSERT_EQ(0, spyre_free(self->dev, io[0]));
	ASSERT_EQ(0, spyre_free(self->dev, io[1]));
	ASSERT_EQ(0, spyre_event_destroy(ev));
	ASSERT_EQ(0, spyre_program_unload(pp));
}

TEST_F(graph, faulting_node_is_named)
{
	spyre_program_t *good, *bad;
	struct chain *c = &self->c;
	spyre_dptr_t io[2];
	spyre_graph_exec_t *x;
	spyre_graph_t *g;
	size_t size;
	void *img;
	int i;

	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 32, 4096, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &good));
	free(img);
	/* "x" claims 64 bytes, the load reads 4096: the engine faults. */
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 32, 64, &size);
	ASSERT_NE(NULL, img);
	ASSERT_EQ(0, spyre_program_load(self->dev, img, size, &bad));
	free(img);
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &io[0]));
	ASSERT_EQ(0, spyre_malloc(self->dev, 4096, &io[1]));

	ASSERT_EQ(0, spyre_stream_begin_capture(self->s));
	ASSERT_EQ(0, spyre_memset_async(self->s, io[0], 0, 4096));
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, spyre_launch(self->s, i == 3 ? bad : good, 1, io, 2, NULL, 0))
			TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_end_capture(self->s, &g));
	ASSERT_EQ(0, spyre_graph_instantiate(g, &x));
	ASSERT_EQ(0, spyre_graph_launch(x, self->s));
	ASSERT_EQ(-EIO, spyre_stream_synchronize(self->s));
	/* Node 0 is the memset, launch 3 is node 4. */
	ASSERT_NE(NULL, strstr(spyre_last_error(), "graph node 4 (launch): program fault"))
		TH_LOG("%s", spyre_last_error());
	/* Launches 1-3 ran (3 with its fault), 5 never did. */
	{
		struct spyre_stream_stats st = { .size = sizeof(st) };

		ASSERT_EQ(-EIO, spyre_stream_get_stats(self->s, &st));
		EXPECT_EQ(4, st.launches);
		EXPECT_EQ(1, st.failed_launches);
	}
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_graph_destroy(g));
	ASSERT_EQ(0, spyre_program_unload(good));
	ASSERT_EQ(0, spyre_program_unload(bad));
	(void)c;
}

/* A replay's launches count in the stream's statistics as the same launches made one by one. */
TEST_F(graph, replays_count_in_stream_stats)
{
	struct spyre_stream_stats a = { .size = sizeof(a) }, b = { .size = sizeof(b) };
	struct spyre_launch_stats ls = { .size = sizeof(ls) };
	int32_t tokens[M] = { 9, 8, 7, 6 };
	struct chain *c = &self->c;
	spyre_graph_exec_t *x;
	spyre_graph_t *g;
	uint64_t direct_ns;
	int i, r;

	/* The chain launched one by one: what a replay must add up to. */
	ASSERT_EQ(0, spyre_stream_reset_stats(self->s));
	for (i = 0; i < CHAIN; i++)
		ASSERT_EQ(0, chain_launch(c, self->s, i, tokens, 0)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &a));
	ASSERT_EQ(CHAIN, a.launches);
	direct_ns = a.device_ns;
	ASSERT_LT(0, direct_ns);

	ASSERT_EQ(0, chain_capture(c, self->s, CHAIN, tokens, &g)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_instantiate(g, &x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_destroy(g));
	ASSERT_EQ(0, spyre_stream_reset_stats(self->s));
	for (r = 0; r < 12; r++)
		ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_get_stats(self->s, &b)) TH_LOG("%s", spyre_last_error());
	EXPECT_EQ(12, b.jobs);
	EXPECT_EQ(12 * CHAIN, b.launches);
	EXPECT_EQ(0, b.failed_launches);
	EXPECT_LT(0, b.device_ns);
	EXPECT_LT(0, b.insns);
	EXPECT_LT(0, b.core_cycles);
	/* The same launches, the same modeled time (give each launch 1 ns). */
	EXPECT_GE(12 * direct_ns + 12 * CHAIN, b.device_ns) TH_LOG("direct %llu, replays %llu",
		(unsigned long long)direct_ns, (unsigned long long)b.device_ns);
	EXPECT_LE(12 * direct_ns, b.device_ns + 12 * CHAIN);
	EXPECT_EQ(12 * 2 * BUF, b.d2d_bytes + b.d2h_bytes);
	/* The stream's last launch is the replay's last. */
	ASSERT_EQ(0, spyre_stream_last_launch(self->s, &ls)) TH_LOG("%s", spyre_last_error());
	EXPECT_LT(0, ls.device_ns);
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
}

/*
 * A copy of pageable host memory goes through the device's shared staging
 * buffer, and waits: another thread beginning a capture meanwhile must not
 * get a node of it (a replay would copy whatever the staging buffer then
 * holds, or into it, under another thread's synchronous copy).
 */
struct copier {
	spyre_stream_t *s;
	spyre_dptr_t dst;
	void *host;
	size_t size;
	int stop, copies, refused, bad;	/* stop, copies and bad: atomic */
	char why[256];
};

static void *copier_run(void *arg)
{
	struct copier *k = arg;
	int ret;

	while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		ret = spyre_memcpy_async(k->s, k->dst, (uintptr_t)k->host, k->size, SPYRE_MEMCPY_H2D);
		if (!ret)
			__atomic_add_fetch(&k->copies, 1, __ATOMIC_RELAXED);
		else if (ret == -EBUSY)
			k->refused++;
		else {
			snprintf(k->why, sizeof(k->why), "%d: %s", ret, spyre_last_error());
			__atomic_store_n(&k->bad, 1, __ATOMIC_RELEASE);
			break;
		}
	}
	return NULL;
}

TEST_F(graph, pageable_copy_racing_a_capture_adds_no_node)
{
	struct copier k = { .s = self->s, .size = 1 << 20 };
	int i, nodes = 0, graphs = 0;
	spyre_graph_t *g;
	pthread_t t;

	k.host = calloc(1, k.size);
	ASSERT_NE(NULL, k.host);
	ASSERT_EQ(0, spyre_malloc(self->dev, k.size, &k.dst));
	ASSERT_EQ(0, pthread_create(&t, NULL, copier_run, &k));
	for (i = 0; i < 400 && !__atomic_load_n(&k.bad, __ATOMIC_ACQUIRE) &&
	     (i < 40 || __atomic_load_n(&k.copies, __ATOMIC_RELAXED) < 20); i++) {
		if (spyre_stream_begin_capture(self->s))
			break;
		usleep(200);
		if (spyre_stream_end_capture(self->s, &g))
			break;
		graphs++;
		nodes += spyre_graph_node_count(g);
		spyre_graph_destroy(g);
		usleep(500);
	}
	__atomic_store_n(&k.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	EXPECT_EQ(0, k.bad) TH_LOG("%s", k.why);
	EXPECT_EQ(i, graphs) TH_LOG("%s", spyre_last_error());
	TH_LOG("%d captures, %d copies done, %d refused", graphs, k.copies, k.refused);
	EXPECT_EQ(0, nodes) TH_LOG("staged copies captured into %d graphs", graphs);
	spyre_stream_synchronize(self->s);
	spyre_free(self->dev, k.dst);
	free(k.host);
}

/* Out of memory at each allocation of spyre_graph_instantiate(): -ENOMEM, and nothing leaks. */
TEST_F(graph, instantiate_out_of_memory_leaks_nothing)
{
#ifdef CALLOC_FAILS
	int32_t tokens[M] = { 1, 2, 3, 4 };
	struct chain *c = &self->c;
	spyre_graph_exec_t *x = NULL;
	spyre_graph_t *g;
	int at, ret = -ENOMEM;
	char why[512];

	ASSERT_EQ(0, chain_capture(c, self->s, 6, tokens, &g)) TH_LOG("%s", spyre_last_error());
	for (at = 1; at < 40 && ret; at++) {
		Dl_info di = { 0 };

		fail_calls = 0;
		fail_at = at;
		fail_armed = true;
		ret = spyre_graph_instantiate(g, &x);
		fail_armed = false;
		if (!ret)
			break;
		ASSERT_EQ(-ENOMEM, ret) TH_LOG("allocation %d: %s", at, spyre_last_error());
		why[0] = 0;
		dladdr(fail_where, &di);
		EXPECT_EQ(0, tracked_live(why, sizeof(why))) TH_LOG("allocation %d failing (called at %p, "
			"in %s, loaded at %p): blocks of callers%s not freed", at, fail_where,
			di.dli_fname ?: "?", di.dli_fbase, why);
	}
	tracked_live(why, sizeof(why));
	ASSERT_EQ(0, ret) TH_LOG("%s", spyre_last_error());
	ASSERT_LT(2, at);
	ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(self->s));
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_graph_destroy(g));
#else
	SKIP(return, "calloc() is the sanitizer's");
#endif
}

/*
 * A device reset cancels the replay that carried an update of the exec's
 * arguments to the card: the next replay, on a new stream, must carry it
 * again, not compute with the arguments the card had before. The replay
 * hangs (debugfs "inject"), the card is reset (sysfs "reset").
 */
TEST_F(graph, update_canceled_by_a_reset_is_sent_again)
{
	int32_t tokens[M] = { 11, 12, 13, 14 };
	int bias_of[CHAIN] = { 0 }, k;
	char inject[256], reset[256];
	struct chain *c = &self->c;
	spyre_graph_exec_t *x;
	spyre_stream_t *s2;
	float ref[M * H];
	spyre_graph_t *g;
	uint64_t sc[M];

	if (inject_paths(self->dev, inject, reset))
		SKIP(return, "no fault injection or reset attribute (debugfs, root)");
	ASSERT_EQ(0, chain_capture(c, self->s, CHAIN, tokens, &g)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_instantiate(g, &x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_destroy(g));
	ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());

	/* New tokens; the replay that carries them hangs and is canceled by the reset. */
	tokens[0] = 40;
	tokens[2] = 0;
	ASSERT_EQ(0, spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc));
	ASSERT_EQ(0, spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, sc, M)) TH_LOG("%s", spyre_last_error());
	ASSERT_LT(0, inject_hang_all(inject));
	ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	usleep(50000);
	ASSERT_EQ(0, write_file(reset, "1"));
	EXPECT_EQ(-EIO, spyre_stream_synchronize(self->s));
	write_file(inject, "0 0");
	TH_LOG("the replay: %s", spyre_last_error());

	/* On a new stream: the new tokens. */
	ASSERT_EQ(0, spyre_stream_create(self->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s2));
	memset(c->pinned, 0xff, BUF);
	ASSERT_EQ(0, spyre_graph_launch(x, s2)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(s2)) TH_LOG("%s", spyre_last_error());
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("after the reset, element %d", k);
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
	ASSERT_EQ(0, spyre_stream_destroy(s2));
}

/*
 * A host callback that updates an exec (the next step's token, say), pending
 * when the exec is replayed on the callback's stream: the replay waits for
 * the callback, which must get the exec (not wait for the replay, forever).
 */
struct update_cb {
	spyre_graph_exec_t *x;
	uint64_t sc[M];
	int ret;
};

static void update_in_callback(void *arg)
{
	struct update_cb *u = arg;

	usleep(200000);		/* the replay is waiting for this callback by now */
	u->ret = spyre_graph_exec_set_kernel_args(u->x, 0, NULL, 0, u->sc, M);
}

TEST_F_TIMEOUT(graph, callback_updating_the_exec_of_a_replay, 20)
{
	int32_t tokens[M] = { 21, 22, 23, 24 };
	int bias_of[CHAIN] = { 0 }, k;
	struct update_cb u = { .ret = -1 };
	struct chain *c = &self->c;
	float ref[M * H];
	spyre_graph_t *g;

	ASSERT_EQ(0, chain_capture(c, self->s, CHAIN, tokens, &g)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_instantiate(g, &u.x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_destroy(g));
	tokens[1] = 50;
	ASSERT_EQ(0, spyre_kernel_embedding_scalars(&c->emb_desc, tokens, u.sc));
	ASSERT_EQ(0, spyre_stream_add_callback(self->s, update_in_callback, &u));
	/* After the callback in stream order: the replay has its update. */
	ASSERT_EQ(0, spyre_graph_launch(u.x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, u.ret);
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("element %d", k);
	ASSERT_EQ(0, spyre_graph_exec_destroy(u.x));
}

/*
 * One exec replayed by several threads, each on its own stream, while
 * another updates its tokens: the replays are ordered on the device, and
 * once all are done the card holds the last update's result.
 */
#define SHARED_THREADS 3
#define SHARED_REPLAYS 10

struct sharer {
	spyre_device_t *dev;
	spyre_graph_exec_t *x;
	int bad;
	char why[256];
};

static void *sharer_run(void *arg)
{
	struct sharer *w = arg;
	spyre_stream_t *s = NULL;
	int r, ret;

	ret = spyre_stream_create(w->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s);
	for (r = 0; r < SHARED_REPLAYS && !ret; r++) {
		ret = spyre_graph_launch(w->x, s);
		if (!ret && r % 3 == 2)
			ret = spyre_stream_synchronize(s);
	}
	ret = ret ?: spyre_stream_synchronize(s);
	if (ret) {
		snprintf(w->why, sizeof(w->why), "%d: %s", ret, spyre_last_error());
		w->bad = 1;
	}
	spyre_stream_destroy(s);
	return NULL;
}

TEST_F(graph, threads_replay_one_exec_while_it_is_updated)
{
	int32_t tokens[M] = { 31, 32, 33, 34 };
	struct sharer w[SHARED_THREADS];
	pthread_t t[SHARED_THREADS];
	int bias_of[CHAIN] = { 0 }, i, k;
	struct chain *c = &self->c;
	spyre_graph_exec_t *x;
	float ref[M * H];
	spyre_graph_t *g;
	uint64_t sc[M];

	ASSERT_EQ(0, chain_capture(c, self->s, CHAIN, tokens, &g)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_instantiate(g, &x)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_graph_destroy(g));
	for (i = 0; i < SHARED_THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].dev = self->dev;
		w[i].x = x;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, sharer_run, &w[i]));
	}
	for (i = 0; i < 20; i++) {
		tokens[3] = (i * 7) % V;
		ASSERT_EQ(0, spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc));
		ASSERT_EQ(0, spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, sc, M)) TH_LOG("%s", spyre_last_error());
		usleep(1000);
	}
	for (i = 0; i < SHARED_THREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < SHARED_THREADS; i++)
		EXPECT_EQ(0, w[i].bad) TH_LOG("thread %d: %s", i, w[i].why);
	/* One more replay, after them all: the last update's result. */
	memset(c->pinned, 0xff, BUF);
	ASSERT_EQ(0, spyre_graph_launch(x, self->s)) TH_LOG("%s", spyre_last_error());
	ASSERT_EQ(0, spyre_stream_synchronize(self->s)) TH_LOG("%s", spyre_last_error());
	chain_ref(c, CHAIN, tokens, bias_of, ref);
	for (k = 0; k < M * H; k++)
		ASSERT_EQ(ref[k], c->pinned[k]) TH_LOG("element %d", k);
	ASSERT_EQ(0, spyre_graph_exec_destroy(x));
}

/* Threads, each capturing on its own stream and replaying its own exec with its own tokens. */
#define THREADS 3
#define THREAD_REPLAYS 12

struct worker {
	spyre_device_t *dev;
	unsigned int seed;
	int bad;
	char why[256];
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	int32_t tokens[M] = { (int32_t)w->seed, 2, 3, 4 };
	int bias_of[8] = { 0 }, r, k, n = 6;
	spyre_stream_t *s = NULL;
	spyre_graph_exec_t *x = NULL;
	spyre_graph_t *g = NULL;
	struct chain *c;
	float ref[M * H];
	uint64_t sc[M];
	int ret;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	ret = chain_init(c, w->dev, w->seed);
	ret = ret ?: spyre_stream_create(w->dev, SPYRE_STREAM_PRIORITY_NORMAL, &s);
	ret = ret ?: chain_capture(c, s, n, tokens, &g);
	ret = ret ?: spyre_graph_instantiate(g, &x);
	for (r = 0; r < THREAD_REPLAYS && !ret; r++) {
		tokens[2] = (int32_t)((w->seed * 7 + (unsigned int)r * 5) % V);
		ret = spyre_kernel_embedding_scalars(&c->emb_desc, tokens, sc);
		ret = ret ?: spyre_graph_exec_set_kernel_args(x, 0, NULL, 0, sc, M);
		ret = ret ?: spyre_graph_launch(x, s);
		ret = ret ?: spyre_stream_synchronize(s);
		chain_ref(c, n, tokens, bias_of, ref);
		for (k = 0; k < M * H && !ret; k++)
			if (ref[k] != c->pinned[k]) {
				snprintf(w->why, sizeof(w->why), "thread %u replay %d element %d: %g, not %g",
					 w->seed, r, k, c->pinned[k], ref[k]);
				w->bad = 1;
				break;
			}
		if (w->bad)
			break;
	}
	if (ret) {
		snprintf(w->why, sizeof(w->why), "thread %u: %s", w->seed, spyre_last_error());
		w->bad = 1;
	}
	spyre_graph_exec_destroy(x);
	spyre_graph_destroy(g);
	spyre_stream_destroy(s);
	chain_fini(c);
	free(c);
	return NULL;
}

TEST_F(graph, threads_capture_and_replay_their_own)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	int i;

	for (i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].dev = self->dev;
		w[i].seed = (unsigned int)i + 2;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, worker_run, &w[i]));
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < THREADS; i++)
		EXPECT_EQ(0, w[i].bad) TH_LOG("%s", w[i].why);
}

TEST_HARNESS_MAIN
