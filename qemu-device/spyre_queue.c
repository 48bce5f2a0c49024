/*
 * spyre hardware command queues: the queue registers, queue reset, and the
 * worker threads of functional mode. One worker per queue fetches packets
 * from its ring in host memory, runs them (spyre_packet.c), writes the
 * completion word and raises the queue's MSI-X vector. Workers never run on
 * the vCPU thread and hold no lock across DMA; a DMA whose target is MMIO
 * takes the BQL inside the memory API (prepare_mmio_access), so nothing may
 * wait for a worker while holding the BQL.
 *
 * Timed mode (timed=on, docs/timed-mode.md) has no running workers: each
 * queue's packets run in its virtual-clock timer (spyre_timed.c), which a
 * register write here kicks.
 *
 * Called by spyre.c (the register file's decoding, realize, reset); calls
 * spyre_timed.c, spyre_packet.c and spyre_dma.c.
 *
 * Protocol and packet formats: docs/spyre-device.md, "Queues and packets".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "qemu/log.h"
#include "qemu/rcu.h"
#include "qemu/main-loop.h"
#include "trace.h"
#include "spyre_int.h"

static void *queue_thread(void *opaque)
{
    SpyreQueue *q = opaque;
    SpyreState *s = q->s;

    rcu_register_thread();
    qemu_mutex_lock(&q->lock);
    while (!q->quit) {
        uint8_t raw[SPYRE_PKT_SIZE];
        const struct spyre_pkt_hdr *h = (const void *)raw;
        uint32_t epoch, head;
        uint64_t base, compl, seq;
        unsigned prio;
        uint16_t flags;
        SpyreFault f = { 0 };
        bool ok;

        /* Timed mode: the queue's timer runs its packets (spyre_timed.c). */
        if (s->params.timed || qatomic_read(&s->paused) ||
            !(q->status & SPYRE_QSTAT_ENABLED) ||
            (q->status & SPYRE_QSTAT_ERROR) || q->hung || q->head == q->tail) {
            qemu_cond_wait(&q->cond, &q->lock);
            continue;
        }
        if (!spyre_queue_may_fetch_locked(q)) {
            continue;
        }

        epoch = q->epoch;
        head = q->head;
        base = q->base + (uint64_t)(head & (q->size - 1)) * SPYRE_PKT_SIZE;
        compl = q->compl_addr;
        prio = (q->ctrl & SPYRE_QCTRL_PRIO_MASK) >> SPYRE_QCTRL_PRIO_SHIFT;
        q->status |= SPYRE_QSTAT_BUSY;
        qemu_mutex_unlock(&q->lock);

        /* No lock held from here: DMA may need the BQL (MMIO targets). */
        memset(raw, 0, sizeof(raw));
        ok = spyre_host_dma(q, base, raw, sizeof(raw), false,
                            SPYRE_SOURCE_RING, &f);
        seq = le64_to_cpu(h->seq);
        flags = le16_to_cpu(h->flags);
        ok = ok && spyre_packet_execute(q, raw, epoch, prio, &f);
        if (ok && compl && !spyre_queue_stale(q, epoch)) {
            ok = spyre_queue_write_completion(q, compl, seq, &f);
        }

        qemu_mutex_lock(&q->lock);
        q->status &= ~SPYRE_QSTAT_BUSY;
        qemu_cond_broadcast(&q->cond);      /* spyre_queues_pause() */
        if (q->epoch != epoch) {
            continue;       /* the queue was reset meanwhile */
        }
        if (!ok && f.error == SPYRE_FAULT_REPLAY) {
            continue;       /* HEAD stays: fetched again when the VM runs */
        }
        spyre_queue_finish_locked(q, ok, head, seq, flags, &f);
    }
    qemu_mutex_unlock(&q->lock);
    rcu_unregister_thread();
    return NULL;
}

void spyre_queue_reset(SpyreQueue *q)
{
    qemu_mutex_lock(&q->lock);
    q->epoch++;
    q->base = 0;
    q->size = 0;
    q->ctrl = 0;
    q->head = 0;
    q->tail = 0;
    q->compl_addr = 0;
    /* A running packet finishes and is discarded; a hung queue is idle. */
    q->status = q->hung ? 0 : (q->status & SPYRE_QSTAT_BUSY);
    if (q->s->params.timed) {
        spyre_timed_reset_locked(q);
    }
    q->error = 0;
    q->err_seq = 0;
    q->fault_addr = 0;
    q->fault_info = 0;
    q->fault_core = ~0u;
    q->fault_pc = ~0u;
    q->done = 0;
    q->inject = 0;
    q->hung = false;
    qatomic_and(&q->s->err_queues, ~(1ULL << q->idx));
    qemu_cond_broadcast(&q->cond);
    qemu_mutex_unlock(&q->lock);
    /* A WAIT in progress notices the new epoch at once. */
    spyre_sem_kick(q->s);
    trace_spyre_queue_reset(q->idx);
}

/* BASE and SIZE describe a ring a queue may run on. */
bool spyre_queue_ring_ok(const SpyreQueue *q)
{
    return q->base && !(q->base % SPYRE_PKT_SIZE) && q->size >= 2 &&
           q->size <= SPYRE_Q_SIZE_MAX && is_power_of_2(q->size);
}

static void queue_start_locked(SpyreQueue *q)
{
    SpyreFault f = { .error = SPYRE_ERR_RING_CONFIG };

    if (!spyre_queue_ring_ok(q)) {
        SPYRE_GUEST_ERR("queue %u: enable with bad ring base 0x%" PRIx64
                        " / size %u", q->idx, q->base, q->size);
        spyre_queue_fail_locked(q, 0, &f);
        return;
    }
    q->status = (q->status & SPYRE_QSTAT_BUSY) | SPYRE_QSTAT_ENABLED;
    q->error = 0;
    qatomic_and(&q->s->err_queues, ~(1ULL << q->idx));
    qemu_cond_broadcast(&q->cond);
}

uint64_t spyre_queue_engine_read(SpyreQueue *q, unsigned reg)
{
    uint64_t v;

    qemu_mutex_lock(&q->lock);
    v = reg == SPYRE_QE_CORE ? q->fault_core : q->fault_pc;
    qemu_mutex_unlock(&q->lock);
    return v;
}

uint64_t spyre_queue_read(SpyreQueue *q, unsigned reg)
{
    uint64_t v = 0;

    qemu_mutex_lock(&q->lock);
    switch (reg) {
    case SPYRE_Q_BASE_LO:
        v = (uint32_t)q->base;
        break;
    case SPYRE_Q_BASE_HI:
        v = q->base >> 32;
        break;
    case SPYRE_Q_SIZE:
        v = q->size;
        break;
    case SPYRE_Q_CTRL:
        v = q->ctrl;
        break;
    case SPYRE_Q_HEAD:
        v = q->head;
        break;
    case SPYRE_Q_TAIL:
        v = q->tail;
        break;
    case SPYRE_Q_COMPL_LO:
        v = (uint32_t)q->compl_addr;
        break;
    case SPYRE_Q_COMPL_HI:
        v = q->compl_addr >> 32;
        break;
    case SPYRE_Q_STATUS:
        v = q->status;
        break;
    case SPYRE_Q_ERROR:
        v = q->error;
        break;
    case SPYRE_Q_ERR_SEQ_LO:
        v = (uint32_t)q->err_seq;
        break;
    case SPYRE_Q_ERR_SEQ_HI:
        v = q->err_seq >> 32;
        break;
    case SPYRE_Q_FAULT_LO:
        v = (uint32_t)q->fault_addr;
        break;
    case SPYRE_Q_FAULT_HI:
        v = q->fault_addr >> 32;
        break;
    case SPYRE_Q_FAULT_INFO:
        v = q->fault_info;
        break;
    case SPYRE_Q_DONE:
        v = q->done;
        break;
    }
    qemu_mutex_unlock(&q->lock);
    return v;
}

void spyre_queue_write(SpyreQueue *q, unsigned reg, uint32_t val)
{
    bool enabled;

    if (reg == SPYRE_Q_CTRL && (val & SPYRE_QCTRL_RESET)) {
        spyre_queue_reset(q);
        return;
    }

    qemu_mutex_lock(&q->lock);
    enabled = q->status & SPYRE_QSTAT_ENABLED;
    switch (reg) {
    case SPYRE_Q_TAIL:
        q->tail = val;
        trace_spyre_doorbell(q->idx, val);
        qemu_cond_broadcast(&q->cond);
        break;
    case SPYRE_Q_CTRL:
        if (val & ~(SPYRE_QCTRL_ENABLE | SPYRE_QCTRL_PRIO_MASK)) {
            SPYRE_GUEST_ERR("queue %u: CTRL reserved bits 0x%x", q->idx, val);
            break;
        }
        q->ctrl = val;
        if (val & SPYRE_QCTRL_ENABLE) {
            if (!enabled || (q->status & SPYRE_QSTAT_ERROR)) {
                queue_start_locked(q);
            }
        } else {
            /* Stop after the packet in progress. */
            q->status &= ~SPYRE_QSTAT_ENABLED;
        }
        break;
    case SPYRE_Q_BASE_LO:
    case SPYRE_Q_BASE_HI:
    case SPYRE_Q_SIZE:
    case SPYRE_Q_COMPL_LO:
    case SPYRE_Q_COMPL_HI:
    case SPYRE_Q_HEAD:
        if (enabled && !(q->status & SPYRE_QSTAT_ERROR)) {
            SPYRE_GUEST_ERR("queue %u: register 0x%x written while enabled",
                            q->idx, reg);
            break;
        }
        switch (reg) {
        case SPYRE_Q_BASE_LO:
            q->base = deposit64(q->base, 0, 32, val);
            break;
        case SPYRE_Q_BASE_HI:
            q->base = deposit64(q->base, 32, 32, val);
            break;
        case SPYRE_Q_SIZE:
            q->size = val;
            break;
        case SPYRE_Q_COMPL_LO:
            q->compl_addr = deposit64(q->compl_addr, 0, 32, val);
            break;
        case SPYRE_Q_COMPL_HI:
            q->compl_addr = deposit64(q->compl_addr, 32, 32, val);
            break;
        case SPYRE_Q_HEAD:
            q->head = val;
            break;
        }
        break;
    default:
        SPYRE_GUEST_ERR("queue %u: write 0x%x to read-only register 0x%x",
                        q->idx, val, reg);
        break;
    }
    qemu_mutex_unlock(&q->lock);
    if (q->s->params.timed) {
        spyre_timed_kick(q);    /* a doorbell, or the queue (re)enabled */
    }
}

/*
 * The VM stops (a VM change state handler, under the BQL): fetch nothing
 * more and wait for the packet each worker runs to finish, so that what
 * migration saves is exactly resumable: every packet before HEAD is done
 * and published, none after it started. A WAIT gives way at once and runs
 * again when the VM runs (its HEAD stays). Timed mode runs packets in
 * virtual-clock timers, which stand still with the VM: nothing runs.
 */
void spyre_queues_pause(SpyreState *s)
{
    bool bql = spyre_bql_locked();
    unsigned i, running = 0, waiting = 0;

    /* What the stop caught: packets running, WAITs among them. */
    for (i = 0; i < s->params.queues && !s->params.timed; i++) {
        SpyreQueue *q = &s->queues[i];

        qemu_mutex_lock(&q->lock);
        running += (q->status & SPYRE_QSTAT_BUSY) && !q->hung;
        waiting += !!(q->status & SPYRE_QSTAT_WAITING);
        qemu_mutex_unlock(&q->lock);
    }
    if (!s->params.timed) {
        trace_spyre_queues_pause(running, waiting);
    }

    qatomic_set(&s->paused, true);
    for (i = 0; i < s->params.queues; i++) {
        qemu_mutex_lock(&s->queues[i].lock);
        qemu_cond_broadcast(&s->queues[i].cond);
        qemu_mutex_unlock(&s->queues[i].lock);
    }
    spyre_sem_kick(s);
    if (s->params.timed) {
        return;
    }
    /* As pause_all_vcpus() does: a worker's DMA to MMIO needs the BQL. */
    if (bql) {
        spyre_bql_unlock();
    }
    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];

        qemu_mutex_lock(&q->lock);
        while ((q->status & SPYRE_QSTAT_BUSY) && !q->hung) {
            qemu_cond_wait(&q->cond, &q->lock);
        }
        qemu_mutex_unlock(&q->lock);
    }
    if (bql) {
        spyre_bql_lock();
    }
}

/* The VM runs again (or, after an incoming migration, for the first time). */
void spyre_queues_resume(SpyreState *s)
{
    unsigned i;

    qatomic_set(&s->paused, false);
    for (i = 0; i < s->params.queues; i++) {
        qemu_mutex_lock(&s->queues[i].lock);
        qemu_cond_broadcast(&s->queues[i].cond);
        qemu_mutex_unlock(&s->queues[i].lock);
    }
}

void spyre_queues_init(SpyreState *s)
{
    unsigned i;

    qemu_mutex_init(&s->sem_lock);
    qemu_cond_init(&s->sem_cond);
    qemu_mutex_init(&s->arb_lock);
    qemu_cond_init(&s->arb_cond);
    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];
        char name[32];

        q->s = s;
        q->idx = i;
        q->fault_core = ~0u;
        q->fault_pc = ~0u;
        qemu_mutex_init(&q->lock);
        qemu_cond_init(&q->cond);
        if (s->params.timed) {
            spyre_timed_init(q);
        }
        snprintf(name, sizeof(name), "spyre-q%u", i);
        qemu_thread_create(&q->thread, name, queue_thread, q,
                           QEMU_THREAD_JOINABLE);
    }
    spyre_sem_register(s);
}

void spyre_queues_fini(SpyreState *s)
{
    unsigned i;

    spyre_sem_unregister(s);
    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];

        qemu_mutex_lock(&q->lock);
        q->quit = true;
        q->epoch++;
        qemu_cond_broadcast(&q->cond);
        qemu_mutex_unlock(&q->lock);
    }
    spyre_sem_kick(s);
    /* Workers may be waiting for the BQL inside a DMA: let them finish. */
    spyre_bql_unlock();
    for (i = 0; i < s->params.queues; i++) {
        qemu_thread_join(&s->queues[i].thread);
    }
    spyre_bql_lock();
    for (i = 0; i < s->params.queues; i++) {
        spyre_timed_fini(&s->queues[i]);
        qemu_mutex_destroy(&s->queues[i].lock);
        qemu_cond_destroy(&s->queues[i].cond);
    }
    qemu_mutex_destroy(&s->sem_lock);
    qemu_cond_destroy(&s->sem_cond);
    qemu_mutex_destroy(&s->arb_lock);
    qemu_cond_destroy(&s->arb_cond);
}
