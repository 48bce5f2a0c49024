/* SPDX-License-Identifier: MIT */
/*
 * spyre_hw.h - the spyre device's hardware interface: PCI identity, BARs and
 * the BAR0 register map. Shared verbatim by the QEMU device (qemu-device/),
 * the kernel driver (driver/) and host tests. Plain C, fixed-width values, no
 * kernel or QEMU types. docs/spyre-device.md is the prose specification; this
 * header is the only place the numbers are written.
 */
#ifndef SPYRE_HW_H
#define SPYRE_HW_H

/*
 * PCI identity. Vendor 0x1234 is the unassigned ID QEMU uses for its own
 * emulated test devices (edu, bochs-display); it is never IBM's 0x1014, so the
 * driver cannot bind a real Spyre card (1014:06a7).
 */
#define SPYRE_PCI_VENDOR_ID		0x1234
#define SPYRE_PCI_DEVICE_ID		0x5350	/* "SP" */
#define SPYRE_PCI_REVISION		0x01
#define SPYRE_PCI_CLASS			0x1200	/* processing accelerator */

/* BARs */
#define SPYRE_BAR_REGS			0	/* 32-bit MMIO: registers */
#define SPYRE_BAR_MSIX			4	/* MSI-X table and PBA */
#define SPYRE_REGS_SIZE			0x10000	/* 64 KiB */

/* Hardware version: major changes are incompatible, minor ones add. */
#define SPYRE_HW_VERSION_MAJOR		0
#define SPYRE_HW_VERSION_MINOR		1
#define SPYRE_HW_VERSION		((SPYRE_HW_VERSION_MAJOR << 16) | SPYRE_HW_VERSION_MINOR)
#define SPYRE_HW_VERSION_GET_MAJOR(v)	(((v) >> 16) & 0xffff)
#define SPYRE_HW_VERSION_GET_MINOR(v)	((v) & 0xffff)

/* Architectural constants */
#define SPYRE_STICK_BYTES		128	/* a stick: the unit of data movement */
#define SPYRE_MAX_CORES			32
#define SPYRE_MAX_QUEUES		64
#define SPYRE_MAX_MEM_SIZE		(128ULL << 30)	/* 128 GiB of LPDDR5 */

/*
 * BAR0 register map. All registers are 32 bits wide, little-endian, and must
 * be accessed with aligned 32-bit loads and stores. 64-bit values are split in
 * _LO/_HI halves. Reads of unassigned offsets return 0; writes to read-only or
 * unassigned offsets are ignored and logged as guest errors.
 */

/* Identification (read-only) */
#define SPYRE_REG_ID			0x0000	/* SPYRE_ID_MAGIC */
#define SPYRE_ID_MAGIC			0x52595053	/* "SPYR" in memory order */
#define SPYRE_REG_VERSION		0x0004	/* SPYRE_HW_VERSION */

/* Capabilities (read-only; fixed at device creation by its properties) */
#define SPYRE_REG_CAP_CORES		0x0010	/* number of cores */
#define SPYRE_REG_CAP_SCRATCHPAD	0x0014	/* scratchpad bytes per core */
#define SPYRE_REG_CAP_STICK		0x0018	/* bytes per stick (128) */
#define SPYRE_REG_CAP_QUEUES		0x001c	/* number of hardware queues */
#define SPYRE_REG_CAP_MEM_LO		0x0020	/* device memory bytes, low 32 */
#define SPYRE_REG_CAP_MEM_HI		0x0024	/* device memory bytes, high 32 */
#define SPYRE_REG_CAP_CLOCK_MHZ		0x0028	/* core clock in MHz */
#define SPYRE_REG_CAP_FEATURES		0x002c	/* SPYRE_FEAT_* bits */

/* SPYRE_REG_CAP_FEATURES bits: what this revision of the device implements. */
#define SPYRE_FEAT_MSIX			(1u << 0)	/* MSI-X vectors: queues + 1 */

/* Control */
#define SPYRE_REG_SCRATCH		0x0040	/* RW: free for software; 0 on reset */
#define SPYRE_REG_RESET			0x0044	/* WO: write SPYRE_RESET_DEVICE */
#define SPYRE_RESET_DEVICE		0x00000001	/* whole-device reset */
#define SPYRE_REG_STATUS		0x0048	/* RO: SPYRE_STATUS_* bits */
#define SPYRE_STATUS_READY		(1u << 0)	/* accepts commands */
#define SPYRE_REG_RESET_COUNT		0x004c	/* RO: resets since power-on */

#endif /* SPYRE_HW_H */
