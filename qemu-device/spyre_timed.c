/*
 * spyre timed mode (timed=on, docs/timed-mode.md): the queues have no
 * worker threads; each queue's packet runs in the queue's QEMU_CLOCK_VIRTUAL
 * timer callback, under the BQL on the vCPU's timeline, at the virtual time
 * the queue reaches it, and completes at that time plus its modeled
 * duration. Called by the queue register file (spyre_queue.c: a doorbell or
 * an enable kicks the queue, a reset drops its pending completion); runs
 * packets through spyre_packet.c and calls spyre_dma.c and spyre_irq.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "trace.h"
#include "spyre_int.h"

/*
 * ---- The timeline -----------------------------------------------------------
 *
 * Every step below runs under the BQL on the vCPU's timeline: in the queue's
 * QEMU_CLOCK_VIRTUAL timer callback (with -icount, QEMU runs those timers in
 * the vCPU thread at exactly their deadline) or in an MMIO handler. So every
 * decision is taken at a deterministic point of the guest's instruction
 * stream, and virtual time cannot pass a completion: a pending completion is
 * a pending QEMU_CLOCK_VIRTUAL timer, which bounds both the vCPU's
 * instruction budget and -icount sleep=off's warp of an idle guest.
 *
 * A queue reaches its next packet at the later of the previous packet's
 * completion and the doorbell (or enable) that made it runnable. The packet
 * runs functionally at once, in the callback (the vCPU waits for it, so
 * virtual time stands still meanwhile), and completes at
 *   COPY:   max(reach, DMA engine free) + dma-latency-ns + bytes with a host
 *           side / dma-mbps + device-to-device bytes / mem-copy-mbps; the
 *           engine is free again when the transfer ends (the latency of one
 *           copy overlaps the next);
 *   LAUNCH: max(reach, compute engine free) + the engine's modeled device
 *           time (struct spyre_launch_result.device_ns); the engine is free
 *           again then;
 *   WAIT:   the first time the semaphore is seen satisfied: at reach, at any
 *           SIGNAL of any card, or at re-reads wait-poll-ns, 2x, 4x, ... (at most
 *           1 ms) apart, for stores by the CPU;
 *   others, and packets that fail before running: reach.
 * At the completion time the completion word, HEAD/DONE and the MSI-X vector
 * are published and the queue reaches its next packet.
 */
#define SPYRE_T_POLL_MAX_NS 1000000

static uint64_t timed_xfer_ns(uint64_t bytes, uint32_t mbps)
{
    /* bytes / (mbps * 10^6 B/s) in ns, rounded up; bytes <= 1 TiB */
    return DIV_ROUND_UP(bytes * 1000, mbps);
}

static bool timed_runnable(SpyreQueue *q)
{
    bool run;

    qemu_mutex_lock(&q->lock);
    run = (q->status & SPYRE_QSTAT_ENABLED) &&
          !(q->status & SPYRE_QSTAT_ERROR) && !q->hung && q->head != q->tail;
    qemu_mutex_unlock(&q->lock);
    return run;
}

/* A SIGNAL of any card at @now: every WAIT re-reads its semaphore then. */
static void timed_wake_waiters(SpyreState *s, int64_t now)
{
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *w = &s->queues[i];

        if (w->t_phase == SPYRE_T_WAITING) {
            w->t_poll_ns = s->params.wait_poll_ns;
            timer_mod_ns(w->t_timer, now);
        }
    }
}

static void timed_finish(SpyreQueue *q, bool ok, const SpyreFault *f,
                         int64_t done)
{
    q->t_ok = ok;
    q->t_fault = *f;
    q->t_done = done;
    q->t_phase = SPYRE_T_PENDING;
}

/* The queue's WAIT at @now: satisfied (or failed) now, or re-read later. */
static void timed_wait_check(SpyreQueue *q, int64_t now)
{
    const struct spyre_pkt_sem *m = (const void *)q->t_raw;
    uint32_t epoch = qatomic_read(&q->epoch);
    SpyreFault f = { 0 };
    uint64_t cur = 0;
    bool ok;

    ok = spyre_sem_access(q, m, &cur, false, &f);
    if (spyre_queue_stale(q, epoch)) {
        return;
    }
    if (ok && cur < le64_to_cpu(m->value)) {
        timer_mod_ns(q->t_timer, now + q->t_poll_ns);
        q->t_poll_ns = MIN(q->t_poll_ns * 2, SPYRE_T_POLL_MAX_NS);
        return;
    }
    qemu_mutex_lock(&q->lock);
    q->status &= ~SPYRE_QSTAT_WAITING;
    qemu_mutex_unlock(&q->lock);
    timed_finish(q, ok, &f, now);
}

/* The queue reaches the packet at HEAD at virtual time @now: run it. */
static void timed_start(SpyreQueue *q, int64_t now)
{
    SpyreState *s = q->s;
    const struct spyre_pkt_hdr *h = (const void *)q->t_raw;
    SpyreFault f = { 0 };
    int64_t start = now, done = now;
    uint64_t base, xfer;
    uint32_t epoch;
    unsigned prio;
    bool ok, valid;

    qemu_mutex_lock(&q->lock);
    if (!spyre_queue_may_fetch_locked(q)) {
        qemu_mutex_unlock(&q->lock);
        return;
    }
    epoch = q->epoch;
    base = q->base + (uint64_t)(q->head & (q->size - 1)) * SPYRE_PKT_SIZE;
    q->t_head = q->head;
    q->t_compl = q->compl_addr;
    prio = (q->ctrl & SPYRE_QCTRL_PRIO_MASK) >> SPYRE_QCTRL_PRIO_SHIFT;
    q->status |= SPYRE_QSTAT_BUSY;
    q->t_running = true;
    qemu_mutex_unlock(&q->lock);

    memset(q->t_raw, 0, sizeof(q->t_raw));
    q->moved_link = q->moved_mem = q->launch_ns = 0;
    ok = spyre_host_dma(q, base, q->t_raw, sizeof(q->t_raw), false,
                        SPYRE_SOURCE_RING, &f);
    valid = ok && spyre_packet_validate(q->t_raw) == SPYRE_ERR_NONE;
    if (valid && h->opcode == SPYRE_PKT_OP_WAIT) {
        trace_spyre_packet(q->idx, h->opcode, le64_to_cpu(h->seq));
    } else {
        ok = ok && spyre_packet_execute(q, q->t_raw, epoch, prio, &f);
    }
    q->t_running = false;
    if (spyre_queue_stale(q, epoch)) {
        /*
         * Reset while it ran (its DMA reached the configuration space):
         * the reset owns the queue's state; the packet has stopped.
         */
        qemu_mutex_lock(&q->lock);
        q->status &= ~SPYRE_QSTAT_BUSY;
        qemu_mutex_unlock(&q->lock);
        return;
    }
    if (valid && h->opcode == SPYRE_PKT_OP_WAIT) {
        qemu_mutex_lock(&q->lock);
        q->status |= SPYRE_QSTAT_WAITING;
        qemu_mutex_unlock(&q->lock);
        q->t_phase = SPYRE_T_WAITING;      /* timed_cb() reads it now */
        q->t_poll_ns = s->params.wait_poll_ns;
        return;
    }
    if (valid && h->opcode == SPYRE_PKT_OP_COPY) {
        start = MAX(now, s->t_dma_free);
        xfer = timed_xfer_ns(q->moved_link, s->params.dma_mbps) +
               timed_xfer_ns(q->moved_mem, s->params.mem_copy_mbps);
        s->t_dma_free = start + xfer;
        done = start + s->params.dma_latency_ns + xfer;
    } else if (valid && h->opcode == SPYRE_PKT_OP_LAUNCH) {
        start = MAX(now, s->t_engine_free);
        done = start + q->launch_ns;
        s->t_engine_free = done;
    } else if (ok && h->opcode == SPYRE_PKT_OP_SIGNAL) {
        spyre_sem_kick_cards(s, timed_wake_waiters, now);
    }
    trace_spyre_timed(q->idx, h->opcode, le64_to_cpu(h->seq), now, start,
                      done);
    timed_finish(q, ok, &f, done);
}

/* The packet's completion time has come: write it out, as a worker would. */
static void timed_publish(SpyreQueue *q)
{
    const struct spyre_pkt_hdr *h = (const void *)q->t_raw;
    uint64_t seq = le64_to_cpu(h->seq);
    uint16_t flags = le16_to_cpu(h->flags);
    uint32_t epoch = qatomic_read(&q->epoch);
    SpyreFault f = q->t_fault;
    bool ok = q->t_ok;

    if (ok && q->t_compl) {
        ok = spyre_queue_write_completion(q, q->t_compl, seq, &f);
    }
    if (spyre_queue_stale(q, epoch)) {
        return;
    }
    q->t_phase = SPYRE_T_IDLE;
    qemu_mutex_lock(&q->lock);
    q->status &= ~SPYRE_QSTAT_BUSY;
    spyre_queue_finish_locked(q, ok, q->t_head, seq, flags, &f);
    qemu_mutex_unlock(&q->lock);
}

/*
 * The queue's timer: publish what is due, start what the queue reaches now,
 * re-read a WAIT; re-arm at the next completion or re-read. Bounded: each
 * turn completes a packet (HEAD moves towards TAIL) or stops.
 */
static void timed_cb(void *opaque)
{
    SpyreQueue *q = opaque;
    SpyreState *s = q->s;
    DeviceState *dev = DEVICE(s);
    bool guard = dev->mem_reentrancy_guard.engaged_in_io;
    int64_t now = spyre_vclock_ns();

    /*
     * As in a bottom half, the device's own registers are closed to its DMA
     * while a packet runs here (such a COPY fails with a DMA error).
     */
    dev->mem_reentrancy_guard.engaged_in_io = true;
    for (;;) {
        if (q->t_phase == SPYRE_T_PENDING) {
            if (q->t_done > now) {
                timer_mod_ns(q->t_timer, q->t_done);
                break;
            }
            timed_publish(q);
        } else if (q->t_phase == SPYRE_T_WAITING) {
            timed_wait_check(q, now);
            if (q->t_phase == SPYRE_T_WAITING) {
                break;
            }
        } else if (timed_runnable(q)) {
            timed_start(q, now);
        } else {
            break;
        }
    }
    dev->mem_reentrancy_guard.engaged_in_io = guard;
    spyre_irq_flush(s);
}

/* Under the BQL, after a queue register write: the queue may run now. */
void spyre_timed_kick(SpyreQueue *q)
{
    if (q->t_phase == SPYRE_T_IDLE && !timer_pending(q->t_timer) &&
        timed_runnable(q)) {
        timer_mod_ns(q->t_timer, spyre_vclock_ns());
    }
}

void spyre_timed_init(SpyreQueue *q)
{
    q->t_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, timed_cb, q);
}

void spyre_timed_fini(SpyreQueue *q)
{
    if (q->t_timer) {
        timer_free(q->t_timer);
        q->t_timer = NULL;
    }
}

/*
 * In a queue reset, with q->lock held: a pending completion is dropped; its
 * work was already done.
 */
void spyre_timed_reset_locked(SpyreQueue *q)
{
    timer_del(q->t_timer);
    q->t_phase = SPYRE_T_IDLE;
    if (!q->t_running) {
        q->status = 0;
    }
}

/*
 * ---- Migration --------------------------------------------------------------
 *
 * The timeline migrates as it stands: the phase, the packet fetched and its
 * outcome, its completion time and the timer's deadline, all in virtual ns
 * (the virtual clock migrates with the VM, -icount's counter included).
 */

/* The queue's timer deadline, or -1 when it is not armed. Under the BQL. */
int64_t spyre_timed_expire(SpyreQueue *q)
{
    return q->t_timer ? timer_expire_time_ns(q->t_timer) : -1;
}

/*
 * After an incoming migration loaded @q's timed fields (t_expire included):
 * false with *why (g_free() it) when they do not describe a state this file
 * could have left.
 */
bool spyre_timed_check(SpyreQueue *q, char **why)
{
    SpyreState *s = q->s;
    bool waiting = q->status & SPYRE_QSTAT_WAITING;
    bool busy = q->status & SPYRE_QSTAT_BUSY;

    if (q->t_expire < -1) {
        *why = g_strdup_printf("timer deadline %" PRId64, q->t_expire);
        return false;
    }
    switch (q->t_phase) {
    case SPYRE_T_IDLE:
        if (waiting || (busy && !q->hung)) {
            *why = g_strdup_printf("idle with status 0x%x", q->status);
            return false;
        }
        return true;
    case SPYRE_T_PENDING:
        if (!busy || waiting || q->t_expire != q->t_done ||
            q->t_fault.error >= SPYRE_ERR_COUNT) {
            *why = g_strdup_printf("completion at %" PRId64 " with timer %"
                                   PRId64 ", status 0x%x, error %u",
                                   q->t_done, q->t_expire, q->status,
                                   q->t_fault.error);
            return false;
        }
        return true;
    case SPYRE_T_WAITING:
        if (!busy || !waiting || q->t_expire < 0 ||
            q->t_poll_ns < s->params.wait_poll_ns ||
            q->t_poll_ns > MAX(SPYRE_T_POLL_MAX_NS, s->params.wait_poll_ns) ||
            spyre_packet_validate(q->t_raw) != SPYRE_ERR_NONE ||
            ((const struct spyre_pkt_hdr *)q->t_raw)->opcode !=
            SPYRE_PKT_OP_WAIT) {
            *why = g_strdup_printf("WAIT with status 0x%x, timer %" PRId64
                                   ", re-read interval %u ns, or not a "
                                   "valid WAIT packet", q->status,
                                   q->t_expire, q->t_poll_ns);
            return false;
        }
        return true;
    default:
        *why = g_strdup_printf("phase %u", q->t_phase);
        return false;
    }
}

/* After spyre_timed_check(): arm the timer where it stood. */
void spyre_timed_restore(SpyreQueue *q)
{
    if (q->t_expire >= 0) {
        timer_mod_ns(q->t_timer, q->t_expire);
    } else {
        timer_del(q->t_timer);
    }
}
