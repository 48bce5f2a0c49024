/*
 * spyre host DMA and the shared DMA engine: every access to host memory a
 * packet makes goes through spyre_host_dma() (which takes injected DMA
 * errors); an operand is walked with a cursor in one of the SPYRE_AS_*
 * spaces (the device MMU for virtual addresses, spyre_mmu.c; device memory;
 * host bus addresses; a host scatter-gather list), in contiguous pieces;
 * spyre_dma_move() moves bytes between two pieces; the queues take turns on
 * the DMA engine in SPYRE_DMA_CHUNK pieces, higher priority first
 * (spyre_arb_acquire()). Called by the packet code (spyre_packet.c), the
 * queue thread and timed mode; calls spyre_mmu.c and spyre_inject.c only.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "exec/memory.h"
#include "trace.h"
#include "spyre_int.h"

bool spyre_host_dma(SpyreQueue *q, uint64_t addr, void *buf, uint64_t len,
                    bool write, unsigned source, SpyreFault *f)
{
    PCIDevice *pdev = PCI_DEVICE(q->s);
    MemTxResult r;

    /* Injected DMA errors hit packet data, not ring or completion traffic. */
    if (source != SPYRE_SOURCE_RING && source != SPYRE_SOURCE_COMPLETION &&
        spyre_inject_take(q, SPYRE_INJECT_DMA_ERROR)) {
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
 * nothing: the caller calls spyre_cursor_advance() with what it used.
 */
bool spyre_cursor_peek(SpyreQueue *q, SpyreCursor *c, uint64_t want,
                       SpyreSeg *seg, SpyreFault *f)
{
    SpyreState *s = q->s;

    if (spyre_inject_take(q, SPYRE_INJECT_PAGE_FAULT)) {
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

            if (!spyre_host_dma(q, c->sge_addr, &e, sizeof(e), false,
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

void spyre_cursor_advance(SpyreCursor *c, uint64_t n)
{
    if (c->space == SPYRE_AS_HOST_SGL) {
        c->sge_cur += n;
        c->sge_left -= n;
    } else {
        c->addr += n;
    }
}

void spyre_cursor_init(SpyreCursor *c, uint8_t space, uint16_t ctx,
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
void spyre_arb_acquire(SpyreState *s, unsigned prio)
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

void spyre_arb_release(SpyreState *s, unsigned prio)
{
    qemu_mutex_lock(&s->arb_lock);
    s->arb_busy = false;
    s->arb_serving[prio]++;
    qemu_cond_broadcast(&s->arb_cond);
    qemu_mutex_unlock(&s->arb_lock);
}

/*
 * The device wrote [addr, addr + len) of device memory through mem_ptr:
 * mark it dirty, so that a live migration sends it again (the memory API
 * does this for accesses it carries; these bypass it). Any thread.
 */
void spyre_mem_dirty(SpyreState *s, uint64_t addr, uint64_t len)
{
    /* A VF's memory is its partition of the PF's. */
    memory_region_set_dirty(s->pf ? &s->pf->mem : &s->mem, s->mem_base + addr,
                            len);
}

/* Move n bytes between two resolved pieces. */
bool spyre_dma_move(SpyreQueue *q, SpyreSeg *src, SpyreSeg *dst, uint64_t n,
                    uint8_t **bounce, SpyreFault *f)
{
    uint8_t *mem = q->s->mem_ptr;
    bool ok;

    if (src->devmem && dst->devmem) {
        memmove(mem + dst->addr, mem + src->addr, n);
        ok = true;
    } else if (!src->devmem && dst->devmem) {
        ok = spyre_host_dma(q, src->addr, mem + dst->addr, n, false,
                            SPYRE_SOURCE_COPY_SRC, f);
    } else if (src->devmem && !dst->devmem) {
        return spyre_host_dma(q, dst->addr, mem + src->addr, n, true,
                              SPYRE_SOURCE_COPY_DST, f);
    } else {
        /* Host to host (possibly through the MMU): via a bounce buffer. */
        if (!*bounce) {
            *bounce = g_malloc(SPYRE_DMA_CHUNK);
        }
        return spyre_host_dma(q, src->addr, *bounce, n, false,
                              SPYRE_SOURCE_COPY_SRC, f) &&
               spyre_host_dma(q, dst->addr, *bounce, n, true,
                              SPYRE_SOURCE_COPY_DST, f);
    }
    /* After the write: a dirty-bitmap sync in between sends it again. */
    spyre_mem_dirty(q->s, dst->addr, n);
    return ok;
}
