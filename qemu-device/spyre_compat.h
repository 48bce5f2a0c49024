/*
 * spyre: the one place that knows which QEMU the device is built into.
 * Debian 12 ships QEMU 7.2, Debian 13 QEMU 10.0 (QEMU_SERIES in
 * tools/versions.conf); where their API differs for what the device uses,
 * the device calls what this header defines and nothing else tests
 * QEMU_VERSION_MAJOR (7 or 10: no other series is built). What changed:
 *
 *   - headers: sysemu/ became system/; PCIDevice moved to hw/pci/pci_device.h;
 *   - the big QEMU lock: qemu_mutex_*_iothread() became bql_*();
 *   - pcie_ari_init() lost its next-function argument; QEMU 10 warns about
 *     a function past slot 0 below a port unless it has ARI (VFs: they do);
 *   - properties: const arrays sized by ARRAY_SIZE, no DEFINE_PROP_END_OF_LIST
 *     (10.0); SPYRE_PROPS_END closes the array on 7.2 only;
 *   - reset: DeviceClass::reset is set through device_class_set_legacy_reset()
 *     (the field is gone in 10.0);
 *   - migration blockers: migrate_add_blocker() and migrate_del_blocker() take
 *     the reason by reference and free it on failure and removal;
 *   - SR-IOV (hw/pci/pcie_sriov.c): pcie_sriov_pf_init() reports
 *     errors; a VF's BAR is registered with pci_register_bar(); and, the one
 *     that changes behaviour, the PF creates and realizes all TotalVFs VFs at
 *     its own realize and VF Enable only enables them (pci_set_enabled(),
 *     which resets the VF), where 7.2 realizes NumVFs VFs at VF Enable and
 *     unrealizes them when it is cleared (SPYRE_VFS_PERSIST).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_MISC_SPYRE_COMPAT_H
#define HW_MISC_SPYRE_COMPAT_H

#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/pci/pcie_sriov.h"
#include "migration/blocker.h"

#if QEMU_VERSION_MAJOR >= 10
#include "hw/pci/pci_device.h"
#endif

#if QEMU_VERSION_MAJOR >= 10
#include "system/cpu-timers.h"
#include "system/qtest.h"
#include "system/runstate.h"
#else
#include "sysemu/cpu-timers.h"
#include "sysemu/qtest.h"
#include "sysemu/runstate.h"
#endif

#if QEMU_VERSION_MAJOR >= 10
#define SPYRE_PROPS_CONST const
#define SPYRE_PROPS_END
#define SPYRE_VFS_PERSIST 1
#else
#define SPYRE_PROPS_CONST
#define SPYRE_PROPS_END DEFINE_PROP_END_OF_LIST(),
#define SPYRE_VFS_PERSIST 0
#endif

static inline bool spyre_bql_locked(void)
{
#if QEMU_VERSION_MAJOR >= 10
    return bql_locked();
#else
    return qemu_mutex_iothread_locked();
#endif
}

static inline void spyre_bql_lock(void)
{
#if QEMU_VERSION_MAJOR >= 10
    bql_lock();
#else
    qemu_mutex_lock_iothread();
#endif
}

static inline void spyre_bql_unlock(void)
{
#if QEMU_VERSION_MAJOR >= 10
    bql_unlock();
#else
    qemu_mutex_unlock_iothread();
#endif
}

/*
 * The ARI capability. Its Next Function Number: on 7.2 the PF's is 1 (the
 * first VF, as nvme has it there), a VF's 0; 10.0 sets it itself, 0 (no
 * further PF) unless an old machine type's compat property asks for 1.
 */
static inline void spyre_pcie_ari_init(PCIDevice *dev, uint16_t offset)
{
#if QEMU_VERSION_MAJOR >= 10
    pcie_ari_init(dev, offset);
#else
    pcie_ari_init(dev, offset, pci_is_vf(dev) ? 0 : 1);
#endif
}

static inline void spyre_set_reset(DeviceClass *dc, void (*fn)(DeviceState *))
{
#if QEMU_VERSION_MAJOR >= 10
    device_class_set_legacy_reset(dc, fn);
#else
    dc->reset = fn;
#endif
}

/* Adds *reason as a blocker; on failure *reason is freed and NULL. */
static inline int spyre_migrate_add_blocker(Error **reason, Error **errp)
{
#if QEMU_VERSION_MAJOR >= 10
    return migrate_add_blocker(reason, errp);
#else
    int r = migrate_add_blocker(*reason, errp);

    if (r < 0) {
        error_free(*reason);
        *reason = NULL;
    }
    return r;
#endif
}

/* Removes the blocker *reason and frees it; *reason becomes NULL. */
static inline void spyre_migrate_del_blocker(Error **reason)
{
#if QEMU_VERSION_MAJOR >= 10
    migrate_del_blocker(reason);
#else
    migrate_del_blocker(*reason);
    error_free(*reason);
    *reason = NULL;
#endif
}

static inline bool spyre_pcie_sriov_pf_init(PCIDevice *dev, uint16_t offset,
                                            const char *vfname,
                                            uint16_t vf_dev_id,
                                            uint16_t total_vfs,
                                            uint16_t vf_offset,
                                            uint16_t vf_stride, Error **errp)
{
#if QEMU_VERSION_MAJOR >= 10
    return pcie_sriov_pf_init(dev, offset, vfname, vf_dev_id, total_vfs,
                              total_vfs, vf_offset, vf_stride, errp);
#else
    pcie_sriov_pf_init(dev, offset, vfname, vf_dev_id, total_vfs, total_vfs,
                       vf_offset, vf_stride);
    return true;
#endif
}

/* A VF's BAR; @type is what the PF's pcie_sriov_pf_init_vf_bar() gave it. */
static inline void spyre_pcie_sriov_vf_bar(PCIDevice *dev, int region_num,
                                           uint8_t type, MemoryRegion *mr)
{
#if QEMU_VERSION_MAJOR >= 10
    pci_register_bar(dev, region_num, type, mr);
#else
    (void)type;
    pcie_sriov_vf_register_bar(dev, region_num, mr);
#endif
}

/* Whether a VF is enabled: a 7.2 VF exists only while it is. */
static inline bool spyre_vf_enabled(PCIDevice *dev)
{
#if QEMU_VERSION_MAJOR >= 10
    return dev->enabled;
#else
    (void)dev;
    return true;
#endif
}

/* Clears VF Enable: 7.2 removes the VFs, 10.0 disables (and resets) them. */
static inline void spyre_pcie_sriov_pf_disable_vfs(PCIDevice *dev)
{
#if QEMU_VERSION_MAJOR >= 10
    pcie_sriov_pf_reset(dev);
#else
    pcie_sriov_pf_disable_vfs(dev);
#endif
}

#endif /* HW_MISC_SPYRE_COMPAT_H */
