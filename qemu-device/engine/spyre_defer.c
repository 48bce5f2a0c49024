// SPDX-License-Identifier: MIT
/*
 * The engine's host threads (cfg.threads > 1): the scheduler (spyre_engine.c)
 * still runs the cores one instruction at a time on the launching thread and
 * puts every cost on the modeled timeline there, but a tensor instruction's
 * numerics - which read and write that core's scratchpad alone, and whose
 * cost depends on the instruction alone - go into a queue per core. Any host
 * thread may take a core's queued ops (one thread per core at a time, in
 * order); the scheduler drains a core's queue (spyre_defer_sync) before it
 * touches that scratchpad itself: a LOAD or STORE moving data, SEND, RECV,
 * LDX, and the launch's end. So every scratchpad sees the same reads and
 * writes in the same order as with one thread, the results and the timeline
 * are the same, and the cores' numerics overlap each other and the
 * scheduler's own work. While it waits for a core, the launching thread runs
 * other cores' queued ops rather than sleep. An op below SPYRE_DEFER_MIN_WORK
 * runs in place when its core has nothing queued: a hand-over (a lock, maybe
 * a wake-up) would cost more than it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "spyre_engine_int.h"

struct spyre_worker {
	struct spyre_engine *e;
	struct spyre_ws ws;
	pthread_t th;
};

struct dsync {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* a core's queue became takeable, or stop */
	pthread_cond_t done;	/* a thread gave a core back */
};

#define DS(e) ((struct dsync *)(e)->dsync)

void spyre_ws_free(struct spyre_ws *w)
{
	for (int i = 0; i < 4; i++) {
		free(w->buf[i]);
		w->buf[i] = NULL;
		w->len[i] = 0;
	}
}

/* Under the lock: take core id's queued ops [*h, *t) if no thread has them. */
static bool claim(struct spyre_engine *e, uint32_t id, uint32_t *h, uint32_t *t)
{
	struct core *c = &e->core[id];

	if (c->df_claimed || c->df_head == c->df_tail)
		return false;
	c->df_claimed = true;
	e->dpending &= ~(1u << id);
	*h = c->df_head;
	*t = c->df_tail;
	return true;
}

/*
 * Without the lock: run core id's ops [h, t) with workspaces w. After a
 * failed op the core's later ones are skipped (one thread would have stopped
 * the launch there); the first failure is recorded under the lock.
 */
static void run(struct spyre_engine *e, struct spyre_ws *w, uint32_t id, uint32_t h, uint32_t t)
{
	for (uint32_t i = h; i != t; i++) {
		const struct deferred *d = &e->dfq[id][i % SPYRE_DEFER_DEPTH];
		uint32_t f = spyre_exec_tensor(e, w, id, &d->t, d->cls, d->rdiag, &d->src);

		if (f) {
			pthread_mutex_lock(&DS(e)->lock);
			if (!e->dfault) {
				e->dfault = f;
				e->dfault_core = id;
				e->dfault_pc = d->pc;
				e->dfault_addr = d->t.d;
			}
			pthread_mutex_unlock(&DS(e)->lock);
			return;
		}
	}
}

/* Under the lock: give core id back after running its ops up to t. */
static void release(struct spyre_engine *e, uint32_t id, uint32_t t)
{
	struct core *c = &e->core[id];

	c->df_head = t;
	c->df_claimed = false;
	if (c->df_head != c->df_tail)
		e->dpending |= 1u << id;
	pthread_cond_broadcast(&DS(e)->done);
}

/* Under the lock: take, run and give back core id's queued ops (false if not takeable). */
static bool take_and_run(struct spyre_engine *e, struct spyre_ws *w, uint32_t id)
{
	uint32_t h, t;

	if (!claim(e, id, &h, &t))
		return false;
	pthread_mutex_unlock(&DS(e)->lock);
	run(e, w, id, h, t);
	pthread_mutex_lock(&DS(e)->lock);
	release(e, id, t);
	return true;
}

static void *worker_main(void *arg)
{
	struct spyre_worker *wk = arg;
	struct spyre_engine *e = wk->e;

	pthread_mutex_lock(&DS(e)->lock);
	for (;;) {
		while (!e->dstop && !e->dpending)
			pthread_cond_wait(&DS(e)->work, &DS(e)->lock);
		if (e->dstop)
			break;
		/* the lowest core: the launching thread, when it helps, takes the highest */
		take_and_run(e, &wk->ws, (uint32_t)__builtin_ctz(e->dpending));
	}
	pthread_mutex_unlock(&DS(e)->lock);
	return NULL;
}

int spyre_defer_init(struct spyre_engine *e)
{
	uint32_t n = e->cfg.threads > 1 ? e->cfg.threads - 1 : 0;
	sigset_t all, old;

	if (!n)
		return 0;
	e->dsync = calloc(1, sizeof(struct dsync));
	e->workers = calloc(n, sizeof(*e->workers));
	if (!e->dsync || !e->workers)
		goto fail;
	pthread_mutex_init(&DS(e)->lock, NULL);
	pthread_cond_init(&DS(e)->work, NULL);
	pthread_cond_init(&DS(e)->done, NULL);
	/* no signals for the engine's threads (the host, e.g. QEMU, handles them elsewhere) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (uint32_t i = 0; i < n; i++) {
		e->workers[i].e = e;
		if (pthread_create(&e->workers[i].th, NULL, worker_main, &e->workers[i]))
			break;
		e->nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e->nworkers)
		return 0;
	pthread_cond_destroy(&DS(e)->done);
	pthread_cond_destroy(&DS(e)->work);
	pthread_mutex_destroy(&DS(e)->lock);
fail:
	free(e->workers);
	free(e->dsync);
	e->workers = NULL;
	e->dsync = NULL;
	return -1;
}

void spyre_defer_fini(struct spyre_engine *e)
{
	if (!e->nworkers)
		return;
	pthread_mutex_lock(&DS(e)->lock);
	e->dstop = true;
	pthread_cond_broadcast(&DS(e)->work);
	pthread_mutex_unlock(&DS(e)->lock);
	for (uint32_t i = 0; i < e->nworkers; i++) {
		pthread_join(e->workers[i].th, NULL);
		spyre_ws_free(&e->workers[i].ws);
	}
	pthread_cond_destroy(&DS(e)->done);
	pthread_cond_destroy(&DS(e)->work);
	pthread_mutex_destroy(&DS(e)->lock);
	free(e->workers);
	free(e->dsync);
	e->workers = NULL;
	e->dsync = NULL;
	e->nworkers = 0;
}

/* Under the lock: a failed deferred op becomes the launch's fault (once). */
static int deferred_fault(struct spyre_engine *e)
{
	if (!e->dfault)
		return STEP_NEXT;
	fault(e, e->dfault, e->dfault_core, e->dfault_pc, e->dfault_addr);
	return STEP_FAULT;
}

/* Under the lock: wait until core id has nothing queued or running, helping meanwhile. */
static void drain(struct spyre_engine *e, uint32_t id)
{
	struct core *c = &e->core[id];

	while (c->df_claimed || c->df_head != c->df_tail) {
		if (take_and_run(e, &e->ws0, id))
			continue;
		/* another thread has it: run someone else's ops rather than sleep */
		if (e->dpending)
			take_and_run(e, &e->ws0, 31 - (uint32_t)__builtin_clz(e->dpending));
		else
			pthread_cond_wait(&DS(e)->done, &DS(e)->lock);
	}
}

int spyre_defer_sync(struct spyre_engine *e, uint32_t id)
{
	int rc;

	if (!e->nworkers)
		return STEP_NEXT;
	pthread_mutex_lock(&DS(e)->lock);
	drain(e, id);
	rc = deferred_fault(e);
	pthread_mutex_unlock(&DS(e)->lock);
	return rc;
}

int spyre_defer_sync_all(struct spyre_engine *e)
{
	int rc;

	if (!e->nworkers)
		return STEP_NEXT;
	pthread_mutex_lock(&DS(e)->lock);
	for (uint32_t i = 0; i < e->cfg.cores; i++)
		drain(e, i);
	rc = deferred_fault(e);
	pthread_mutex_unlock(&DS(e)->lock);
	return rc;
}

bool spyre_defer_idle(struct spyre_engine *e, uint32_t id)
{
	bool idle;

	if (!e->nworkers)
		return true;
	pthread_mutex_lock(&DS(e)->lock);
	idle = !e->core[id].df_claimed && e->core[id].df_head == e->core[id].df_tail;
	pthread_mutex_unlock(&DS(e)->lock);
	return idle;
}

int spyre_defer_push(struct spyre_engine *e, uint32_t id, const struct spyre_insn_tensor *t,
		     enum spyre_opclass cls, uint64_t rdiag, const struct spyre_src *src, uint32_t pc)
{
	struct core *c = &e->core[id];
	struct deferred *d;

	pthread_mutex_lock(&DS(e)->lock);
	if (c->df_tail - c->df_head == SPYRE_DEFER_DEPTH)
		drain(e, id);
	if (deferred_fault(e) == STEP_FAULT) {
		pthread_mutex_unlock(&DS(e)->lock);
		return STEP_FAULT;
	}
	d = &e->dfq[id][c->df_tail % SPYRE_DEFER_DEPTH];
	d->t = *t;
	d->cls = cls;
	d->rdiag = rdiag;
	d->src = *src;
	d->pc = pc;
	c->df_tail++;
	if (!c->df_claimed) {
		e->dpending |= 1u << id;
		pthread_cond_signal(&DS(e)->work);
	}
	pthread_mutex_unlock(&DS(e)->lock);
	return STEP_NEXT;
}
