/*
 * spyre device MMU: per-context page tables in host memory, walked on a
 * miss; each queue caches translations in its own small TLB, which is
 * dropped when the MMU generation changes (SPYRE_REG_MMU_INVALIDATE, reset).
 *
 * Page-table format: docs/spyre-device.md, "Device MMU".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/bswap.h"
#include "qemu/log.h"
#include "trace.h"
#include "spyre_int.h"

static void mmu_fault(SpyreFault *f, uint64_t va, uint16_t ctx,
                      unsigned access, unsigned source, unsigned cause)
{
    f->error = SPYRE_ERR_FAULT;
    f->addr = va;
    f->info = SPYRE_FAULT_INFO(ctx, access, source, cause);
    trace_spyre_mmu_fault(ctx, va, access, source, cause);
}

static bool read_entry(SpyreQueue *q, uint64_t addr, uint64_t *val)
{
    uint64_t le;

    if (pci_dma_read(PCI_DEVICE(q->s), addr, &le, sizeof(le)) != MEMTX_OK) {
        return false;
    }
    *val = le64_to_cpu(le);
    return true;
}

/*
 * Translate @va of context @ctx for @access (SPYRE_ACCESS_*). On success
 * @seg holds where the VA lands and how many bytes stay contiguous from it
 * (to the end of the page). On failure @f says why.
 */
bool spyre_mmu_translate(SpyreQueue *q, uint16_t ctx, uint64_t va,
                         unsigned access, unsigned source, SpyreSeg *seg,
                         SpyreFault *f)
{
    SpyreState *s = q->s;
    uint32_t gen = qatomic_read(&s->mmu_gen);
    uint64_t tag = ((uint64_t)ctx << 32 | (va >> SPYRE_PAGE_SHIFT)) + 1;
    SpyreTLBEntry *e = &q->tlb[(va >> SPYRE_PAGE_SHIFT) % SPYRE_TLB_ENTRIES];
    uint64_t entry, table, pte = 0, page_size = SPYRE_PAGE_SIZE, off;
    unsigned level;

    if (va >= SPYRE_MMU_VA_SIZE) {
        mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_RANGE);
        return false;
    }
    if (q->tlb_gen != gen) {
        memset(q->tlb, 0, sizeof(q->tlb));
        q->tlb_gen = gen;
    }

    /*
     * The page size too: an entry a failed incoming migration left half
     * loaded is a miss, never a translation past device memory.
     */
    if (e->tag == tag && (e->page_size == SPYRE_PAGE_SIZE ||
                          e->page_size == SPYRE_HUGE_PAGE_SIZE)) {
        pte = e->pte;
        page_size = e->page_size;
    } else {
        if (ctx >= qatomic_read(&s->ctx_count) ||
            !read_entry(q, qatomic_read(&s->ctx_table) + ctx * 8ULL, &entry) ||
            !(entry & SPYRE_CTX_VALID)) {
            mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_BAD_CTX);
            return false;
        }
        table = entry & SPYRE_PTE_ADDR_MASK;
        for (level = 0; level < 3; level++) {
            uint64_t idx = SPYRE_PT_INDEX(va, level);

            if (!read_entry(q, table + idx * sizeof(uint64_t), &pte)) {
                mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_WALK);
                return false;
            }
            if (!(pte & SPYRE_PTE_VALID)) {
                mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_NOT_PRESENT);
                return false;
            }
            if (level == 1 && (pte & SPYRE_PTE_LEAF)) {
                page_size = SPYRE_HUGE_PAGE_SIZE;
                break;
            }
            if (level < 2) {
                table = pte & SPYRE_PTE_ADDR_MASK;
            }
        }
        /* Keyed by the 4 KiB page even inside a huge page: still exact. */
        e->tag = tag;
        e->pte = pte;
        e->page_size = page_size;
    }

    if ((access == SPYRE_ACCESS_READ && !(pte & SPYRE_PTE_READ)) ||
        (access == SPYRE_ACCESS_WRITE && !(pte & SPYRE_PTE_WRITE))) {
        mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_PERMISSION);
        return false;
    }
    off = va & (page_size - 1);
    seg->devmem = !!(pte & SPYRE_PTE_DEVMEM);
    seg->addr = ((pte & SPYRE_PTE_ADDR_MASK) & ~(page_size - 1)) + off;
    seg->len = page_size - off;
    if (seg->devmem && seg->addr + seg->len > s->params.mem_size) {
        mmu_fault(f, va, ctx, access, source, SPYRE_MMU_FAULT_RANGE);
        return false;
    }
    return true;
}
