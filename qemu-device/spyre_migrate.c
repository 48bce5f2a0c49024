/*
 * spyre migration (docs/spyre-device.md, "Migration"): the device's state
 * as vmstate, device memory as a RAM block of the VM (spyre.c registers it;
 * the device marks what it writes dirty, spyre_mem_dirty()), and the work in
 * flight brought to a point that is exactly resumable when the VM stops:
 *
 *   functional mode: a VM change state handler pauses the queues
 *   (spyre_queues_pause()): no packet is fetched any more, the packet each
 *   worker runs finishes and is published (a WAIT gives way and runs again
 *   from the start), pending interrupts are sent. What is saved is then the
 *   registers and rings alone: the packets from HEAD to TAIL are all still
 *   to run, and the destination's workers run them when its VM starts.
 *
 *   timed mode: packets run in virtual-clock timers, which stand still with
 *   the VM; the timeline migrates as it stands (the phase, the packet
 *   fetched and its outcome, its completion time, the timer's deadline), and
 *   so does the virtual clock, so the destination completes the packet at
 *   the same virtual ns.
 *
 * An incoming stream is checked field by field before anything of it is
 * used (spyre_post_load()): a stream no device could have written fails the
 * load with a message naming the field; it never reaches a worker, a timer
 * or an index.
 *
 * Called by spyre.c; calls spyre_queue.c, spyre_timed.c, spyre_packet.c and
 * spyre_irq.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "hw/pci/msix.h"
#include "migration/vmstate.h"
#include "trace.h"
#include "spyre_int.h"

/*
 * The properties both ends must agree on, by field of SpyreParams (the
 * property's name with '-' for '_'). engine-threads is the emulator's own
 * business: results and modeled times do not depend on it.
 */
#define SPYRE_MIG_PARAMS_U32(X) \
    X(cores) X(queues) X(clock_mhz) X(dma_mbps) X(dma_latency_ns) \
    X(mem_copy_mbps) X(wait_poll_ns) X(lpddr_mbps) X(dma_burst_bytes) \
    X(dma_burst_overhead_bytes) X(ring_bytes_per_cycle) X(ring_hop_cycles)
#define SPYRE_MIG_PARAMS_U64(X) X(scratchpad_size) X(mem_size)

#define SPYRE_MIG_F32(n) VMSTATE_UINT32(n, SpyreParams),
#define SPYRE_MIG_F64(n) VMSTATE_UINT64(n, SpyreParams),

static const VMStateDescription vmstate_spyre_params = {
    .name = "spyre/params",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (VMStateField[]) {
        SPYRE_MIG_PARAMS_U32(SPYRE_MIG_F32)
        SPYRE_MIG_PARAMS_U64(SPYRE_MIG_F64)
        VMSTATE_BOOL(timed, SpyreParams),
        VMSTATE_END_OF_LIST()
    }
};

static void spyre_mig_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Why an incoming stream was refused: on stderr and in the trace. */
static void spyre_mig_error(const char *fmt, ...)
{
    va_list ap;
    char *msg;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    trace_spyre_migrate_refused(msg);
    error_report("spyre: migration stream refused: %s", msg);
    g_free(msg);
}

static bool spyre_param_match(const char *field, uint64_t theirs,
                              uint64_t ours)
{
    g_autofree char *prop = g_strdelimit(g_strdup(field), "_", '-');

    if (theirs == ours) {
        return true;
    }
    spyre_mig_error("it comes from a card with %s=%" PRIu64 ", this card "
                    "has %s=%" PRIu64 " (both ends need the same properties)",
                    prop, theirs, prop, ours);
    return false;
}

/* VMSTATE_VALIDATE: before the queues are loaded (their count is ours). */
static bool spyre_params_match(void *opaque, int version_id)
{
    SpyreState *s = opaque;
    const SpyreParams *a = &s->mig_params, *b = &s->params;

#define SPYRE_MIG_CMP(n) \
    if (!spyre_param_match(#n, a->n, b->n)) { \
        return false; \
    }
    SPYRE_MIG_PARAMS_U32(SPYRE_MIG_CMP)
    SPYRE_MIG_PARAMS_U64(SPYRE_MIG_CMP)
    SPYRE_MIG_CMP(timed)
#undef SPYRE_MIG_CMP
    return true;
}

static const VMStateDescription vmstate_spyre_tlb = {
    .name = "spyre/tlb",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (VMStateField[]) {
        VMSTATE_UINT64(tag, SpyreTLBEntry),
        VMSTATE_UINT64(pte, SpyreTLBEntry),
        VMSTATE_UINT64(page_size, SpyreTLBEntry),
        VMSTATE_END_OF_LIST()
    }
};

static const VMStateDescription vmstate_spyre_fault = {
    .name = "spyre/fault",
    .version_id = 1,
    .minimum_version_id = 1,
    .fields = (VMStateField[]) {
        VMSTATE_UINT32(error, SpyreFault),
        VMSTATE_UINT64(addr, SpyreFault),
        VMSTATE_UINT32(info, SpyreFault),
        VMSTATE_UINT32(core, SpyreFault),
        VMSTATE_UINT32(pc, SpyreFault),
        VMSTATE_END_OF_LIST()
    }
};

/* Armed fault injections and a fired hang: only sent when there are any. */
static bool spyre_queue_inject_needed(void *opaque)
{
    SpyreQueue *q = opaque;

    return q->inject || q->hung;
}

static const VMStateDescription vmstate_spyre_queue_inject = {
    .name = "spyre/queue/inject",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = spyre_queue_inject_needed,
    .fields = (VMStateField[]) {
        VMSTATE_UINT32(inject, SpyreQueue),
        VMSTATE_BOOL(hung, SpyreQueue),
        VMSTATE_END_OF_LIST()
    }
};

static bool spyre_queue_timed_needed(void *opaque)
{
    SpyreQueue *q = opaque;

    return q->s->params.timed;
}

static const VMStateDescription vmstate_spyre_queue_timed = {
    .name = "spyre/queue/timed",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = spyre_queue_timed_needed,
    .fields = (VMStateField[]) {
        VMSTATE_UINT32(t_phase, SpyreQueue),
        VMSTATE_BOOL(t_ok, SpyreQueue),
        VMSTATE_STRUCT(t_fault, SpyreQueue, 1, vmstate_spyre_fault,
                       SpyreFault),
        VMSTATE_INT64(t_done, SpyreQueue),
        VMSTATE_UINT32(t_poll_ns, SpyreQueue),
        VMSTATE_UINT64(t_compl, SpyreQueue),
        VMSTATE_UINT32(t_head, SpyreQueue),
        VMSTATE_UINT8_ARRAY(t_raw, SpyreQueue, SPYRE_PKT_SIZE),
        VMSTATE_INT64(t_expire, SpyreQueue),
        VMSTATE_END_OF_LIST()
    }
};

static int spyre_queue_pre_save(void *opaque)
{
    SpyreQueue *q = opaque;

    q->t_expire = q->s->params.timed ? spyre_timed_expire(q) : -1;
    return 0;
}

static int spyre_queue_pre_load(void *opaque)
{
    SpyreQueue *q = opaque;

    /* What a stream without the subsections means. */
    q->inject = 0;
    q->hung = false;
    q->t_phase = SPYRE_T_IDLE;
    q->t_expire = -1;
    return 0;
}

static const VMStateDescription vmstate_spyre_queue = {
    .name = "spyre/queue",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = spyre_queue_pre_save,
    .pre_load = spyre_queue_pre_load,
    .fields = (VMStateField[]) {
        VMSTATE_UINT64(base, SpyreQueue),
        VMSTATE_UINT32(size, SpyreQueue),
        VMSTATE_UINT32(ctrl, SpyreQueue),
        VMSTATE_UINT32(head, SpyreQueue),
        VMSTATE_UINT32(tail, SpyreQueue),
        VMSTATE_UINT64(compl_addr, SpyreQueue),
        VMSTATE_UINT32(status, SpyreQueue),
        VMSTATE_UINT32(error, SpyreQueue),
        VMSTATE_UINT64(err_seq, SpyreQueue),
        VMSTATE_UINT64(fault_addr, SpyreQueue),
        VMSTATE_UINT32(fault_info, SpyreQueue),
        VMSTATE_UINT32(fault_core, SpyreQueue),
        VMSTATE_UINT32(fault_pc, SpyreQueue),
        VMSTATE_UINT32(done, SpyreQueue),
        VMSTATE_STRUCT_ARRAY(tlb, SpyreQueue, SPYRE_TLB_ENTRIES, 1,
                             vmstate_spyre_tlb, SpyreTLBEntry),
        VMSTATE_UINT32(tlb_gen, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * []) {
        &vmstate_spyre_queue_inject,
        &vmstate_spyre_queue_timed,
        NULL
    }
};

/* Packets submitted and not yet completed on @q (what a resume runs). */
static uint32_t spyre_queue_pending(const SpyreQueue *q)
{
    if (!(q->status & SPYRE_QSTAT_ENABLED) || (q->status & SPYRE_QSTAT_ERROR)) {
        return 0;
    }
    return MIN(q->tail - q->head, q->size);
}

/* What is in flight, in the trace: per queue, and the whole card. */
static void spyre_trace_in_flight(SpyreState *s, const char *side)
{
    uint32_t pending = 0, queues = 0;
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];
        uint32_t n = spyre_queue_pending(q);

        if (n || (q->status & SPYRE_QSTAT_BUSY)) {
            trace_spyre_migrate_queue(side, i, q->head, q->tail, q->status,
                                      q->t_phase);
            queues++;
            pending += n;
        }
    }
    trace_spyre_migrate_in_flight(side, queues, pending);
}

static int spyre_pre_save(void *opaque)
{
    SpyreState *s = opaque;

    s->mig_params = s->params;
    s->mig_clock_ns = spyre_clock_ns(s);
    spyre_trace_in_flight(s, "save");
    return 0;
}

static bool spyre_queue_check(SpyreState *s, SpyreQueue *q)
{
    const uint32_t known = SPYRE_QSTAT_ENABLED | SPYRE_QSTAT_BUSY |
                           SPYRE_QSTAT_WAITING | SPYRE_QSTAT_ERROR;
    char *why = NULL;
    unsigned i;

    if (q->ctrl & ~(SPYRE_QCTRL_ENABLE | SPYRE_QCTRL_PRIO_MASK)) {
        why = g_strdup_printf("CTRL 0x%x", q->ctrl);
    } else if (q->status & ~known) {
        why = g_strdup_printf("STATUS 0x%x", q->status);
    } else if (q->error >= SPYRE_ERR_COUNT) {
        why = g_strdup_printf("ERROR %u", q->error);
    } else if ((q->status & SPYRE_QSTAT_ENABLED) &&
               !(q->status & SPYRE_QSTAT_ERROR) && !spyre_queue_ring_ok(q)) {
        why = g_strdup_printf("enabled on ring base 0x%" PRIx64 " size %u",
                              q->base, q->size);
    } else if (q->inject >> SPYRE_INJECT_KINDS) {
        why = g_strdup_printf("injections 0x%x", q->inject);
    } else if (q->hung && !(q->status & SPYRE_QSTAT_BUSY)) {
        why = g_strdup_printf("hung with STATUS 0x%x", q->status);
    } else if (!s->params.timed &&
               (q->status & (SPYRE_QSTAT_WAITING | SPYRE_QSTAT_BUSY)) &&
               !q->hung) {
        /* Functional mode saves queues between packets only. */
        why = g_strdup_printf("STATUS 0x%x between packets", q->status);
    } else if (s->params.timed && !spyre_timed_check(q, &why)) {
        /* why is set */
    } else {
        for (i = 0; i < SPYRE_TLB_ENTRIES; i++) {
            SpyreTLBEntry *e = &q->tlb[i];

            if (e->tag && e->page_size != SPYRE_PAGE_SIZE &&
                e->page_size != SPYRE_HUGE_PAGE_SIZE) {
                why = g_strdup_printf("TLB entry %u page size 0x%" PRIx64, i,
                                      e->page_size);
                break;
            }
        }
    }
    if (why) {
        spyre_mig_error("queue %u: %s", q->idx, why);
        g_free(why);
        return false;
    }
    return true;
}

/*
 * A refused load leaves the card idle, as a reset would, whatever the stream
 * wrote: a failed loadvm keeps the QEMU process, and its VM may run again.
 */
static int spyre_refuse_load(SpyreState *s)
{
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        SpyreQueue *q = &s->queues[i];

        q->status = 0;
        q->ctrl = 0;
        q->inject = 0;
        q->hung = false;
        q->t_phase = SPYRE_T_IDLE;
        q->t_expire = -1;
        if (s->params.timed) {
            spyre_timed_restore(q);     /* no timer armed */
        }
        memset(q->tlb, 0, sizeof(q->tlb));
        q->tlb_gen = 0;
    }
    s->window_base = 0;
    memory_region_set_alias_offset(&s->window, 0);
    s->ctx_count = 0;
    s->err_queues = 0;
    s->irq_pending[0] = s->irq_pending[1] = 0;
    qatomic_inc(&s->mmu_gen);
    return -EINVAL;
}

/*
 * Every field the stream set is checked before any of it is used: the VM
 * has not run since the load began (the queues are paused, the timers not
 * armed), and a failed check fails the load.
 */
static int spyre_post_load(void *opaque, int version_id)
{
    SpyreState *s = opaque;
    unsigned i, vectors = s->params.queues + 1;
    uint64_t queue_bits = s->params.queues == 64 ? ~0ULL :
                          (1ULL << s->params.queues) - 1;

    if (s->mig_clock_ns < 0) {
        spyre_mig_error("device clock %" PRId64 " ns", s->mig_clock_ns);
        return spyre_refuse_load(s);
    }
    if (s->window_base % SPYRE_MEM_WINDOW_SIZE ||
        s->window_base >= s->params.mem_size) {
        spyre_mig_error("WINDOW 0x%" PRIx64 " is not a 256 MiB-aligned "
                        "offset below mem-size", s->window_base);
        return spyre_refuse_load(s);
    }
    if (s->ctx_count > SPYRE_MMU_MAX_CTX) {
        spyre_mig_error("MMU_CTX_COUNT %u exceeds %u", s->ctx_count,
                        SPYRE_MMU_MAX_CTX);
        return spyre_refuse_load(s);
    }
    if (s->err_queues & ~queue_bits) {
        spyre_mig_error("ERR_QUEUES 0x%" PRIx64 " names queues beyond %u",
                        s->err_queues, s->params.queues);
        return spyre_refuse_load(s);
    }
    if ((vectors < 64 && s->irq_pending[0] >> vectors) ||
        (vectors <= 64 && s->irq_pending[1]) ||
        (vectors > 64 && s->irq_pending[1] >> (vectors - 64))) {
        spyre_mig_error("pending MSI-X vectors 0x%" PRIx64 "%016" PRIx64
                        " beyond the %u vectors", s->irq_pending[1],
                        s->irq_pending[0], vectors);
        return spyre_refuse_load(s);
    }
    for (i = 0; i < s->params.queues; i++) {
        if (!spyre_queue_check(s, &s->queues[i])) {
            return spyre_refuse_load(s);
        }
    }

    /* Checked: now the device takes it up. */
    memory_region_set_alias_offset(&s->window, s->window_base);
    s->clock_base_ns = spyre_clock_now(s) - s->mig_clock_ns;
    if (s->params.timed) {
        for (i = 0; i < s->params.queues; i++) {
            spyre_timed_restore(&s->queues[i]);
        }
    }
    spyre_trace_in_flight(s, "load");
    return 0;
}

const VMStateDescription spyre_vmstate = {
    .name = TYPE_SPYRE,
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = spyre_pre_save,
    .post_load = spyre_post_load,
    .fields = (VMStateField[]) {
        /* First: the rest of the stream's layout depends on them. */
        VMSTATE_STRUCT(mig_params, SpyreState, 1, vmstate_spyre_params,
                       SpyreParams),
        VMSTATE_VALIDATE("spyre: both ends have the same properties",
                         spyre_params_match),
        VMSTATE_PCI_DEVICE(parent_obj, SpyreState),
        VMSTATE_MSIX(parent_obj, SpyreState),
        VMSTATE_UINT32(scratch, SpyreState),
        VMSTATE_UINT32(reset_count, SpyreState),
        VMSTATE_UINT32(window_lo, SpyreState),
        VMSTATE_UINT64(window_base, SpyreState),
        VMSTATE_INT64(mig_clock_ns, SpyreState),
        VMSTATE_UINT32(clock_hi_latch, SpyreState),
        VMSTATE_UINT64(ctx_table, SpyreState),
        VMSTATE_UINT32(ctx_count, SpyreState),
        VMSTATE_UINT32(mmu_gen, SpyreState),
        VMSTATE_UINT64(err_queues, SpyreState),
        VMSTATE_UINT64_ARRAY(irq_pending, SpyreState, 2),
        VMSTATE_INT64(t_dma_free, SpyreState),
        VMSTATE_INT64(t_engine_free, SpyreState),
        /* As many as this card has: spyre_params_match() ran first. */
        VMSTATE_STRUCT_VARRAY_UINT32(queues, SpyreState, params.queues, 1,
                                     vmstate_spyre_queue, SpyreQueue),
        VMSTATE_END_OF_LIST()
    },
    .subsections = (const VMStateDescription * []) {
        &spyre_vmstate_sriov,   /* a card with sriov-vfs: its partitions */
        NULL
    }
};

/*
 * The VM stops (for a migration's switch-over, a snapshot, `stop`) or runs.
 * Stopped, the card runs nothing: what a save sees is exactly resumable.
 */
static void spyre_vm_state_change(void *opaque, bool running, RunState state)
{
    SpyreState *s = opaque;

    if (running) {
        spyre_queues_resume(s);
    } else {
        spyre_queues_pause(s);
    }
    /* Interrupts the paused work raised, or an incoming stream carried. */
    spyre_irq_flush(s);
}

void spyre_migrate_init(SpyreState *s)
{
    /* Realized before the VM first runs (or incoming): start paused. */
    s->paused = !runstate_is_running();
    s->vmse = qdev_add_vm_change_state_handler(DEVICE(s),
                                               spyre_vm_state_change, s);
}

void spyre_migrate_fini(SpyreState *s)
{
    if (s->vmse) {
        qemu_del_vm_change_state_handler(s->vmse);
        s->vmse = NULL;
    }
}
