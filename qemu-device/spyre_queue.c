/*
 * spyre hardware command queues: one worker thread per queue fetches
 * packets from its ring in host memory, executes them (COPY through the
 * shared DMA engine, SIGNAL/WAIT semaphores, TIMESTAMP, NOP, LAUNCH), writes
 * the completion word and raises the queue's MSI-X vector. Workers never run
 * on the vCPU thread and hold no lock across DMA; a DMA whose target is MMIO
 * takes the BQL inside the memory API (prepare_mmio_access), so nothing may
 * wait for a worker while holding the BQL.
 *
 * Timed mode (timed=on, docs/timed-mode.md) has no workers: each queue's
 * packet runs in the queue's QEMU_CLOCK_VIRTUAL timer callback, under the
 * BQL on the vCPU's timeline, at the virtual time the queue reaches it, and
 * completes at that time plus its modeled duration (the "timed" section).
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

#define SPYRE_DMA_CHUNK     (256 * 1024)
#define SPYRE_WAIT_POLL_MS  1

/* One operand of a packet: an address in one of the SPYRE_AS_* spaces. */
typedef struct SpyreCursor {
    uint8_t space;
    uint16_t ctx;
    uint64_t addr;          /* next address (VIRT/DEVPHYS/HOST) */
    unsigned access;
    unsigned source;
    /* SPYRE_AS_HOST_SGL */
    uint64_t sge_addr;      /* next list entry */
    uint64_t sge_cur;       /* host address inside the current entry */
    uint64_t sge_left;      /* bytes left in the current entry */
} SpyreCursor;

static bool queue_stale(SpyreQueue *q, uint32_t epoch)
{
    return qatomic_read(&q->epoch) != epoch;
}

/* Consume one armed injection of @kind on @q, if any. */
static bool inject_take(SpyreQueue *q, unsigned kind)
{
    bool hit;

    qemu_mutex_lock(&q->lock);
    hit = q->inject & (1u << kind);
    q->inject &= ~(1u << kind);
    qemu_mutex_unlock(&q->lock);
    if (hit) {
        trace_spyre_inject_fired(q->idx, kind);
    }
    return hit;
}

static bool host_dma(SpyreQueue *q, uint64_t addr, void *buf, uint64_t len,
                     bool write, unsigned source, SpyreFault *f)
{
    PCIDevice *pdev = PCI_DEVICE(q->s);
    MemTxResult r;

    /* Injected DMA errors hit packet data, not ring or completion traffic. */
    if (source != SPYRE_SOURCE_RING && source != SPYRE_SOURCE_COMPLETION &&
        inject_take(q, SPYRE_INJECT_DMA_ERROR)) {
        r = MEMTX_ERROR;
    } else if (write) {
        r = pci_dma_write(pdev, addr, buf, len);
    } else {
        r = pci_dma_read(pdev, addr, buf, len);
    }
    if (r != MEMTX_OK) {
        f->error = SPYRE_ERR_DMA;
        f->addr = addr;
        f->info = SPYRE_FAULT_INFO(0, write ? SPYRE_ACCESS_WRITE :
                                   SPYRE_ACCESS_READ, source,
                                   SPYRE_MMU_FAULT_DMA);
        return false;
    }
    return true;
}

/*
 * Resolve the next contiguous piece of @c, at most @want bytes. Advances
 * nothing: the caller calls cursor_advance() with what it used.
 */
static bool cursor_peek(SpyreQueue *q, SpyreCursor *c, uint64_t want,
                        SpyreSeg *seg, SpyreFault *f)
{
    SpyreState *s = q->s;

    if (inject_take(q, SPYRE_INJECT_PAGE_FAULT)) {
        f->error = SPYRE_ERR_FAULT;
        f->addr = c->addr;
        f->info = SPYRE_FAULT_INFO(c->ctx, c->access, c->source,
                                   SPYRE_MMU_FAULT_NOT_PRESENT);
        return false;
    }

    switch (c->space) {
    case SPYRE_AS_VIRT:
        if (!spyre_mmu_translate(q, c->ctx, c->addr, c->access, c->source,
                                 seg, f)) {
            return false;
        }
        break;
    case SPYRE_AS_DEVPHYS:
        if (c->addr >= s->params.mem_size) {
            f->error = SPYRE_ERR_FAULT;
            f->addr = c->addr;
            f->info = SPYRE_FAULT_INFO(c->ctx, c->access, c->source,
                                       SPYRE_MMU_FAULT_RANGE);
            return false;
        }
        seg->devmem = true;
        seg->addr = c->addr;
        seg->len = s->params.mem_size - c->addr;
        break;
    case SPYRE_AS_HOST:
        seg->devmem = false;
        seg->addr = c->addr;
        seg->len = want;
        break;
    case SPYRE_AS_HOST_SGL:
        while (!c->sge_left) {
            struct spyre_sge e;

            if (!host_dma(q, c->sge_addr, &e, sizeof(e), false,
                          SPYRE_SOURCE_SGL, f)) {
                return false;
            }
            if (!le64_to_cpu(e.len)) {
                f->error = SPYRE_ERR_SGL;
                f->addr = c->sge_addr;
                f->info = SPYRE_FAULT_INFO(0, SPYRE_ACCESS_READ,
                                           SPYRE_SOURCE_SGL, 0);
                return false;
            }
            c->sge_addr += sizeof(e);
            c->sge_cur = le64_to_cpu(e.addr);
            c->sge_left = le64_to_cpu(e.len);
        }
        seg->devmem = false;
        seg->addr = c->sge_cur;
        seg->len = c->sge_left;
        break;
    default:
        g_assert_not_reached();     /* validated before execution */
    }
    seg->len = MIN(seg->len, want);
    return true;
}

static void cursor_advance(SpyreCursor *c, uint64_t n)
{
    if (c->space == SPYRE_AS_HOST_SGL) {
        c->sge_cur += n;
        c->sge_left -= n;
    } else {
        c->addr += n;
    }
}

static void cursor_init(SpyreCursor *c, uint8_t space, uint16_t ctx,
                        uint64_t addr, unsigned access, unsigned source)
{
    memset(c, 0, sizeof(*c));
    c->space = space;
    c->ctx = ctx;
    c->addr = addr;
    c->sge_addr = addr;
    c->access = access;
    c->source = source;
}

/* The shared DMA engine: priority first, then first come first served. */
static void arb_acquire(SpyreState *s, unsigned prio)
{
    uint64_t ticket;
    unsigned p;
    bool blocked;

    qemu_mutex_lock(&s->arb_lock);
    ticket = s->arb_next[prio]++;
    for (;;) {
        blocked = s->arb_busy || s->arb_serving[prio] != ticket;
        for (p = prio + 1; p <= SPYRE_QCTRL_MAX_PRIO && !blocked; p++) {
            blocked = s->arb_next[p] != s->arb_serving[p];
        }
        if (!blocked) {
            break;
        }
        qemu_cond_wait(&s->arb_cond, &s->arb_lock);
    }
    s->arb_busy = true;
    qemu_mutex_unlock(&s->arb_lock);
}

static void arb_release(SpyreState *s, unsigned prio)
{
    qemu_mutex_lock(&s->arb_lock);
    s->arb_busy = false;
    s->arb_serving[prio]++;
    qemu_cond_broadcast(&s->arb_cond);
    qemu_mutex_unlock(&s->arb_lock);
}

/* Move n bytes between two resolved pieces. */
static bool move(SpyreQueue *q, SpyreSeg *src, SpyreSeg *dst, uint64_t n,
                 uint8_t **bounce, SpyreFault *f)
{
    uint8_t *mem = q->s->mem_ptr;

    if (src->devmem && dst->devmem) {
        memmove(mem + dst->addr, mem + src->addr, n);
        return true;
    }
    if (!src->devmem && dst->devmem) {
        return host_dma(q, src->addr, mem + dst->addr, n, false,
                        SPYRE_SOURCE_COPY_SRC, f);
    }
    if (src->devmem && !dst->devmem) {
        return host_dma(q, dst->addr, mem + src->addr, n, true,
                        SPYRE_SOURCE_COPY_DST, f);
    }
    /* Host to host (possibly through the MMU): via a bounce buffer. */
    if (!*bounce) {
        *bounce = g_malloc(SPYRE_DMA_CHUNK);
    }
    return host_dma(q, src->addr, *bounce, n, false, SPYRE_SOURCE_COPY_SRC, f) &&
           host_dma(q, dst->addr, *bounce, n, true, SPYRE_SOURCE_COPY_DST, f);
}

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
    cursor_init(&src, p->src_space, ctx, le64_to_cpu(p->src),
                SPYRE_ACCESS_READ, SPYRE_SOURCE_COPY_SRC);
    cursor_init(&dst, p->dst_space, ctx, le64_to_cpu(p->dst),
                SPYRE_ACCESS_WRITE, SPYRE_SOURCE_COPY_DST);

    while (left && ok) {
        uint64_t chunk = MIN(left, SPYRE_DMA_CHUNK);

        if (queue_stale(q, epoch)) {
            ok = false;     /* reset: abandon, the caller discards */
            break;
        }
        arb_acquire(s, prio);
        while (chunk) {
            SpyreSeg a, b;
            uint64_t n;

            if (!cursor_peek(q, &src, chunk, &a, f) ||
                !cursor_peek(q, &dst, chunk, &b, f)) {
                ok = false;
                break;
            }
            n = MIN(a.len, b.len);
            if (!move(q, &a, &b, n, &bounce, f)) {
                ok = false;
                break;
            }
            if (a.devmem && b.devmem) {
                q->moved_mem += n;
            } else {
                q->moved_link += n;
            }
            cursor_advance(&src, n);
            cursor_advance(&dst, n);
            chunk -= n;
            left -= n;
        }
        arb_release(s, prio);
    }
    g_free(bounce);
    return ok;
}

/* Read or write the 8-byte semaphore a SIGNAL/WAIT/TIMESTAMP names. */
static bool sem_access(SpyreQueue *q, const struct spyre_pkt_sem *p,
                       uint64_t *val, bool write, SpyreFault *f)
{
    SpyreCursor c;
    SpyreSeg seg;
    uint64_t le;

    cursor_init(&c, p->space, le16_to_cpu(p->hdr.ctx), le64_to_cpu(p->addr),
                write ? SPYRE_ACCESS_WRITE : SPYRE_ACCESS_READ,
                SPYRE_SOURCE_SEMAPHORE);
    if (!cursor_peek(q, &c, 8, &seg, f)) {
        return false;
    }
    if (seg.devmem) {
        uint64_t *ptr = (uint64_t *)(q->s->mem_ptr + seg.addr);

        if (write) {
            qatomic_set(ptr, cpu_to_le64(*val));
        } else {
            *val = le64_to_cpu(qatomic_read(ptr));
        }
        return true;
    }
    if (write) {
        le = cpu_to_le64(*val);
        return host_dma(q, seg.addr, &le, 8, true, SPYRE_SOURCE_SEMAPHORE, f);
    }
    if (!host_dma(q, seg.addr, &le, 8, false, SPYRE_SOURCE_SEMAPHORE, f)) {
        return false;
    }
    *val = le64_to_cpu(le);
    return true;
}

static void sem_kick(SpyreState *s)
{
    qemu_mutex_lock(&s->sem_lock);
    s->sem_gen++;
    qemu_cond_broadcast(&s->sem_cond);
    qemu_mutex_unlock(&s->sem_lock);
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
        if (!sem_access(q, p, &cur, false, f)) {
            ok = false;
            break;
        }
        if (cur >= want) {
            break;
        }
        if (queue_stale(q, epoch) || qatomic_read(&q->quit)) {
            ok = false;
            break;
        }
        /* Device SIGNALs wake us at once; host writes are polled. */
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
static uint32_t validate(const uint8_t *raw)
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

    if (queue_stale(q, lc->epoch)) {
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
            } else {
                memcpy(p, q->s->mem_ptr + seg.addr, n);
            }
        } else if (!host_dma(q, seg.addr, p, n, write, SPYRE_SOURCE_PROGRAM,
                             &lc->f)) {
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
static bool execute(SpyreQueue *q, const uint8_t *raw, uint32_t epoch,
                    unsigned prio, SpyreFault *f)
{
    const struct spyre_pkt_hdr *h = (const void *)raw;
    const struct spyre_pkt_sem *m = (const void *)raw;
    uint64_t v;

    f->error = validate(raw);
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
        if (!sem_access(q, m, &v, true, f)) {
            return false;
        }
        sem_kick(q->s);
        return true;
    case SPYRE_PKT_OP_WAIT:
        return exec_wait(q, m, epoch, f);
    case SPYRE_PKT_OP_TIMESTAMP:
        v = spyre_clock_ns(q->s);
        return sem_access(q, m, &v, true, f);
    case SPYRE_PKT_OP_LAUNCH:
        return exec_launch(q, (const void *)raw, epoch, f);
    default:
        g_assert_not_reached();
    }
}

static void queue_fail_locked(SpyreQueue *q, uint64_t seq, const SpyreFault *f)
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

        /* Timed mode: the queue's timer runs its packets (see below). */
        if (s->params.timed || !(q->status & SPYRE_QSTAT_ENABLED) ||
            (q->status & SPYRE_QSTAT_ERROR) || q->hung || q->head == q->tail) {
            qemu_cond_wait(&q->cond, &q->lock);
            continue;
        }
        if (q->tail - q->head > q->size) {
            f.error = SPYRE_ERR_RING_OVERFLOW;
            queue_fail_locked(q, 0, &f);
            continue;
        }
        if (q->inject & (1u << SPYRE_INJECT_HANG)) {
            q->inject &= ~(1u << SPYRE_INJECT_HANG);
            q->hung = true;
            q->status |= SPYRE_QSTAT_BUSY;
            trace_spyre_inject_fired(q->idx, SPYRE_INJECT_HANG);
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
        ok = host_dma(q, base, raw, sizeof(raw), false, SPYRE_SOURCE_RING, &f);
        seq = le64_to_cpu(h->seq);
        flags = le16_to_cpu(h->flags);
        ok = ok && execute(q, raw, epoch, prio, &f);
        if (ok && compl && !queue_stale(q, epoch)) {
            uint64_t le = cpu_to_le64(seq);

            if (inject_take(q, SPYRE_INJECT_BAD_COMPLETION)) {
                le = cpu_to_le64(seq ^ ~0ULL);
            }
            ok = host_dma(q, compl, &le, sizeof(le), true,
                          SPYRE_SOURCE_COMPLETION, &f);
        }

        qemu_mutex_lock(&q->lock);
        q->status &= ~SPYRE_QSTAT_BUSY;
        if (q->epoch != epoch) {
            continue;       /* the queue was reset meanwhile */
        }
        if (!ok) {
            queue_fail_locked(q, seq, &f);
            continue;
        }
        q->head = head + 1;
        q->done++;
        trace_spyre_packet_done(q->idx, seq);
        if (flags & SPYRE_PKT_F_IRQ) {
            spyre_raise_irq(s, q->idx);
        }
    }
    qemu_mutex_unlock(&q->lock);
    rcu_unregister_thread();
    return NULL;
}

/*
 * ---- Timed mode --------------------------------------------------------------
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
 *           device SIGNAL, or at re-reads wait-poll-ns, 2x, 4x, ... (at most
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

/* A device SIGNAL at @now: every WAIT re-reads its semaphore then. */
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

    ok = sem_access(q, m, &cur, false, &f);
    if (queue_stale(q, epoch)) {
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
    if (q->tail - q->head > q->size) {
        f.error = SPYRE_ERR_RING_OVERFLOW;
        queue_fail_locked(q, 0, &f);
        qemu_mutex_unlock(&q->lock);
        return;
    }
    if (q->inject & (1u << SPYRE_INJECT_HANG)) {
        q->inject &= ~(1u << SPYRE_INJECT_HANG);
        q->hung = true;
        q->status |= SPYRE_QSTAT_BUSY;
        trace_spyre_inject_fired(q->idx, SPYRE_INJECT_HANG);
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
    ok = host_dma(q, base, q->t_raw, sizeof(q->t_raw), false,
                  SPYRE_SOURCE_RING, &f);
    valid = ok && validate(q->t_raw) == SPYRE_ERR_NONE;
    if (valid && h->opcode == SPYRE_PKT_OP_WAIT) {
        trace_spyre_packet(q->idx, h->opcode, le64_to_cpu(h->seq));
    } else {
        ok = ok && execute(q, q->t_raw, epoch, prio, &f);
    }
    q->t_running = false;
    if (queue_stale(q, epoch)) {
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
        timed_wake_waiters(s, now);
    }
    trace_spyre_timed(q->idx, h->opcode, le64_to_cpu(h->seq), now, start,
                      done);
    timed_finish(q, ok, &f, done);
}

/* The packet's completion time has come: write it out, as a worker would. */
static void timed_publish(SpyreQueue *q)
{
    SpyreState *s = q->s;
    const struct spyre_pkt_hdr *h = (const void *)q->t_raw;
    uint64_t seq = le64_to_cpu(h->seq);
    uint16_t flags = le16_to_cpu(h->flags);
    uint32_t epoch = qatomic_read(&q->epoch);
    SpyreFault f = q->t_fault;
    bool ok = q->t_ok;

    if (ok && q->t_compl) {
        uint64_t le = cpu_to_le64(seq);

        if (inject_take(q, SPYRE_INJECT_BAD_COMPLETION)) {
            le = cpu_to_le64(seq ^ ~0ULL);
        }
        ok = host_dma(q, q->t_compl, &le, sizeof(le), true,
                      SPYRE_SOURCE_COMPLETION, &f);
    }
    if (queue_stale(q, epoch)) {
        return;
    }
    q->t_phase = SPYRE_T_IDLE;
    qemu_mutex_lock(&q->lock);
    q->status &= ~SPYRE_QSTAT_BUSY;
    if (!ok) {
        queue_fail_locked(q, seq, &f);
    } else {
        q->head = q->t_head + 1;
        q->done++;
        trace_spyre_packet_done(q->idx, seq);
        if (flags & SPYRE_PKT_F_IRQ) {
            spyre_raise_irq(s, q->idx);
        }
    }
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
        /* A pending completion is dropped; its work was already done. */
        timer_del(q->t_timer);
        q->t_phase = SPYRE_T_IDLE;
        if (!q->t_running) {
            q->status = 0;
        }
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
    sem_kick(q->s);
    trace_spyre_queue_reset(q->idx);
}

static void queue_start_locked(SpyreQueue *q)
{
    SpyreFault f = { .error = SPYRE_ERR_RING_CONFIG };

    if (!q->base || q->base % SPYRE_PKT_SIZE || q->size < 2 ||
        q->size > SPYRE_Q_SIZE_MAX || !is_power_of_2(q->size)) {
        SPYRE_GUEST_ERR("queue %u: enable with bad ring base 0x%" PRIx64
                        " / size %u", q->idx, q->base, q->size);
        queue_fail_locked(q, 0, &f);
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

void spyre_inject(SpyreState *s, uint32_t val)
{
    unsigned qi = (val >> 8) & 0xff, kind = val & 0xff, i;

    if (kind == SPYRE_INJECT_NONE) {
        for (i = 0; i < s->params.queues; i++) {
            qemu_mutex_lock(&s->queues[i].lock);
            s->queues[i].inject = 0;
            qemu_mutex_unlock(&s->queues[i].lock);
        }
        return;
    }
    if (qi >= s->params.queues || kind >= SPYRE_INJECT_KINDS || val >> 16) {
        SPYRE_GUEST_ERR("INJECT: bad value 0x%x", val);
        return;
    }
    qemu_mutex_lock(&s->queues[qi].lock);
    s->queues[qi].inject |= 1u << kind;
    qemu_cond_broadcast(&s->queues[qi].cond);
    qemu_mutex_unlock(&s->queues[qi].lock);
    trace_spyre_inject_armed(qi, kind);
}

uint32_t spyre_inject_armed(SpyreState *s)
{
    uint32_t v = 0;
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        qemu_mutex_lock(&s->queues[i].lock);
        v |= s->queues[i].inject;
        qemu_mutex_unlock(&s->queues[i].lock);
    }
    return v;
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
            q->t_timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, timed_cb, q);
        }
        snprintf(name, sizeof(name), "spyre-q%u", i);
        qemu_thread_create(&q->thread, name, queue_thread, q,
                           QEMU_THREAD_JOINABLE);
    }
}

void spyre_queues_fini(SpyreState *s)
{
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];

        qemu_mutex_lock(&q->lock);
        q->quit = true;
        q->epoch++;
        qemu_cond_broadcast(&q->cond);
        qemu_mutex_unlock(&q->lock);
    }
    sem_kick(s);
    /* Workers may be waiting for the BQL inside a DMA: let them finish. */
    qemu_mutex_unlock_iothread();
    for (i = 0; i < s->params.queues; i++) {
        qemu_thread_join(&s->queues[i].thread);
    }
    qemu_mutex_lock_iothread();
    for (i = 0; i < s->params.queues; i++) {
        if (s->queues[i].t_timer) {
            timer_free(s->queues[i].t_timer);
            s->queues[i].t_timer = NULL;
        }
        qemu_mutex_destroy(&s->queues[i].lock);
        qemu_cond_destroy(&s->queues[i].cond);
    }
    qemu_mutex_destroy(&s->sem_lock);
    qemu_cond_destroy(&s->sem_cond);
    qemu_mutex_destroy(&s->arb_lock);
    qemu_cond_destroy(&s->arb_cond);
}
