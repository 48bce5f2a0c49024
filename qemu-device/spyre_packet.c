/*
 * spyre packets: validation (everything that needs no memory access) and
 * execution of one packet of a queue: COPY through the shared DMA engine
 * (spyre_dma.c), SIGNAL/WAIT/TIMESTAMP on 8-byte semaphores, NOP, LAUNCH on
 * the compute engine (engine/, every access through the device MMU); and
 * what a packet leaves in its queue: the completion word, HEAD/DONE and the
 * interrupt, or the error registers. The queue thread (spyre_queue.c) and
 * timed mode (spyre_timed.c) run packets through here; calls spyre_dma.c,
 * spyre_mmu.c, spyre_inject.c and spyre_irq.c only.
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
#include "trace.h"
#include "spyre_int.h"

#define SPYRE_WAIT_POLL_MS  1

static bool exec_copy(SpyreQueue *q, const struct spyre_pkt_copy *p,
                      uint32_t epoch, unsigned prio, SpyreFault *f)
{
    SpyreState *s = q->s;
    uint16_t ctx = le16_to_cpu(p->hdr.ctx);
    uint64_t left = le64_to_cpu(p->size);
    SpyreCursor src, dst;
    uint8_t *bounce = NULL;
    bool ok = true;

    q->moved_link = q->moved_mem = 0;
    spyre_cursor_init(&src, p->src_space, ctx, le64_to_cpu(p->src),
                      SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC);
    spyre_cursor_init(&dst, p->dst_space, ctx, le64_to_cpu(p->dst),
                      SPYRE_ACCESS_WRITE, SPYRE_SOURCE_COPY_DST);

    while (left && ok) {
        uint64_t chunk = MIN(left, SPYRE_DMA_CHUNK);

        if (spyre_queue_stale(q, epoch)) {
            ok = false;     /* reset: abandon, the caller discards */
            break;
        }
        spyre_arb_acquire(s, prio);
        while (chunk) {
            SpyreSeg a, b;
            uint64_t n;

            if (!spyre_cursor_peek(q, &src, chunk, &a, f) ||
                !spyre_cursor_peek(q, &dst, chunk, &b, f)) {
                ok = false;
                break;
            }
            n = MIN(a.len, b.len);
            if (!spyre_dma_move(q, &a, &b, n, &bounce, f)) {
                ok = false;
                break;
            }
            if (a.devmem && b.devmem) {
                q->moved_mem += n;
            } else {
                q->moved_link += n;
            }
            spyre_cursor_advance(&src, n);
            spyre_cursor_advance(&dst, n);
            chunk -= n;
            left -= n;
        }
        spyre_arb_release(s, prio);
    }
    g_free(bounce);
    return ok;
}

/* Read or write the 8-byte semaphore a SIGNAL/WAIT/TIMESTAMP names. */
bool spyre_sem_access(SpyreQueue *q, const struct spyre_pkt_sem *p,
                      uint64_t *val, bool write, SpyreFault *f)
{
    SpyreCursor c;
    SpyreSeg seg;
    uint64_t le;

    spyre_cursor_init(&c, p->space, le16_to_cpu(p->hdr.ctx),
                      le64_to_cpu(p->addr),
                      write ? SPYRE_ACCESS_WRITE : SPYRE_ACCESS_READ,
                      SPYRE_SOURCE_SEMAPHORE);
    if (!spyre_cursor_peek(q, &c, 8, &seg, f)) {
        return false;
    }
    if (seg.devmem) {
        uint64_t *ptr = (uint64_t *)(q->s->mem_ptr + seg.addr);

        if (write) {
            qatomic_set(ptr, cpu_to_le64(*val));
            spyre_mem_dirty(q->s, seg.addr, 8);
        } else {
            *val = le64_to_cpu(qatomic_read(ptr));
        }
        return true;
    }
    if (write) {
        le = cpu_to_le64(*val);
        return spyre_host_dma(q, seg.addr, &le, 8, true,
                              SPYRE_SOURCE_SEMAPHORE, f);
    }
    if (!spyre_host_dma(q, seg.addr, &le, 8, false, SPYRE_SOURCE_SEMAPHORE,
                        f)) {
        return false;
    }
    *val = le64_to_cpu(le);
    return true;
}

void spyre_sem_kick(SpyreState *s)
{
    qemu_mutex_lock(&s->sem_lock);
    s->sem_gen++;
    qemu_cond_broadcast(&s->sem_cond);
    qemu_mutex_unlock(&s->sem_lock);
}

/*
 * Every card of the machine. A SIGNAL may land in another card's memory
 * (an imported peer buffer: a store through that card's peer BAR), and a
 * WAIT may read another card's memory: a SIGNAL wakes the WAITs of every
 * card, which re-read their semaphore, so cross-card ordering takes no
 * poll interval. Cards join in spyre_queues_init() and leave in
 * spyre_queues_fini() under the BQL; workers walk the list.
 */
static QemuMutex sem_cards_lock;        /* Protects sem_cards */
static QLIST_HEAD(, SpyreState) sem_cards = QLIST_HEAD_INITIALIZER(sem_cards);

static void __attribute__((__constructor__)) spyre_sem_cards_init(void)
{
    qemu_mutex_init(&sem_cards_lock);
}

void spyre_sem_register(SpyreState *s)
{
    qemu_mutex_lock(&sem_cards_lock);
    QLIST_INSERT_HEAD(&sem_cards, s, sem_next);
    qemu_mutex_unlock(&sem_cards_lock);
}

void spyre_sem_unregister(SpyreState *s)
{
    qemu_mutex_lock(&sem_cards_lock);
    QLIST_REMOVE(s, sem_next);
    qemu_mutex_unlock(&sem_cards_lock);
}

/*
 * A SIGNAL of @from: wake the WAITs of every card in the same mode (timed
 * mode: @timed_wake at virtual time @now, under the BQL, in the list's
 * fixed order, so two timed boots decide alike).
 */
void spyre_sem_kick_cards(SpyreState *from,
                          void (*timed_wake)(SpyreState *s, int64_t now),
                          int64_t now)
{
    SpyreState *c;

    qemu_mutex_lock(&sem_cards_lock);
    QLIST_FOREACH(c, &sem_cards, sem_next) {
        if (c->params.timed != from->params.timed) {
            continue;
        }
        if (timed_wake) {
            timed_wake(c, now);
        } else {
            spyre_sem_kick(c);
        }
    }
    qemu_mutex_unlock(&sem_cards_lock);
}

static bool exec_wait(SpyreQueue *q, const struct spyre_pkt_sem *p,
                      uint32_t epoch, SpyreFault *f)
{
    SpyreState *s = q->s;
    uint64_t want = le64_to_cpu(p->value), cur, gen;
    bool ok = true;

    qemu_mutex_lock(&q->lock);
    q->status |= SPYRE_QSTAT_WAITING;
    qemu_mutex_unlock(&q->lock);
    for (;;) {
        qemu_mutex_lock(&s->sem_lock);
        gen = s->sem_gen;
        qemu_mutex_unlock(&s->sem_lock);
        if (!spyre_sem_access(q, p, &cur, false, f)) {
            ok = false;
            break;
        }
        if (cur >= want) {
            break;
        }
        if (spyre_queue_stale(q, epoch) || qatomic_read(&q->quit)) {
            ok = false;
            break;
        }
        if (qatomic_read(&s->paused)) {
            /* The VM stops: run this WAIT again from the start later. */
            f->error = SPYRE_FAULT_REPLAY;
            ok = false;
            break;
        }
        /* Any card's SIGNAL wakes us at once; host writes are polled. */
        qemu_mutex_lock(&s->sem_lock);
        if (s->sem_gen == gen) {
            qemu_cond_timedwait(&s->sem_cond, &s->sem_lock, SPYRE_WAIT_POLL_MS);
        }
        qemu_mutex_unlock(&s->sem_lock);
    }
    qemu_mutex_lock(&q->lock);
    q->status &= ~SPYRE_QSTAT_WAITING;
    qemu_mutex_unlock(&q->lock);
    return ok;
}

static bool is_zero(const void *p, size_t n)
{
    return buffer_is_zero(p, n);
}

/* Check everything that does not need memory accesses. */
uint32_t spyre_packet_validate(const uint8_t *raw)
{
    const struct spyre_pkt_hdr *h = (const void *)raw;
    const struct spyre_pkt_copy *c = (const void *)raw;
    const struct spyre_pkt_sem *m = (const void *)raw;
    const struct spyre_pkt_launch *l = (const void *)raw;
    uint64_t size;

    if (h->version != SPYRE_PKT_VERSION) {
        return SPYRE_ERR_BAD_VERSION;
    }
    if (le16_to_cpu(h->flags) & ~SPYRE_PKT_F_MASK || h->reserved) {
        return SPYRE_ERR_RESERVED;
    }
    switch (h->opcode) {
    case SPYRE_PKT_OP_NOP:
        return is_zero(raw + sizeof(*h), SPYRE_PKT_SIZE - sizeof(*h)) ?
               SPYRE_ERR_NONE : SPYRE_ERR_RESERVED;
    case SPYRE_PKT_OP_COPY:
        if (!is_zero(c->reserved, sizeof(c->reserved))) {
            return SPYRE_ERR_RESERVED;
        }
        if (c->src_space >= SPYRE_AS_COUNT || c->dst_space >= SPYRE_AS_COUNT) {
            return SPYRE_ERR_SPACE;
        }
        size = le64_to_cpu(c->size);
        if (!size || size % SPYRE_STICK_BYTES || size > SPYRE_COPY_MAX) {
            return SPYRE_ERR_SIZE;
        }
        if ((c->src_space <= SPYRE_AS_DEVPHYS &&
             le64_to_cpu(c->src) % SPYRE_STICK_BYTES) ||
            (c->dst_space <= SPYRE_AS_DEVPHYS &&
             le64_to_cpu(c->dst) % SPYRE_STICK_BYTES)) {
            return SPYRE_ERR_ALIGN;
        }
        return SPYRE_ERR_NONE;
    case SPYRE_PKT_OP_SIGNAL:
    case SPYRE_PKT_OP_WAIT:
    case SPYRE_PKT_OP_TIMESTAMP:
        if (!is_zero(m->reserved, sizeof(m->reserved))) {
            return SPYRE_ERR_RESERVED;
        }
        if (m->space >= SPYRE_AS_HOST_SGL) {
            return SPYRE_ERR_SPACE;
        }
        if (le64_to_cpu(m->addr) % 8) {
            return SPYRE_ERR_ALIGN;
        }
        if (h->opcode == SPYRE_PKT_OP_TIMESTAMP && m->value) {
            return SPYRE_ERR_RESERVED;
        }
        return SPYRE_ERR_NONE;
    case SPYRE_PKT_OP_LAUNCH:
        if (!is_zero(l->reserved, sizeof(l->reserved)) || l->reserved0) {
            return SPYRE_ERR_RESERVED;
        }
        if (le64_to_cpu(l->record) % 8) {
            return SPYRE_ERR_ALIGN;
        }
        return SPYRE_ERR_NONE;
    default:
        return SPYRE_ERR_BAD_OPCODE;
    }
}

/* Engine memory callbacks: every access goes through the packet's context. */
typedef struct SpyreLaunchCtx {
    SpyreQueue *q;
    uint16_t ctx;
    uint32_t epoch;
    SpyreFault f;
} SpyreLaunchCtx;

static int launch_access(void *opaque, uint64_t va, void *buf, uint64_t len,
                         uint64_t *fault_va, bool write)
{
    SpyreLaunchCtx *lc = opaque;
    SpyreQueue *q = lc->q;
    uint8_t *p = buf;

    if (spyre_queue_stale(q, lc->epoch)) {
        *fault_va = va;
        return SPYRE_MMU_FAULT_DMA;     /* reset: end the launch quickly */
    }
    while (len) {
        SpyreSeg seg;
        uint64_t n;

        if (!spyre_mmu_translate(q, lc->ctx, va, write ? SPYRE_ACCESS_WRITE :
                                 SPYRE_ACCESS_READ, SPYRE_SOURCE_PROGRAM,
                                 &seg, &lc->f)) {
            *fault_va = va;
            return SPYRE_FAULT_CAUSE(lc->f.info);
        }
        n = MIN(seg.len, len);
        if (seg.devmem) {
            if (write) {
                memcpy(q->s->mem_ptr + seg.addr, p, n);
                spyre_mem_dirty(q->s, seg.addr, n);
            } else {
                memcpy(p, q->s->mem_ptr + seg.addr, n);
            }
        } else if (!spyre_host_dma(q, seg.addr, p, n, write,
                                   SPYRE_SOURCE_PROGRAM, &lc->f)) {
            *fault_va = va;
            return SPYRE_MMU_FAULT_DMA;
        }
        va += n;
        p += n;
        len -= n;
    }
    return 0;
}

static int launch_read(void *opaque, uint64_t va, void *buf, uint64_t len,
                       uint64_t *fault_va)
{
    return launch_access(opaque, va, buf, len, fault_va, false);
}

static int launch_write(void *opaque, uint64_t va, const void *buf,
                        uint64_t len, uint64_t *fault_va)
{
    return launch_access(opaque, va, (void *)buf, len, fault_va, true);
}

static const struct spyre_engine_mem_ops launch_ops = {
    .read = launch_read,
    .write = launch_write,
};

static bool exec_launch(SpyreQueue *q, const struct spyre_pkt_launch *p,
                        uint32_t epoch, SpyreFault *f)
{
    SpyreState *s = q->s;
    SpyreLaunchCtx lc = { .q = q, .ctx = le16_to_cpu(p->hdr.ctx), .epoch = epoch };
    struct spyre_launch_result res;
    struct spyre_launch_record rec;
    uint64_t record = le64_to_cpu(p->record), fva = 0;
    unsigned i;

    qemu_mutex_lock(&s->engine_lock);
    spyre_engine_launch(s->engine, le64_to_cpu(p->program), le64_to_cpu(p->args),
                        le32_to_cpu(p->core_mask), &launch_ops, &lc, &res);
    qemu_mutex_unlock(&s->engine_lock);
    trace_spyre_launch(q->idx, res.status, res.device_ns, res.insns);
    q->launch_ns = res.device_ns;

    if (record) {
        memset(&rec, 0, sizeof(rec));
        rec.status = cpu_to_le32(res.status);
        rec.fault_core = cpu_to_le32(res.fault_core);
        rec.fault_pc = cpu_to_le32(res.fault_pc);
        rec.cores_run = cpu_to_le32(res.cores_run);
        rec.fault_addr = cpu_to_le64(res.fault_addr);
        rec.device_ns = cpu_to_le64(res.device_ns);
        rec.device_cycles = cpu_to_le64(res.device_cycles);
        rec.insns = cpu_to_le64(res.insns);
        for (i = 0; i < SPYRE_MAX_CORES; i++) {
            rec.core_busy_cycles[i] = cpu_to_le64(res.core_busy_cycles[i]);
        }
        if (launch_access(&lc, record, &rec, sizeof(rec), &fva, true)) {
            *f = lc.f;
            if (!f->error) {
                f->error = SPYRE_ERR_FAULT;
            }
            f->info = SPYRE_FAULT_INFO(lc.ctx, SPYRE_ACCESS_WRITE,
                                       SPYRE_SOURCE_PROGRAM,
                                       SPYRE_FAULT_CAUSE(lc.f.info));
            f->addr = fva;
            return false;
        }
    }
    if (res.status == SPYRE_ENGINE_FAULT_NONE) {
        return true;
    }
    f->error = SPYRE_ERR_ENGINE;
    f->addr = res.fault_addr;
    f->info = SPYRE_FAULT_INFO(lc.ctx, 0, SPYRE_SOURCE_PROGRAM, res.status);
    f->core = res.fault_core;
    f->pc = res.fault_pc;
    return false;
}

/* Execute one packet. Returns false with @f filled when it failed. */
bool spyre_packet_execute(SpyreQueue *q, const uint8_t *raw, uint32_t epoch,
                          unsigned prio, SpyreFault *f)
{
    const struct spyre_pkt_hdr *h = (const void *)raw;
    const struct spyre_pkt_sem *m = (const void *)raw;
    uint64_t v;

    f->error = spyre_packet_validate(raw);
    if (f->error) {
        return false;
    }
    trace_spyre_packet(q->idx, h->opcode, le64_to_cpu(h->seq));
    switch (h->opcode) {
    case SPYRE_PKT_OP_NOP:
        return true;
    case SPYRE_PKT_OP_COPY:
        return exec_copy(q, (const void *)raw, epoch, prio, f);
    case SPYRE_PKT_OP_SIGNAL:
        v = le64_to_cpu(m->value);
        if (!spyre_sem_access(q, m, &v, true, f)) {
            return false;
        }
        if (!q->s->params.timed) {
            spyre_sem_kick_cards(q->s, NULL, 0);
        }
        return true;
    case SPYRE_PKT_OP_WAIT:
        return exec_wait(q, m, epoch, f);
    case SPYRE_PKT_OP_TIMESTAMP:
        v = spyre_clock_ns(q->s);
        return spyre_sem_access(q, m, &v, true, f);
    case SPYRE_PKT_OP_LAUNCH:
        return exec_launch(q, (const void *)raw, epoch, f);
    default:
        g_assert_not_reached();
    }
}

/*
 * ---- A packet's outcome in its queue ----------------------------------------
 *
 * Shared by the queue thread (spyre_queue.c) and timed mode (spyre_timed.c),
 * which fetch and run packets on different timelines but finish them alike.
 */

/* With q->lock held: @q stops on @f, the error of packet @seq (or 0). */
void spyre_queue_fail_locked(SpyreQueue *q, uint64_t seq, const SpyreFault *f)
{
    SpyreState *s = q->s;

    q->status |= SPYRE_QSTAT_ERROR;
    q->error = f->error;
    q->err_seq = seq;
    q->fault_addr = f->addr;
    q->fault_info = f->info;
    q->fault_core = f->error == SPYRE_ERR_ENGINE ? f->core : ~0u;
    q->fault_pc = f->error == SPYRE_ERR_ENGINE ? f->pc : ~0u;
    qatomic_or(&s->err_queues, 1ULL << q->idx);
    trace_spyre_queue_error(q->idx, f->error, seq, f->addr, f->info);
    spyre_raise_irq(s, s->params.queues);
}

/*
 * Before the queue fetches the packet at HEAD, with q->lock held: false if
 * the queue stops instead (its ring overflowed, or an injected hang fired).
 */
bool spyre_queue_may_fetch_locked(SpyreQueue *q)
{
    SpyreFault f = { 0 };

    if (q->tail - q->head > q->size) {
        f.error = SPYRE_ERR_RING_OVERFLOW;
        spyre_queue_fail_locked(q, 0, &f);
        return false;
    }
    if (q->inject & (1u << SPYRE_INJECT_HANG)) {
        q->inject &= ~(1u << SPYRE_INJECT_HANG);
        q->hung = true;
        q->status |= SPYRE_QSTAT_BUSY;
        trace_spyre_inject_fired(q->idx, SPYRE_INJECT_HANG);
        return false;
    }
    return true;
}

/* Write a packet's completion word (its seq; an armed injection garbles it). */
bool spyre_queue_write_completion(SpyreQueue *q, uint64_t compl, uint64_t seq,
                                  SpyreFault *f)
{
    uint64_t le = cpu_to_le64(seq);

    if (spyre_inject_take(q, SPYRE_INJECT_BAD_COMPLETION)) {
        le = cpu_to_le64(seq ^ ~0ULL);
    }
    return spyre_host_dma(q, compl, &le, sizeof(le), true,
                          SPYRE_SOURCE_COMPLETION, f);
}

/*
 * With q->lock held: the packet fetched at @head is done. Move HEAD and DONE
 * on and raise the queue's vector if it asked for one, or stop the queue on
 * its error.
 */
void spyre_queue_finish_locked(SpyreQueue *q, bool ok, uint32_t head,
                               uint64_t seq, uint16_t flags,
                               const SpyreFault *f)
{
    if (!ok) {
        spyre_queue_fail_locked(q, seq, f);
        return;
    }
    q->head = head + 1;
    q->done++;
    trace_spyre_packet_done(q->idx, seq);
    if (flags & SPYRE_PKT_F_IRQ) {
        spyre_raise_irq(q->s, q->idx);
    }
}
