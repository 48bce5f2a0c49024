/*
 * spyre: an emulated Spyre-class dataflow inference accelerator (PCIe).
 *
 * The device's programming interface is specified in docs/spyre-device.md of
 * the spyre project; every number comes from spyre_hw.h, shared with the
 * driver. This file is the PCI function: its properties and their checks,
 * realize and exit, PCI configuration (PCIe FLR, power management), device
 * memory behind a BAR2 window (sparse host backing, spyre_mem), whole-device
 * reset, and the register file's decoding: identification, capability and
 * MMU registers here, each queue's registers in spyre_queue.c.
 *
 * The rest of the device, by concern; calls go one way, down this list
 * (spyre_int.h):
 *   spyre_sriov.c   SR-IOV (sriov-vfs=N): the PF's capability and its VFs'
 *                   memory partitions, the VF functions themselves;
 *   spyre_migrate.c the device's state as vmstate, the queues paused while
 *                   the VM is stopped, an incoming stream's checks;
 *   spyre_queue.c   hardware queues: the worker threads, queue registers,
 *                   queue reset;
 *   spyre_timed.c   timed mode (timed=on, -icount): packets complete at a
 *                   modeled virtual time (docs/timed-mode.md);
 *   spyre_packet.c  packet validation and execution (COPY, LAUNCH on the
 *                   compute engine in engine/, SIGNAL, WAIT, TIMESTAMP, NOP),
 *                   completion words and queue errors;
 *   spyre_dma.c     host DMA, operand cursors, the shared DMA engine's
 *                   arbitration;
 *   spyre_mmu.c     the device MMU: context table, page-table walks, TLB;
 *   spyre_inject.c  fault injection;
 *   spyre_irq.c     MSI-X and the device clock.
 *
 * Guest misuse never aborts QEMU: it is logged with SPYRE_GUEST_ERR (a trace
 * event plus LOG_GUEST_ERROR) and the access is ignored.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/pci/msix.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/qdev-properties.h"
#include "exec/memory.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "qemu/atomic.h"
#include "spyre_int.h"

static unsigned spyre_msix_vectors(SpyreState *s)
{
    /* One vector per hardware queue plus one for errors. */
    return s->params.queues + 1;
}

static uint64_t spyre_mmio_read(void *opaque, hwaddr addr, unsigned size)
{
    SpyreState *s = opaque;
    uint64_t val = 0;

    if (size != 4 || (addr & 3)) {
        SPYRE_GUEST_ERR("unaligned or non-32-bit read at 0x%" HWADDR_PRIx
                        " (size %u)", addr, size);
        return 0;
    }

    switch (addr) {
    case SPYRE_REG_ID:
        val = SPYRE_ID_MAGIC;
        break;
    case SPYRE_REG_VERSION:
        val = SPYRE_HW_VERSION;
        break;
    case SPYRE_REG_CAP_CORES:
        val = s->params.cores;
        break;
    case SPYRE_REG_CAP_SCRATCHPAD:
        val = s->params.scratchpad_size;
        break;
    case SPYRE_REG_CAP_STICK:
        val = SPYRE_STICK_BYTES;
        break;
    case SPYRE_REG_CAP_QUEUES:
        val = s->params.queues;
        break;
    case SPYRE_REG_CAP_MEM_LO:
        val = (uint32_t)s->params.mem_size;
        break;
    case SPYRE_REG_CAP_MEM_HI:
        val = s->params.mem_size >> 32;
        break;
    case SPYRE_REG_CAP_CLOCK_MHZ:
        val = s->params.clock_mhz;
        break;
    case SPYRE_REG_CAP_FEATURES:
        val = SPYRE_FEAT_MSIX | SPYRE_FEAT_QUEUES | SPYRE_FEAT_MMU |
              SPYRE_FEAT_MEM_WINDOW | SPYRE_FEAT_FAULT_INJECT |
              SPYRE_FEAT_ENGINE |
              (s->has_peer_bar ? SPYRE_FEAT_PEER_BAR : 0);
        if (s->pf) {
            val |= SPYRE_FEAT_VF;
        } else if (s->params.sriov_vfs) {
            val |= SPYRE_FEAT_SRIOV;
        }
        break;
    case SPYRE_REG_CAP_VFS:
        val = s->pf ? 0 : s->params.sriov_vfs;
        break;
    case SPYRE_REG_SCRATCH:
        val = s->scratch;
        break;
    case SPYRE_REG_STATUS:
        val = SPYRE_STATUS_READY;
        break;
    case SPYRE_REG_RESET_COUNT:
        val = s->reset_count;
        break;
    case SPYRE_REG_WINDOW_LO:
        val = (uint32_t)s->window_base;
        break;
    case SPYRE_REG_WINDOW_HI:
        val = s->window_base >> 32;
        break;
    case SPYRE_REG_ERR_QUEUES_LO:
        val = (uint32_t)qatomic_read(&s->err_queues);
        break;
    case SPYRE_REG_ERR_QUEUES_HI:
        val = qatomic_read(&s->err_queues) >> 32;
        break;
    case SPYRE_REG_CLOCK_LO: {
        uint64_t now = spyre_clock_ns(s);

        s->clock_hi_latch = now >> 32;
        val = (uint32_t)now;
        break;
    }
    case SPYRE_REG_CLOCK_HI:
        val = s->clock_hi_latch;
        break;
    case SPYRE_REG_MMU_CTX_TABLE_LO:
        val = (uint32_t)s->ctx_table;
        break;
    case SPYRE_REG_MMU_CTX_TABLE_HI:
        val = s->ctx_table >> 32;
        break;
    case SPYRE_REG_MMU_CTX_COUNT:
        val = s->ctx_count;
        break;
    case SPYRE_REG_INJECT:
        val = spyre_inject_armed(s);
        break;
    case SPYRE_REG_RESET:
    case SPYRE_REG_MMU_INVALIDATE:
        /* write-only: reads as zero */
        break;
    default:
        if (spyre_sriov_read(s, addr, &val)) {
            break;
        }
        if (addr >= SPYRE_QENG_BASE &&
            addr < SPYRE_QENG(s->params.queues, 0) &&
            (addr - SPYRE_QENG_BASE) % SPYRE_QENG_STRIDE <= SPYRE_QE_PC) {
            val = spyre_queue_engine_read(
                &s->queues[(addr - SPYRE_QENG_BASE) / SPYRE_QENG_STRIDE],
                (addr - SPYRE_QENG_BASE) % SPYRE_QENG_STRIDE);
            break;
        }
        if (addr >= SPYRE_QREG_BASE &&
            addr < SPYRE_QREG(s->params.queues, 0)) {
            val = spyre_queue_read(&s->queues[(addr - SPYRE_QREG_BASE) /
                                              SPYRE_QREG_STRIDE],
                                   (addr - SPYRE_QREG_BASE) %
                                   SPYRE_QREG_STRIDE);
            break;
        }
        SPYRE_GUEST_ERR("read of unassigned register 0x%" HWADDR_PRIx, addr);
        break;
    }
    trace_spyre_mmio_read(addr, val);
    return val;
}

static void spyre_set_window(SpyreState *s, uint64_t base)
{
    /* A VF's window shows only its partition: whole windows inside it. */
    if (base % SPYRE_MEM_WINDOW_SIZE || base >= s->params.mem_size ||
        (s->pf && base > s->params.mem_size - s->window_size)) {
        SPYRE_GUEST_ERR("WINDOW: 0x%" PRIx64 " is not a 256 MiB-aligned "
                        "offset of a window inside mem-size 0x%" PRIx64, base,
                        s->params.mem_size);
        return;
    }
    s->window_base = base;
    if (s->window_size) {
        memory_region_set_alias_offset(&s->window, s->mem_base + base);
    }
}

/* Whole-device reset. Device memory keeps its contents, as DRAM would. */
static void spyre_do_reset(SpyreState *s)
{
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        spyre_queue_reset(&s->queues[i]);
    }
    s->scratch = 0;
    s->window_lo = 0;
    /* (not spyre_set_window(): a VF without memory has no window to check) */
    s->window_base = 0;
    if (s->window_size) {
        memory_region_set_alias_offset(&s->window, s->mem_base);
    }
    s->ctx_table = 0;
    qatomic_set(&s->ctx_count, 0);
    qatomic_inc(&s->mmu_gen);
    qatomic_set(&s->err_queues, 0);
    s->clock_base_ns = spyre_clock_now(s);
    s->clock_hi_latch = 0;
    s->t_dma_free = s->t_engine_free = spyre_clock_now(s);
    s->reset_count++;
    trace_spyre_reset(s->reset_count);
}

static void spyre_mmio_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    SpyreState *s = opaque;

    trace_spyre_mmio_write(addr, val);
    if (size != 4 || (addr & 3)) {
        SPYRE_GUEST_ERR("unaligned or non-32-bit write at 0x%" HWADDR_PRIx
                        " (size %u)", addr, size);
        return;
    }

    switch (addr) {
    case SPYRE_REG_SCRATCH:
        s->scratch = val;
        break;
    case SPYRE_REG_RESET:
        if (val != SPYRE_RESET_DEVICE) {
            SPYRE_GUEST_ERR("RESET: unknown value 0x%" PRIx64, val);
            break;
        }
        spyre_do_reset(s);
        break;
    case SPYRE_REG_WINDOW_LO:
        s->window_lo = val;
        break;
    case SPYRE_REG_WINDOW_HI:
        spyre_set_window(s, (uint64_t)val << 32 | s->window_lo);
        break;
    case SPYRE_REG_ERR_QUEUES_LO:
        qatomic_and(&s->err_queues, ~(uint64_t)(uint32_t)val);
        break;
    case SPYRE_REG_ERR_QUEUES_HI:
        qatomic_and(&s->err_queues, ~((uint64_t)val << 32));
        break;
    case SPYRE_REG_MMU_CTX_TABLE_LO:
        qatomic_set(&s->ctx_table, deposit64(s->ctx_table, 0, 32, val));
        break;
    case SPYRE_REG_MMU_CTX_TABLE_HI:
        qatomic_set(&s->ctx_table, deposit64(s->ctx_table, 32, 32, val));
        break;
    case SPYRE_REG_MMU_CTX_COUNT:
        if (val > SPYRE_MMU_MAX_CTX) {
            SPYRE_GUEST_ERR("MMU_CTX_COUNT: %" PRIu64 " exceeds %u", val,
                            SPYRE_MMU_MAX_CTX);
            break;
        }
        qatomic_set(&s->ctx_count, val);
        break;
    case SPYRE_REG_MMU_INVALIDATE:
        qatomic_inc(&s->mmu_gen);
        trace_spyre_mmu_invalidate();
        break;
    case SPYRE_REG_INJECT:
        spyre_inject(s, val);
        break;
    case SPYRE_REG_ID ... SPYRE_REG_CAP_VFS:
    case SPYRE_REG_STATUS:
    case SPYRE_REG_RESET_COUNT:
    case SPYRE_REG_CLOCK_LO:
    case SPYRE_REG_CLOCK_HI:
        SPYRE_GUEST_ERR("write 0x%" PRIx64 " to read-only register 0x%"
                        HWADDR_PRIx, val, addr);
        break;
    default:
        if (spyre_sriov_write(s, addr, val)) {
            break;
        }
        if (addr >= SPYRE_QREG_BASE &&
            addr < SPYRE_QREG(s->params.queues, 0)) {
            spyre_queue_write(&s->queues[(addr - SPYRE_QREG_BASE) /
                                         SPYRE_QREG_STRIDE],
                              (addr - SPYRE_QREG_BASE) % SPYRE_QREG_STRIDE,
                              val);
            break;
        }
        SPYRE_GUEST_ERR("write 0x%" PRIx64 " to unassigned register 0x%"
                        HWADDR_PRIx, val, addr);
        break;
    }
    if (s->params.timed) {
        spyre_irq_flush(s);     /* e.g. a queue that stopped at enable */
    }
}

static const MemoryRegionOps spyre_mmio_ops = {
    .read = spyre_mmio_read,
    .write = spyre_mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    /* Accept any access so misuse is reported, not silently dropped by core. */
    .valid = {
        .min_access_size = 1,
        .max_access_size = 8,
    },
    .impl = {
        .min_access_size = 1,
        .max_access_size = 8,
    },
};

static unsigned spyre_power_state(PCIDevice *pdev)
{
    SpyreState *s = SPYRE(pdev);

    return pci_get_word(pdev->config + s->pm_cap + PCI_PM_CTRL) &
           PCI_PM_CTRL_STATE_MASK;
}

static void spyre_write_config(PCIDevice *pdev, uint32_t addr, uint32_t val,
                               int len)
{
    unsigned from = spyre_power_state(pdev), to;

    pci_default_write_config(pdev, addr, val, len);
    /*
     * PMCSR: D0 and D3hot (D1/D2 are not advertised; writing them is
     * allowed and changes nothing). No_Soft_Reset is 0: leaving D3hot
     * resets the device as RESET does; device memory keeps its contents.
     */
    to = spyre_power_state(pdev);
    if (from != to) {
        trace_spyre_power_state(from, to);
        if (from == 3 && to == 0) {
            spyre_do_reset(SPYRE(pdev));
        }
    }
    /* Device Control "Initiate FLR" resets the function (spyre_qdev_reset). */
    pcie_cap_flr_write_config(pdev, addr, val, len);
}

static bool spyre_check_params(SpyreState *s, Error **errp)
{
    SpyreParams *p = &s->params;

    if (p->cores < 1 || p->cores > SPYRE_MAX_CORES) {
        error_setg(errp, "spyre: cores=%u is out of range (1..%u)",
                   p->cores, SPYRE_MAX_CORES);
        return false;
    }
    if (p->scratchpad_size < 64 * KiB || p->scratchpad_size > 16 * MiB ||
        !is_power_of_2(p->scratchpad_size)) {
        error_setg(errp, "spyre: scratchpad-size=%" PRIu64 " must be a power "
                   "of two from 64 KiB to 16 MiB", p->scratchpad_size);
        return false;
    }
    if (p->mem_size < 64 * MiB || p->mem_size > SPYRE_MAX_MEM_SIZE ||
        !QEMU_IS_ALIGNED(p->mem_size, 2 * MiB)) {
        error_setg(errp, "spyre: mem-size=%" PRIu64 " must be a multiple of "
                   "2 MiB from 64 MiB to 128 GiB", p->mem_size);
        return false;
    }
    if (p->queues < 1 || p->queues > SPYRE_MAX_QUEUES) {
        error_setg(errp, "spyre: queues=%u is out of range (1..%u)",
                   p->queues, SPYRE_MAX_QUEUES);
        return false;
    }
    if (p->clock_mhz < 100 || p->clock_mhz > 10000) {
        error_setg(errp, "spyre: clock-mhz=%u is out of range (100..10000)",
                   p->clock_mhz);
        return false;
    }
    if (p->timed && !icount_enabled() && !qtest_enabled()) {
        error_setg(errp, "spyre: timed=on needs instruction counting "
                   "(-icount shift=N,sleep=off; docs/timed-mode.md)");
        return false;
    }
    if (p->dma_mbps < 1 || p->mem_copy_mbps < 1) {
        error_setg(errp, "spyre: dma-mbps=%u and mem-copy-mbps=%u must be "
                   "at least 1", p->dma_mbps, p->mem_copy_mbps);
        return false;
    }
    if (p->dma_latency_ns > 1000000000) {
        error_setg(errp, "spyre: dma-latency-ns=%u is out of range "
                   "(0..1000000000)", p->dma_latency_ns);
        return false;
    }
    if (p->lpddr_mbps < 1000 || p->ring_bytes_per_cycle < 1 ||
        p->ring_bytes_per_cycle > 4096 || p->ring_hop_cycles > 1000 ||
        p->dma_burst_bytes < SPYRE_STICK_BYTES ||
        p->dma_burst_bytes > (1u << 20) ||
        p->dma_burst_bytes % SPYRE_STICK_BYTES ||
        p->dma_burst_overhead_bytes > p->dma_burst_bytes) {
        error_setg(errp, "spyre: lpddr-mbps=%u (>= 1000), "
                   "ring-bytes-per-cycle=%u (1..4096), ring-hop-cycles=%u "
                   "(0..1000), dma-burst-bytes=%u (128..1 MiB, multiple of "
                   "128), dma-burst-overhead-bytes=%u (0..burst): out of range",
                   p->lpddr_mbps, p->ring_bytes_per_cycle, p->ring_hop_cycles,
                   p->dma_burst_bytes, p->dma_burst_overhead_bytes);
        return false;
    }
    if (p->engine_threads > SPYRE_ENGINE_MAX_THREADS) {
        error_setg(errp, "spyre: engine-threads=%u is out of range (0..%u)",
                   p->engine_threads, SPYRE_ENGINE_MAX_THREADS);
        return false;
    }
    if (p->wait_poll_ns < 100 || p->wait_poll_ns > 1000000) {
        error_setg(errp, "spyre: wait-poll-ns=%u is out of range "
                   "(100..1000000)", p->wait_poll_ns);
        return false;
    }
    return spyre_sriov_check_params(s, errp);
}

static bool spyre_realize_common(SpyreState *s, Error **errp);

static void spyre_realize(PCIDevice *pdev, Error **errp)
{
    SpyreState *s = SPYRE(pdev);
    Error *err = NULL;
    unsigned i;

    if (!spyre_check_params(s, errp)) {
        return;
    }

    pci_config_set_interrupt_pin(pdev->config, 1);
    memory_region_init_io(&s->regs, OBJECT(s), &spyre_mmio_ops, s,
                          "spyre-regs", SPYRE_REGS_SIZE);
    pci_register_bar(pdev, SPYRE_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->regs);

    /*
     * Device memory: host RAM reserved lazily (RAM_NORESERVE), so a 128 GiB
     * card costs only what is touched. Rounded up to whole windows so BAR2
     * never aliases past the region. A RAM block of the VM's: migration
     * sends it as it sends guest RAM, dirty pages again (spyre_mem_dirty()).
     */
    memory_region_init_ram_flags_nomigrate(&s->mem, OBJECT(s), "spyre-mem",
                                           ROUND_UP(s->params.mem_size,
                                                    SPYRE_MEM_WINDOW_SIZE),
                                           RAM_NORESERVE, &err);
    if (err) {
        error_propagate(errp, err);
        return;
    }
    vmstate_register_ram(&s->mem, DEVICE(s));
    s->mem_ptr = memory_region_get_ram_ptr(&s->mem);
    s->window_size = SPYRE_MEM_WINDOW_SIZE;
    memory_region_init_alias(&s->window, OBJECT(s), "spyre-mem-window",
                             &s->mem, 0, SPYRE_MEM_WINDOW_SIZE);
    pci_register_bar(pdev, SPYRE_BAR_MEM, PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->window);

    /*
     * BAR4, the peer BAR: all of device memory at once, so another card's
     * DMA (a COPY operand or MMU leaf with a host bus address inside it)
     * reaches this card's memory through the PCI address space, as NVMe
     * CMBs and large-BAR GPUs are reached. Beyond mem-size nothing answers:
     * such an access is a DMA error of the card that made it.
     */
    {
        uint64_t size = pow2ceil(s->params.mem_size);

        s->has_peer_bar = s->params.peer_bar == ON_OFF_AUTO_ON ||
                          (s->params.peer_bar == ON_OFF_AUTO_AUTO &&
                           size <= SPYRE_PEER_BAR_AUTO_MAX);
        if (s->has_peer_bar) {
            memory_region_init(&s->peer_bar, OBJECT(s), "spyre-peer-bar", size);
            memory_region_init_alias(&s->peer_mem, OBJECT(s), "spyre-peer-mem",
                                     &s->mem, 0, s->params.mem_size);
            memory_region_add_subregion(&s->peer_bar, 0, &s->peer_mem);
            pci_register_bar(pdev, SPYRE_BAR_PEER,
                             PCI_BASE_ADDRESS_SPACE_MEMORY |
                             PCI_BASE_ADDRESS_MEM_TYPE_64 |
                             PCI_BASE_ADDRESS_MEM_PREFETCH, &s->peer_bar);
        }
    }

    if (msix_init_exclusive_bar(pdev, spyre_msix_vectors(s), SPYRE_BAR_MSIX,
                                errp)) {
        return;
    }
    for (i = 0; i < spyre_msix_vectors(s); i++) {
        msix_vector_use(pdev, i);
    }

    if (pcie_endpoint_cap_init(pdev, 0x80) < 0) {
        error_setg(errp, "spyre: cannot add the PCI Express capability");
        return;
    }
    pcie_cap_flr_init(pdev);
    if (s->params.sriov_vfs) {
        spyre_pcie_ari_init(pdev, SPYRE_ARI_CAP_OFFSET);
    }

    /* PCI power management: D0 and D3hot, software-visible in PMCSR. */
    s->pm_cap = pci_add_capability(pdev, PCI_CAP_ID_PM, 0, PCI_PM_SIZEOF, errp);
    if (s->pm_cap < 0) {
        return;
    }
    pci_set_word(pdev->config + s->pm_cap + PCI_PM_PMC, PCI_PM_CAP_VER_1_2);
    pci_set_word(pdev->config + s->pm_cap + PCI_PM_CTRL, 0); /* D0 */
    pci_set_word(pdev->wmask + s->pm_cap + PCI_PM_CTRL, PCI_PM_CTRL_STATE_MASK);

    if (!spyre_realize_common(s, errp)) {
        return;
    }
    spyre_sriov_pf_init(s, errp);
}

/*
 * A VF (sriov-vfs; spyre_sriov.c): realized at VF Enable on QEMU 7.2, at the
 * PF's realize on 10.0 (spyre_compat.h).
 */
static void spyre_vf_realize(PCIDevice *pdev, Error **errp)
{
    SpyreState *s = SPYRE(pdev);

    if (!spyre_sriov_vf_init(s, errp)) {
        return;
    }
    memory_region_init_io(&s->regs, OBJECT(s), &spyre_mmio_ops, s,
                          "spyre-vf-regs", SPYRE_REGS_SIZE);
    spyre_pcie_sriov_vf_bar(pdev, SPYRE_BAR_REGS, PCI_BASE_ADDRESS_SPACE_MEMORY,
                            &s->regs);
    if (!spyre_realize_common(s, errp)) {
        spyre_sriov_vf_fini(s);
    }
}

/*
 * What a PF and a VF both have once their BARs are in place: the engine,
 * interrupts, the clock, the queues and the VM state hooks.
 */
static bool spyre_realize_common(SpyreState *s, Error **errp)
{
    {
        struct spyre_engine_config cfg;

        spyre_engine_config_default(&cfg);
        cfg.cores = s->params.cores;
        cfg.scratchpad_bytes = s->params.scratchpad_size;
        cfg.clock_mhz = s->params.clock_mhz;
        cfg.mem_bw_mbps = s->params.lpddr_mbps;
        cfg.dma_burst_bytes = s->params.dma_burst_bytes;
        cfg.dma_burst_overhead_bytes = s->params.dma_burst_overhead_bytes;
        cfg.ring_bytes_per_cycle = s->params.ring_bytes_per_cycle;
        cfg.ring_hop_cycles = s->params.ring_hop_cycles;
        /* results and modeled times are the same for every thread count */
        cfg.threads = s->params.engine_threads;
        if (!cfg.threads) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);

            cfg.threads = n > 8 ? 8 : n > 1 ? (uint32_t)n : 1;
        }
        s->engine = spyre_engine_new(&cfg);
        if (!s->engine) {
            error_setg(errp, "spyre: cannot create the compute engine");
            return false;
        }
        qemu_mutex_init(&s->engine_lock);
    }
    spyre_irq_init(s);
    s->clock_base_ns = spyre_clock_now(s);
    s->t_dma_free = s->t_engine_free = spyre_clock_now(s);
    spyre_queues_init(s);
    spyre_migrate_init(s);

    trace_spyre_realize(s->params.cores, s->params.scratchpad_size,
                        s->params.mem_size, s->params.queues,
                        s->params.clock_mhz);
    return true;
}

static void spyre_exit_common(SpyreState *s)
{
    spyre_migrate_fini(s);
    spyre_queues_fini(s);
    spyre_irq_fini(s);
    spyre_engine_free(s->engine);
    qemu_mutex_destroy(&s->engine_lock);
}

static void spyre_vf_exit(PCIDevice *pdev)
{
    SpyreState *s = SPYRE(pdev);

    spyre_exit_common(s);
    spyre_sriov_vf_fini(s);
}

static void spyre_exit(PCIDevice *pdev)
{
    SpyreState *s = SPYRE(pdev);

    spyre_sriov_pf_exit(s);
    spyre_exit_common(s);
    msix_uninit_exclusive_bar(pdev);
    vmstate_unregister_ram(&s->mem, DEVICE(s));
}

/* qdev reset: power-on, system reset and PCIe function-level reset. */
static void spyre_qdev_reset(DeviceState *dev)
{
    SpyreState *s = SPYRE(dev);

    msix_reset(PCI_DEVICE(dev));
    spyre_do_reset(s);
    spyre_sriov_pf_reset(s);
    spyre_sriov_vf_reset(s);
}

/* Defaults are the published Spyre figures; see docs/spyre-device.md. */
static SPYRE_PROPS_CONST Property spyre_properties[] = {
    DEFINE_PROP_UINT32("cores", SpyreState, params.cores, SPYRE_TM_CORES),
    DEFINE_PROP_SIZE("scratchpad-size", SpyreState, params.scratchpad_size,
                     SPYRE_TM_SCRATCHPAD_BYTES),
    DEFINE_PROP_SIZE("mem-size", SpyreState, params.mem_size, 1 * GiB),
    DEFINE_PROP_UINT32("queues", SpyreState, params.queues, 16),
    DEFINE_PROP_UINT32("clock-mhz", SpyreState, params.clock_mhz,
                       SPYRE_TM_CLOCK_MHZ),
    /* Timed mode; the figures are assumptions (docs/timed-mode.md). */
    DEFINE_PROP_BOOL("timed", SpyreState, params.timed, false),
    DEFINE_PROP_UINT32("dma-mbps", SpyreState, params.dma_mbps, 50000),
    DEFINE_PROP_UINT32("dma-latency-ns", SpyreState, params.dma_latency_ns,
                       1000),
    DEFINE_PROP_UINT32("mem-copy-mbps", SpyreState, params.mem_copy_mbps,
                       75000),
    DEFINE_PROP_UINT32("wait-poll-ns", SpyreState, params.wait_poll_ns, 1000),
    /* The engine's dataflow timing model (docs/spyre-isa.md section 6). */
    DEFINE_PROP_UINT32("lpddr-mbps", SpyreState, params.lpddr_mbps,
                       SPYRE_TM_MEM_BW_MBPS),
    DEFINE_PROP_UINT32("dma-burst-bytes", SpyreState, params.dma_burst_bytes,
                       SPYRE_TM_DMA_BURST_BYTES),
    DEFINE_PROP_UINT32("dma-burst-overhead-bytes", SpyreState,
                       params.dma_burst_overhead_bytes,
                       SPYRE_TM_DMA_BURST_OVERHEAD_BYTES),
    DEFINE_PROP_UINT32("ring-bytes-per-cycle", SpyreState,
                       params.ring_bytes_per_cycle,
                       SPYRE_TM_RING_BYTES_PER_CYCLE),
    DEFINE_PROP_UINT32("ring-hop-cycles", SpyreState, params.ring_hop_cycles,
                       SPYRE_TM_RING_HOP_CYCLES),
    /* The emulator itself: host threads, no effect on results or timing. */
    DEFINE_PROP_UINT32("engine-threads", SpyreState, params.engine_threads, 0),
    DEFINE_PROP_ON_OFF_AUTO("peer-bar", SpyreState, params.peer_bar,
                            ON_OFF_AUTO_AUTO),
    DEFINE_PROP_UINT32("sriov-vfs", SpyreState, params.sriov_vfs, 0),
    SPYRE_PROPS_END
};

/* What `-device spyre,help` says of each property: unit, range, meaning. */
static const struct {
    const char *name, *desc;
} spyre_property_desc[] = {
    { "cores", "compute cores on the ring, 1-32" },
    { "scratchpad-size", "scratchpad bytes per core, a power of two, 64K-16M" },
    { "mem-size", "device memory (LPDDR5) bytes, a multiple of 2M, 64M-128G; "
                  "backed sparsely" },
    { "queues", "hardware queues, one MSI-X vector each, 1-64" },
    { "clock-mhz", "core clock in MHz, 100-10000 (not published)" },
    { "timed", "timed mode: packets complete at their modeled virtual time "
               "(needs -icount)" },
    { "dma-mbps", "timed mode: COPY bandwidth with a host side, 10^6 B/s, >= 1" },
    { "dma-latency-ns", "timed mode: fixed cost of a COPY in ns, 0-10^9" },
    { "mem-copy-mbps", "timed mode: device-to-device COPY bandwidth, "
                       "10^6 B/s, >= 1" },
    { "wait-poll-ns", "timed mode: first re-read of a WAIT's semaphore in ns, "
                      "100-10^6" },
    { "lpddr-mbps", "engine: LPDDR bandwidth shared by transfers in flight, "
                    "10^6 B/s, >= 1000" },
    { "dma-burst-bytes", "engine: DMA burst bytes, a multiple of 128, "
                         "128-1M" },
    { "dma-burst-overhead-bytes", "engine: LPDDR time per burst beyond its "
                                  "data, in bytes, 0-burst" },
    { "ring-bytes-per-cycle", "engine: bytes per cycle of one ring link, "
                              "one direction, 1-4096" },
    { "ring-hop-cycles", "engine: latency per ring hop in cycles, 0-1000" },
    { "engine-threads", "emulator: host threads running the cores' numerics, "
                        "0-64 (0: the host's CPUs, at most 8); same results "
                        "and modeled times for every count" },
    { "peer-bar", "BAR4 showing all device memory to peer cards: on, off, "
                  "auto (on when mem-size rounded up to a power of two is at "
                  "most 8G)" },
    { "sriov-vfs", "SR-IOV: virtual functions the card offers (TotalVFs), "
                   "0-255; 0: no SR-IOV capability" },
};

static void spyre_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = spyre_realize;
    k->exit = spyre_exit;
    k->config_write = spyre_write_config;
    k->vendor_id = SPYRE_PCI_VENDOR_ID;
    k->device_id = SPYRE_PCI_DEVICE_ID;
    k->revision = SPYRE_PCI_REVISION;
    k->class_id = SPYRE_PCI_CLASS;
    dc->desc = "Spyre-class dataflow inference accelerator";
    spyre_set_reset(dc, spyre_qdev_reset);
    dc->vmsd = &spyre_vmstate;
    device_class_set_props(dc, spyre_properties);
    for (size_t i = 0; i < ARRAY_SIZE(spyre_property_desc); i++) {
        object_class_property_set_description(klass, spyre_property_desc[i].name,
                                              spyre_property_desc[i].desc);
    }
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

/* A VF's configuration space: no power management, FLR resets the VF. */
static void spyre_vf_write_config(PCIDevice *pdev, uint32_t addr,
                                  uint32_t val, int len)
{
    pci_default_write_config(pdev, addr, val, len);
    pcie_cap_flr_write_config(pdev, addr, val, len);
}

/* The VF type: a spyre function with its own realize, not user-creatable. */
static void spyre_vf_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = spyre_vf_realize;
    k->exit = spyre_vf_exit;
    k->config_write = spyre_vf_write_config;
    k->device_id = SPYRE_PCI_VF_DEVICE_ID;
    dc->desc = "Spyre-class accelerator SR-IOV virtual function";
    /* Not migrated: migration is blocked while VFs exist. */
    dc->vmsd = NULL;
    dc->user_creatable = false;
}

static void spyre_register_types(void)
{
    static InterfaceInfo interfaces[] = {
        { INTERFACE_PCIE_DEVICE },
        { },
    };
    static const TypeInfo spyre_info = {
        .name = TYPE_SPYRE,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(SpyreState),
        .class_init = spyre_class_init,
        .interfaces = interfaces,
    };

    static const TypeInfo spyre_vf_info = {
        .name = TYPE_SPYRE_VF,
        .parent = TYPE_SPYRE,
        .class_init = spyre_vf_class_init,
    };

    type_register_static(&spyre_info);
    type_register_static(&spyre_vf_info);
}
type_init(spyre_register_types)
