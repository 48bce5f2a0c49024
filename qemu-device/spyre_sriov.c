/*
 * spyre SR-IOV: with sriov-vfs=N the PF offers N virtual functions through
 * QEMU's pcie_sriov (as hw/nvme does). Each VF is a spyre function of its
 * own, type spyre-vf: its own register file, queues and queue threads, MMU
 * contexts, MSI-X vectors, device clock and compute engine. Device memory is
 * the PF's: the PF programs each VF's partition (SPYRE_VF_PART registers,
 * docs/spyre-device.md section 14) while VF Enable is clear, and a VF sees
 * its partition as device memory [0, size) from the moment it is enabled
 * (spyre_sriov_vf_bind(): at its realize on QEMU 7.2, which creates VFs at VF
 * Enable; at the reset VF Enable gives it on QEMU 10, whose VFs exist from
 * the PF's realize on, spyre_compat.h). The VF's mem_ptr and
 * params.mem_size cover the partition only, so every bounds check of the
 * device (COPY cursors, the MMU's range check, LAUNCH through the MMU)
 * confines a VF to it: an access past its end is a fault on that VF's queue.
 *
 * spyre.c holds the VF's type (spyre-vf) and realize; this file what a VF
 * adds to a spyre function. The VFs' state does not migrate: while any VF
 * is enabled, migration is blocked with a reason saying so. The partition
 * registers are the PF's state and migrate in a subsection of its vmstate.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/log.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "hw/pci/msix.h"
#include "qemu/error-report.h"
#include "migration/vmstate.h"
#include "trace.h"

#include "spyre_int.h"

/* Extended capabilities: ARI, then SR-IOV. */
#define SPYRE_SRIOV_CAP_OFFSET  0x160
#define SPYRE_VF_OFFSET         1       /* first VF: function PF + 1 */
#define SPYRE_VF_STRIDE         1
/* A VF's BAR1: MSI-X table at 0, PBA at 2 KiB (65 vectors fit). */
#define SPYRE_VF_MSIX_SIZE      0x1000
#define SPYRE_VF_PBA_OFFSET     0x800

bool spyre_sriov_check_params(SpyreState *s, Error **errp)
{
    if (s->params.sriov_vfs > SPYRE_MAX_VFS) {
        error_setg(errp, "spyre: sriov-vfs=%u is out of range (0..%u)",
                   s->params.sriov_vfs, SPYRE_MAX_VFS);
        return false;
    }
    /* VF v is function devfn + 1 + v: past 255 QEMU could not create it. */
    if (s->params.sriov_vfs &&
        PCI_DEVICE(s)->devfn + SPYRE_VF_OFFSET +
        (s->params.sriov_vfs - 1) * SPYRE_VF_STRIDE >= PCI_DEVFN_MAX) {
        error_setg(errp, "spyre: sriov-vfs=%u: the last VF's function number "
                   "would pass 255 at this address (devfn %u)",
                   s->params.sriov_vfs, PCI_DEVICE(s)->devfn);
        return false;
    }
    return true;
}

/* The type of each VF BAR, as the PF's SR-IOV capability declares it. */
#define SPYRE_VF_BAR_REGS_TYPE  PCI_BASE_ADDRESS_SPACE_MEMORY
#define SPYRE_VF_BAR_MEM_TYPE   (PCI_BASE_ADDRESS_SPACE_MEMORY |             \
                                 PCI_BASE_ADDRESS_MEM_TYPE_64 |              \
                                 PCI_BASE_ADDRESS_MEM_PREFETCH)
/* 32-bit, as the PF's: a 64-bit BAR1 would take BAR2's slot too. */
#define SPYRE_VF_BAR_MSIX_TYPE  PCI_BASE_ADDRESS_SPACE_MEMORY

bool spyre_sriov_pf_init(SpyreState *s, Error **errp)
{
    PCIDevice *pdev = PCI_DEVICE(s);

    if (!s->params.sriov_vfs) {
        return true;
    }
    if (!spyre_pcie_sriov_pf_init(pdev, SPYRE_SRIOV_CAP_OFFSET, TYPE_SPYRE_VF,
                                  SPYRE_PCI_VF_DEVICE_ID, s->params.sriov_vfs,
                                  SPYRE_VF_OFFSET, SPYRE_VF_STRIDE, errp)) {
        return false;
    }
    pcie_sriov_pf_init_vf_bar(pdev, SPYRE_BAR_REGS, SPYRE_VF_BAR_REGS_TYPE,
                              SPYRE_REGS_SIZE);
    pcie_sriov_pf_init_vf_bar(pdev, SPYRE_BAR_MEM, SPYRE_VF_BAR_MEM_TYPE,
                              SPYRE_MEM_WINDOW_SIZE);
    pcie_sriov_pf_init_vf_bar(pdev, SPYRE_BAR_MSIX, SPYRE_VF_BAR_MSIX_TYPE,
                              SPYRE_VF_MSIX_SIZE);
    return true;
}

void spyre_sriov_pf_exit(SpyreState *s)
{
    if (s->params.sriov_vfs) {
        pcie_sriov_pf_exit(PCI_DEVICE(s));
    }
}

/*
 * System reset and FLR of the PF clear SR-IOV Control (VF Enable, VF MSE)
 * and NumVFs: the VFs go away. QEMU 7.2's pcie_sriov_pf_disable_vfs()
 * removes them but leaves the register as it was (10.0's
 * pcie_sriov_pf_reset() clears it too).
 */
void spyre_sriov_pf_reset(SpyreState *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);

    if (!s->pf && s->params.sriov_vfs) {
        spyre_pcie_sriov_pf_disable_vfs(pdev);
        pci_set_word(pdev->config + pdev->exp.sriov_cap + PCI_SRIOV_CTRL, 0);
        pci_set_word(pdev->config + pdev->exp.sriov_cap + PCI_SRIOV_NUM_VF, 0);
    }
}

bool spyre_sriov_read(SpyreState *s, hwaddr addr, uint64_t *val)
{
    unsigned v, reg;

    if (s->pf || addr < SPYRE_VF_PART_BASE ||
        addr >= SPYRE_VF_PART(s->params.sriov_vfs, 0)) {
        return false;
    }
    v = (addr - SPYRE_VF_PART_BASE) / SPYRE_VF_PART_STRIDE;
    reg = (addr - SPYRE_VF_PART_BASE) % SPYRE_VF_PART_STRIDE;
    switch (reg) {
    case SPYRE_VF_BASE_LO:
        *val = (uint32_t)s->vf_base[v];
        break;
    case SPYRE_VF_BASE_HI:
        *val = s->vf_base[v] >> 32;
        break;
    case SPYRE_VF_SIZE_LO:
        *val = (uint32_t)s->vf_size[v];
        break;
    default:
        *val = s->vf_size[v] >> 32;
        break;
    }
    return true;
}

bool spyre_sriov_write(SpyreState *s, hwaddr addr, uint32_t val)
{
    unsigned v, reg;
    uint64_t *p;

    if (s->pf || addr < SPYRE_VF_PART_BASE ||
        addr >= SPYRE_VF_PART(s->params.sriov_vfs, 0)) {
        return false;
    }
    if (pcie_sriov_num_vfs(PCI_DEVICE(s))) {
        SPYRE_GUEST_ERR("VF partition register 0x%" HWADDR_PRIx " written "
                        "while VFs are enabled: ignored", addr);
        return true;
    }
    v = (addr - SPYRE_VF_PART_BASE) / SPYRE_VF_PART_STRIDE;
    reg = (addr - SPYRE_VF_PART_BASE) % SPYRE_VF_PART_STRIDE;
    p = reg < SPYRE_VF_SIZE_LO ? &s->vf_base[v] : &s->vf_size[v];
    *p = deposit64(*p, reg % 8 ? 32 : 0, 32, val);
    return true;
}

/* VF @v's partition is whole 2 MiB pieces inside the PF's memory. */
static bool spyre_part_ok(SpyreState *pf, unsigned v)
{
    uint64_t base = pf->vf_base[v], size = pf->vf_size[v];

    return size && !(base % SPYRE_VF_PART_ALIGN) &&
           !(size % SPYRE_VF_PART_ALIGN) && base < pf->params.mem_size &&
           size <= pf->params.mem_size - base;
}

/* The partition VF @v gets: its registers if sound and apart from lower VFs'. */
static uint64_t spyre_part_size(SpyreState *pf, unsigned v)
{
    unsigned i;

    if (!spyre_part_ok(pf, v)) {
        if (pf->vf_size[v]) {
            SPYRE_GUEST_ERR("VF %u: partition 0x%" PRIx64 "+0x%" PRIx64
                            " is not 2 MiB pieces inside mem-size 0x%" PRIx64
                            ": the VF has no device memory", v,
                            pf->vf_base[v], pf->vf_size[v],
                            pf->params.mem_size);
        }
        return 0;
    }
    for (i = 0; i < v; i++) {
        if (spyre_part_ok(pf, i) &&
            pf->vf_base[v] < pf->vf_base[i] + pf->vf_size[i] &&
            pf->vf_base[i] < pf->vf_base[v] + pf->vf_size[v]) {
            SPYRE_GUEST_ERR("VF %u: partition 0x%" PRIx64 "+0x%" PRIx64
                            " overlaps VF %u's: the VF has no device memory",
                            v, pf->vf_base[v], pf->vf_size[v], i);
            return 0;
        }
    }
    return pf->vf_size[v];
}

/*
 * VF @s takes its partition (as the PF's registers give it now), BAR2's
 * window onto it, and a share of the migration blocker: when it is enabled.
 */
static bool spyre_sriov_vf_bind(SpyreState *s, Error **errp)
{
    SpyreState *pf = s->pf;
    unsigned v = pcie_sriov_vf_number(PCI_DEVICE(s));

    if (!pf->vfs_live) {
        error_setg(&pf->vf_blocker, "spyre: SR-IOV VFs are enabled and their "
                   "state does not migrate; disable them first "
                   "(echo 0 > sriov_numvfs)");
        if (spyre_migrate_add_blocker(&pf->vf_blocker, errp) < 0) {
            return false;
        }
    }
    pf->vfs_live++;
    s->vf_bound = true;

    s->params.mem_size = spyre_part_size(pf, v);
    s->mem_base = s->params.mem_size ? pf->vf_base[v] : 0;
    s->mem_ptr = pf->mem_ptr + s->mem_base;
    /* BAR2: the first window of the partition; the rest reads as nothing. */
    s->window_size = MIN(SPYRE_MEM_WINDOW_SIZE, s->params.mem_size);
    s->window_base = 0;
    if (s->window_size) {
        memory_region_set_size(&s->window, s->window_size);
        memory_region_set_alias_offset(&s->window, s->mem_base);
    }
    memory_region_set_enabled(&s->window, s->window_size);
    trace_spyre_vf_realize(v, s->mem_base, s->params.mem_size);
    return true;
}

/* What spyre_sriov_vf_bind() took, given back: the VF is disabled. */
static void spyre_sriov_vf_unbind(SpyreState *s)
{
    SpyreState *pf = s->pf;

    if (!s->vf_bound) {
        return;
    }
    s->vf_bound = false;
    memory_region_set_enabled(&s->window, false);
    s->params.mem_size = 0;
    s->window_size = 0;
    s->mem_base = 0;
    s->mem_ptr = pf->mem_ptr;
    if (!--pf->vfs_live) {
        spyre_migrate_del_blocker(&pf->vf_blocker);
    }
}

/*
 * A VF being realized (spyre.c's spyre_vf_realize()): its PF, its figures,
 * BAR2, BAR1 with MSI-X and the PCIe capability; on QEMU 7.2, whose VFs
 * exist only while enabled, its partition too. spyre.c adds BAR0 and the rest.
 */
bool spyre_sriov_vf_init(SpyreState *s, Error **errp)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    SpyreState *pf = SPYRE(pcie_sriov_get_pf(pdev));
    unsigned i;

    /* The PF's figures, but no memory until bound and no VFs of its own. */
    s->pf = pf;
    s->params = pf->params;
    s->params.sriov_vfs = 0;
    s->params.engine_threads = 1;   /* same results for every count */
    s->params.mem_size = 0;
    s->mem_base = 0;
    s->mem_ptr = pf->mem_ptr;
    s->window_size = 0;

    /* BAR2: a window onto the partition, shown once the VF is bound. */
    memory_region_init(&s->vf_bar2, OBJECT(s), "spyre-vf-bar2",
                       SPYRE_MEM_WINDOW_SIZE);
    memory_region_init_alias(&s->window, OBJECT(s), "spyre-vf-window",
                             &pf->mem, 0, SPYRE_MEM_WINDOW_SIZE);
    memory_region_set_enabled(&s->window, false);
    memory_region_add_subregion(&s->vf_bar2, 0, &s->window);
    spyre_pcie_sriov_vf_bar(pdev, SPYRE_BAR_MEM, SPYRE_VF_BAR_MEM_TYPE,
                            &s->vf_bar2);

    memory_region_init(&s->vf_msix, OBJECT(s), "spyre-vf-msix",
                       SPYRE_VF_MSIX_SIZE);
    spyre_pcie_sriov_vf_bar(pdev, SPYRE_BAR_MSIX, SPYRE_VF_BAR_MSIX_TYPE,
                            &s->vf_msix);
    if (msix_init(pdev, s->params.queues + 1, &s->vf_msix, SPYRE_BAR_MSIX, 0,
                  &s->vf_msix, SPYRE_BAR_MSIX, SPYRE_VF_PBA_OFFSET, 0,
                  errp) < 0) {
        return false;
    }
    for (i = 0; i < s->params.queues + 1; i++) {
        msix_vector_use(pdev, i);
    }
    if (pcie_endpoint_cap_init(pdev, 0x80) < 0) {
        error_setg(errp, "spyre: cannot add the VF's PCI Express capability");
        goto err_msix;
    }
    pcie_cap_flr_init(pdev);
    /* ARI as on the PF: VF v past function 7 is an ARI function. */
    spyre_pcie_ari_init(pdev, SPYRE_ARI_CAP_OFFSET);
    if (!SPYRE_VFS_PERSIST && !spyre_sriov_vf_bind(s, errp)) {
        goto err_msix;
    }
    return true;

err_msix:
    msix_uninit(pdev, &s->vf_msix, &s->vf_msix);
    return false;
}

/* What spyre_sriov_vf_init() set up, undone. */
void spyre_sriov_vf_fini(SpyreState *s)
{
    spyre_sriov_vf_unbind(s);
    msix_uninit(PCI_DEVICE(s), &s->vf_msix, &s->vf_msix);
}

/*
 * A VF's reset. On QEMU 10 VF Enable enables or disables a VF that exists
 * all along, and resets it (pci_set_enabled()): enabled, it takes its
 * partition; disabled, it gives it back. An FLR of an enabled VF keeps it.
 * On 7.2 realize and exit do both.
 */
void spyre_sriov_vf_reset(SpyreState *s)
{
    Error *err = NULL;

    if (!SPYRE_VFS_PERSIST || !s->pf) {
        return;
    }
    if (!spyre_vf_enabled(PCI_DEVICE(s))) {
        spyre_sriov_vf_unbind(s);
    } else if (!s->vf_bound && !spyre_sriov_vf_bind(s, &err)) {
        error_prepend(&err, "spyre: VF %u enabled without device memory: ",
                      pcie_sriov_vf_number(PCI_DEVICE(s)));
        error_report_err(err);
    }
}

static bool spyre_sriov_needed(void *opaque)
{
    SpyreState *s = opaque;

    return s->params.sriov_vfs;
}

const VMStateDescription spyre_vmstate_sriov = {
    .name = "spyre/sriov",
    .version_id = 1,
    .minimum_version_id = 1,
    .needed = spyre_sriov_needed,
    .fields = (VMStateField[]) {
        VMSTATE_UINT64_ARRAY(vf_base, SpyreState, SPYRE_MAX_VFS),
        VMSTATE_UINT64_ARRAY(vf_size, SpyreState, SPYRE_MAX_VFS),
        VMSTATE_END_OF_LIST()
    }
};
