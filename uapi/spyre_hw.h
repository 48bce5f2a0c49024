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

#ifdef __KERNEL__
#include <asm/byteorder.h>
#include <linux/build_bug.h>	/* static_assert */
#include <linux/string.h>
#include <linux/types.h>
/* Little-endian in memory: sparse checks the kernel's conversions. */
typedef __le16 spyre_le16;
typedef __le32 spyre_le32;
typedef __le64 spyre_le64;
#define spyre_cpu_to_le16(x)	cpu_to_le16(x)
#define spyre_cpu_to_le32(x)	cpu_to_le32(x)
#define spyre_cpu_to_le64(x)	cpu_to_le64(x)
#else
#include <assert.h>		/* static_assert (C11, C++) */
#include <stdint.h>
#include <string.h>
/*
 * The compiler's byte order, not <endian.h>'s htole*(), which strict C
 * (-std=c11) and C++ builds do not declare: the header compiles alone.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define spyre_cpu_to_le16(x)	__builtin_bswap16((uint16_t)(x))
#define spyre_cpu_to_le32(x)	__builtin_bswap32((uint32_t)(x))
#define spyre_cpu_to_le64(x)	__builtin_bswap64((uint64_t)(x))
#else
#define spyre_cpu_to_le16(x)	((uint16_t)(x))
#define spyre_cpu_to_le32(x)	((uint32_t)(x))
#define spyre_cpu_to_le64(x)	((uint64_t)(x))
#endif
typedef uint16_t spyre_le16;
typedef uint32_t spyre_le32;
typedef uint64_t spyre_le64;
#endif

/*
 * PCI identity. Vendor 0x1234 is the unassigned ID QEMU uses for its own
 * emulated test devices (edu, bochs-display); it is never IBM's 0x1014, so the
 * driver cannot bind a real Spyre card (1014:06a7).
 */
#define SPYRE_PCI_VENDOR_ID		0x1234
#define SPYRE_PCI_DEVICE_ID		0x5350	/* "SP" */
#define SPYRE_PCI_REVISION		0x01
#define SPYRE_PCI_CLASS			0x1200	/* processing accelerator */
/*
 * SR-IOV virtual functions of a card created with sriov-vfs=N (real Spyre:
 * PF 1014:06a7, VF 1014:06a8; here the PF's ID + 1 under the same vendor).
 */
#define SPYRE_PCI_VF_DEVICE_ID		0x5351
#define SPYRE_MAX_VFS			255

/* BARs */
#define SPYRE_BAR_REGS			0	/* 32-bit MMIO: registers */
#define SPYRE_BAR_MSIX			1	/* 32-bit MMIO: MSI-X table and PBA */
#define SPYRE_BAR_MEM			2	/* 64-bit prefetchable: device memory window */
#define SPYRE_BAR_PEER			4	/* 64-bit prefetchable: all of device memory */
#define SPYRE_REGS_SIZE			0x10000	/* 64 KiB */
#define SPYRE_MEM_WINDOW_SIZE		(256ULL << 20)	/* BAR2: 256 MiB movable window */
/*
 * BAR4, the peer BAR: device memory offset o at BAR4 + o, for every o below
 * mem-size; its size is mem-size rounded up to a power of two. Present (and
 * SPYRE_FEAT_PEER_BAR set) when property peer-bar is on, or auto and that
 * size is at most SPYRE_PEER_BAR_AUTO_MAX.
 */
#define SPYRE_PEER_BAR_AUTO_MAX		(8ULL << 30)

/* Hardware version: major changes are incompatible, minor ones add. */
#define SPYRE_HW_VERSION_MAJOR		0
#define SPYRE_HW_VERSION_MINOR		4
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
#define SPYRE_FEAT_QUEUES		(1u << 1)	/* command queues, packets v1 */
#define SPYRE_FEAT_MMU			(1u << 2)	/* device MMU, per-context VA */
#define SPYRE_FEAT_MEM_WINDOW		(1u << 3)	/* BAR2 device memory window */
#define SPYRE_FEAT_FAULT_INJECT		(1u << 4)	/* SPYRE_REG_INJECT */
#define SPYRE_FEAT_ENGINE		(1u << 5)	/* LAUNCH executes programs */
#define SPYRE_FEAT_PEER_BAR		(1u << 6)	/* BAR4 shows all device memory */
#define SPYRE_FEAT_SRIOV		(1u << 7)	/* PF: SR-IOV, VF partition registers */
#define SPYRE_FEAT_VF			(1u << 8)	/* a VF: memory is its partition */

/* SR-IOV (read-only): VFs the PF supports (TotalVFs); 0 on a VF or without. */
#define SPYRE_REG_CAP_VFS		0x0030

/* Control */
#define SPYRE_REG_SCRATCH		0x0040	/* RW: free for software; 0 on reset */
#define SPYRE_REG_RESET			0x0044	/* WO: write SPYRE_RESET_DEVICE */
#define SPYRE_RESET_DEVICE		0x00000001	/* whole-device reset */
#define SPYRE_REG_STATUS		0x0048	/* RO: SPYRE_STATUS_* bits */
#define SPYRE_STATUS_READY		(1u << 0)	/* accepts commands */
#define SPYRE_REG_RESET_COUNT		0x004c	/* RO: resets since power-on */

/* Device memory window (BAR2): which 256 MiB of device memory BAR2 shows. */
#define SPYRE_REG_WINDOW_LO		0x0050	/* RW: device memory offset, low 32 */
#define SPYRE_REG_WINDOW_HI		0x0054	/* RW: high 32; applied on this write */

/* Errors: one bit per queue that stopped on an error (write 1 to clear). */
#define SPYRE_REG_ERR_QUEUES_LO		0x0060	/* RW1C: queues 0..31 */
#define SPYRE_REG_ERR_QUEUES_HI		0x0064	/* RW1C: queues 32..63 */

/* Device clock: ns since the last device reset (TIMESTAMP writes it too). */
#define SPYRE_REG_CLOCK_LO		0x0068	/* RO: latches _HI */
#define SPYRE_REG_CLOCK_HI		0x006c	/* RO: value latched by _LO */

/* Device MMU */
#define SPYRE_REG_MMU_CTX_TABLE_LO	0x0080	/* RW: bus address of context table */
#define SPYRE_REG_MMU_CTX_TABLE_HI	0x0084	/* RW */
#define SPYRE_REG_MMU_CTX_COUNT		0x0088	/* RW: entries in it, 0..SPYRE_MMU_MAX_CTX */
#define SPYRE_REG_MMU_INVALIDATE	0x008c	/* WO: write any value: drop cached translations */

/*
 * Fault injection (debug). Write SPYRE_INJECT(queue, kind): the next matching
 * event on that queue fails as described in docs/spyre-device.md. Reads
 * return the injections still armed (bit per kind, any queue).
 */
#define SPYRE_REG_INJECT		0x0090
#define SPYRE_INJECT(q, kind)		(((uint32_t)(q) << 8) | (uint32_t)(kind))
#define SPYRE_INJECT_NONE		0	/* disarm all */
#define SPYRE_INJECT_HANG		1	/* queue stops progressing until reset */
#define SPYRE_INJECT_DMA_ERROR		2	/* next DMA fails: SPYRE_ERR_DMA */
#define SPYRE_INJECT_PAGE_FAULT		3	/* next translation faults */
#define SPYRE_INJECT_BAD_COMPLETION	4	/* next completion writes seq ^ ~0 */
#define SPYRE_INJECT_KINDS		5

/*
 * Hardware queues: register block of queue q at SPYRE_QREG(q, reg).
 * A queue is a ring of SPYRE_PKT_SIZE-byte packets in host memory. HEAD and
 * TAIL are free-running 32-bit packet counters; the packet for counter n is at
 * BASE + (n % SIZE) * SPYRE_PKT_SIZE. Software writes TAIL (the doorbell); the
 * device advances HEAD as it consumes packets.
 */
#define SPYRE_QREG_BASE			0x1000
#define SPYRE_QREG_STRIDE		0x40
#define SPYRE_QREG(q, reg)		(SPYRE_QREG_BASE + (q) * SPYRE_QREG_STRIDE + (reg))
#define SPYRE_Q_SIZE_MAX		65536	/* largest ring, in packets */
#define SPYRE_Q_BASE_LO			0x00	/* RW: ring bus address (64-byte aligned) */
#define SPYRE_Q_BASE_HI			0x04
#define SPYRE_Q_SIZE			0x08	/* RW: packets in ring, power of 2, 2..Q_SIZE_MAX */
#define SPYRE_Q_CTRL			0x0c	/* RW: SPYRE_QCTRL_* */
#define SPYRE_Q_HEAD			0x10	/* RO while enabled; RW while disabled */
#define SPYRE_Q_TAIL			0x14	/* RW: doorbell */
#define SPYRE_Q_COMPL_LO		0x18	/* RW: bus address of 8-byte completion word */
#define SPYRE_Q_COMPL_HI		0x1c
#define SPYRE_Q_STATUS			0x20	/* RO: SPYRE_QSTAT_* */
#define SPYRE_Q_ERROR			0x24	/* RO: SPYRE_ERR_* of the failed packet */
#define SPYRE_Q_ERR_SEQ_LO		0x28	/* RO: seq of the failed packet */
#define SPYRE_Q_ERR_SEQ_HI		0x2c
#define SPYRE_Q_FAULT_LO		0x30	/* RO: faulting address */
#define SPYRE_Q_FAULT_HI		0x34
#define SPYRE_Q_FAULT_INFO		0x38	/* RO: SPYRE_FAULT_INFO_* fields */
#define SPYRE_Q_DONE			0x3c	/* RO: packets completed since enable */

#define SPYRE_QCTRL_ENABLE		(1u << 0)	/* process packets */
#define SPYRE_QCTRL_RESET		(1u << 1)	/* WO: reset this queue */
#define SPYRE_QCTRL_PRIO_SHIFT		4		/* bits 5:4: priority 0 (low) .. 3 */
#define SPYRE_QCTRL_PRIO_MASK		(3u << 4)
#define SPYRE_QCTRL_MAX_PRIO		3

#define SPYRE_QSTAT_ENABLED		(1u << 0)
#define SPYRE_QSTAT_BUSY		(1u << 1)	/* a packet is executing */
#define SPYRE_QSTAT_WAITING		(1u << 2)	/* blocked in a WAIT packet */
#define SPYRE_QSTAT_ERROR		(1u << 3)	/* stopped on an error (see Q_ERROR) */

/* SPYRE_Q_FAULT_INFO: context, access, source, cause */
#define SPYRE_FAULT_INFO(ctx, access, source, cause) \
	(((uint32_t)(ctx) << 16) | ((uint32_t)(access) << 12) | \
	 ((uint32_t)(source) << 8) | (uint32_t)(cause))
#define SPYRE_FAULT_CTX(info)		(((info) >> 16) & 0xffff)
#define SPYRE_FAULT_ACCESS(info)	(((info) >> 12) & 0xf)
#define SPYRE_FAULT_SOURCE(info)	(((info) >> 8) & 0xf)
#define SPYRE_FAULT_CAUSE(info)		((info) & 0xff)
#define SPYRE_ACCESS_READ		1
#define SPYRE_ACCESS_WRITE		2
#define SPYRE_SOURCE_RING		1	/* fetching a packet */
#define SPYRE_SOURCE_COPY_SRC		2
#define SPYRE_SOURCE_COPY_DST		3
#define SPYRE_SOURCE_SEMAPHORE		4	/* SIGNAL / WAIT / TIMESTAMP target */
#define SPYRE_SOURCE_COMPLETION		5
#define SPYRE_SOURCE_SGL		6	/* reading a scatter-gather list */
#define SPYRE_SOURCE_PROGRAM		7	/* LAUNCH program or arguments */
#define SPYRE_MMU_FAULT_NOT_PRESENT		1	/* no valid translation */
#define SPYRE_MMU_FAULT_PERMISSION		2	/* PTE lacks read or write */
#define SPYRE_MMU_FAULT_BAD_CTX		3	/* context not in the context table */
#define SPYRE_MMU_FAULT_RANGE		4	/* beyond the VA space or device memory */
#define SPYRE_MMU_FAULT_WALK		5	/* page table read failed */
#define SPYRE_MMU_FAULT_DMA			6	/* host memory access failed */

/* Packet errors (SPYRE_Q_ERROR). A failed packet stops its queue. */
#define SPYRE_ERR_NONE			0
#define SPYRE_ERR_BAD_OPCODE		1
#define SPYRE_ERR_BAD_VERSION		2
#define SPYRE_ERR_RESERVED		3	/* reserved field or flag not zero */
#define SPYRE_ERR_ALIGN			4	/* device-side address not stick aligned */
#define SPYRE_ERR_SIZE			5	/* size zero, not whole sticks, or too large */
#define SPYRE_ERR_SPACE			6	/* unknown address space */
#define SPYRE_ERR_FAULT			7	/* translation or access fault: Q_FAULT_* */
#define SPYRE_ERR_DMA			8	/* host memory access failed */
#define SPYRE_ERR_RING_OVERFLOW		9	/* TAIL - HEAD > SIZE */
#define SPYRE_ERR_RING_CONFIG		10	/* bad BASE or SIZE at enable */
#define SPYRE_ERR_NO_ENGINE		11	/* LAUNCH without a compute engine */
#define SPYRE_ERR_SGL			12	/* malformed scatter-gather list */
#define SPYRE_ERR_ENGINE		13	/* LAUNCH: the program faulted (see below) */
#define SPYRE_ERR_COUNT			14	/* one past the last: tables of names check it */

/*
 * The names of the SPYRE_ERR_* codes, the only copy: array initializers,
 * indexed by code. SPYRE_ERR_NAMES are the symbols (spyre-coredump),
 * SPYRE_ERR_TEXTS the words of an error message (libspyre).
 */
#define SPYRE_ERR_NAMES {							\
	[SPYRE_ERR_NONE] = "none",						\
	[SPYRE_ERR_BAD_OPCODE] = "BAD_OPCODE",					\
	[SPYRE_ERR_BAD_VERSION] = "BAD_VERSION",				\
	[SPYRE_ERR_RESERVED] = "RESERVED",					\
	[SPYRE_ERR_ALIGN] = "ALIGN",						\
	[SPYRE_ERR_SIZE] = "SIZE",						\
	[SPYRE_ERR_SPACE] = "SPACE",						\
	[SPYRE_ERR_FAULT] = "FAULT",						\
	[SPYRE_ERR_DMA] = "DMA",						\
	[SPYRE_ERR_RING_OVERFLOW] = "RING_OVERFLOW",				\
	[SPYRE_ERR_RING_CONFIG] = "RING_CONFIG",				\
	[SPYRE_ERR_NO_ENGINE] = "NO_ENGINE",					\
	[SPYRE_ERR_SGL] = "SGL",						\
	[SPYRE_ERR_ENGINE] = "ENGINE",						\
}

#define SPYRE_ERR_TEXTS {							\
	[SPYRE_ERR_NONE] = "none",						\
	[SPYRE_ERR_BAD_OPCODE] = "bad opcode",					\
	[SPYRE_ERR_BAD_VERSION] = "bad version",				\
	[SPYRE_ERR_RESERVED] = "reserved field set",				\
	[SPYRE_ERR_ALIGN] = "misaligned address",				\
	[SPYRE_ERR_SIZE] = "bad size",						\
	[SPYRE_ERR_SPACE] = "bad address space",				\
	[SPYRE_ERR_FAULT] = "page fault",					\
	[SPYRE_ERR_DMA] = "DMA error",						\
	[SPYRE_ERR_RING_OVERFLOW] = "ring overflow",				\
	[SPYRE_ERR_RING_CONFIG] = "ring configuration",				\
	[SPYRE_ERR_NO_ENGINE] = "no compute engine",				\
	[SPYRE_ERR_SGL] = "bad scatter-gather list",				\
	[SPYRE_ERR_ENGINE] = "program fault",					\
}

/*
 * Engine faults of queue q: the core and instruction index that faulted.
 * Q_FAULT_LO/HI hold the address, Q_FAULT_INFO the cause (SPYRE_FAULT_*
 * of spyre_isa.h) with source SPYRE_SOURCE_PROGRAM.
 */
/*
 * SR-IOV partitions (PF only): VF v's slice of device memory, as an offset
 * and a size in bytes, both multiples of SPYRE_VF_PART_ALIGN. Writable only
 * while VF Enable is clear; checked when the VFs are enabled (a partition
 * out of range or overlapping a lower VF's gives that VF no memory). A VF
 * sees its partition as device memory [0, size).
 */
#define SPYRE_VF_PART_BASE		0x4000
#define SPYRE_VF_PART_STRIDE		0x10
#define SPYRE_VF_PART(v, reg)		(SPYRE_VF_PART_BASE + (v) * SPYRE_VF_PART_STRIDE + (reg))
#define SPYRE_VF_BASE_LO		0x00	/* RW: offset in device memory */
#define SPYRE_VF_BASE_HI		0x04
#define SPYRE_VF_SIZE_LO		0x08	/* RW: bytes; 0 = no memory */
#define SPYRE_VF_SIZE_HI		0x0c
#define SPYRE_VF_PART_ALIGN		(2ULL << 20)	/* 2 MiB, the huge page */

#define SPYRE_QENG_BASE			0x3000
#define SPYRE_QENG_STRIDE		0x10
#define SPYRE_QENG(q, reg)		(SPYRE_QENG_BASE + (q) * SPYRE_QENG_STRIDE + (reg))
#define SPYRE_QE_CORE			0x00	/* RO: faulting core, ~0 if none */
#define SPYRE_QE_PC			0x04	/* RO: faulting instruction index, ~0 if none */

/* Device MMU: 128 GiB per-context virtual address space, 4 KiB pages. */
#define SPYRE_MMU_VA_BITS		37
#define SPYRE_MMU_VA_SIZE		(1ULL << SPYRE_MMU_VA_BITS)
#define SPYRE_MMU_MAX_CTX		4096
#define SPYRE_PAGE_SHIFT		12
#define SPYRE_PAGE_SIZE			(1ULL << SPYRE_PAGE_SHIFT)
#define SPYRE_HUGE_PAGE_SIZE		(1ULL << 21)	/* level-1 leaf */
/*
 * Three levels of 512 8-byte entries, each table one 4 KiB page in host
 * memory: L0 index VA[38:30] (only 128 entries used), L1 VA[29:21],
 * L2 VA[20:12]. A context table entry holds the bus address of its L0 table.
 */
#define SPYRE_PT_ENTRIES		512	/* entries per table: one page of 8-byte entries */
#define SPYRE_PT_SHIFT			9	/* VA bits each level translates */
/* L0 entries in use: the VA space over what one L0 entry spans (1 GiB). */
#define SPYRE_PT_L0_USED \
	(SPYRE_MMU_VA_SIZE >> (SPYRE_PAGE_SHIFT + 2 * SPYRE_PT_SHIFT))
/* Index of @va in its level-@level table (0, 1 or 2). */
#define SPYRE_PT_INDEX(va, level) \
	((unsigned int)(((va) >> (SPYRE_PAGE_SHIFT + (2 - (level)) * SPYRE_PT_SHIFT)) & \
			(SPYRE_PT_ENTRIES - 1)))
#define SPYRE_PTE_VALID			(1ULL << 0)
#define SPYRE_PTE_READ			(1ULL << 1)
#define SPYRE_PTE_WRITE			(1ULL << 2)
#define SPYRE_PTE_DEVMEM		(1ULL << 3)	/* target is device memory */
#define SPYRE_PTE_LEAF			(1ULL << 4)	/* L1 entry maps a 2 MiB page */
#define SPYRE_PTE_ADDR_MASK		0x000ffffffffff000ULL
#define SPYRE_CTX_VALID			(1ULL << 0)

/*
 * Packets: SPYRE_PKT_SIZE bytes, little-endian. Every packet starts with the
 * same header; reserved bytes and unknown flags must be zero.
 */
#define SPYRE_PKT_SIZE			64
#define SPYRE_PKT_VERSION		1

#define SPYRE_PKT_OP_NOP			0
#define SPYRE_PKT_OP_COPY			1
#define SPYRE_PKT_OP_LAUNCH			2
#define SPYRE_PKT_OP_SIGNAL			3
#define SPYRE_PKT_OP_WAIT			4
#define SPYRE_PKT_OP_TIMESTAMP		5

#define SPYRE_PKT_F_IRQ			(1u << 0)	/* interrupt on completion */
#define SPYRE_PKT_F_MASK		SPYRE_PKT_F_IRQ

/*
 * Address spaces of packet operands. A device-side address (device memory,
 * directly or through the MMU) must be stick aligned.
 */
#define SPYRE_AS_VIRT			0	/* context VA, translated by the MMU */
#define SPYRE_AS_DEVPHYS		1	/* device memory offset */
#define SPYRE_AS_HOST			2	/* host bus address, contiguous */
#define SPYRE_AS_HOST_SGL		3	/* host bus address of a spyre_sge list */
#define SPYRE_AS_COUNT			4

/** Largest single COPY. */
#define SPYRE_COPY_MAX			(1ULL << 40)

struct spyre_pkt_hdr {
	uint8_t opcode;		/* SPYRE_PKT_OP_* */
	uint8_t version;	/* SPYRE_PKT_VERSION */
	spyre_le16 flags;		/* SPYRE_PKT_F_* */
	spyre_le16 ctx;		/* MMU context of SPYRE_AS_VIRT operands */
	spyre_le16 reserved;
	spyre_le64 seq;		/* written to the completion word when done */
};

struct spyre_pkt_copy {
	struct spyre_pkt_hdr hdr;
	spyre_le64 src;
	spyre_le64 dst;
	spyre_le64 size;		/* bytes, a multiple of SPYRE_STICK_BYTES */
	uint8_t src_space;	/* SPYRE_AS_* */
	uint8_t dst_space;
	uint8_t reserved[22];
};

struct spyre_pkt_launch {
	struct spyre_pkt_hdr hdr;
	spyre_le64 program;	/* VA of the program image (spyre_isa.h) */
	spyre_le64 args;		/* VA of the argument block */
	spyre_le32 core_mask;	/* cores that run it */
	spyre_le32 reserved0;
	spyre_le64 record;	/* VA of a struct spyre_launch_record to fill, or 0 */
	spyre_le32 reserved[4];
};

/*
 * What a LAUNCH reports (written to spyre_pkt_launch.record when it ends,
 * successfully or not): the modeled device time and per-core busy time.
 */
struct spyre_launch_record {
	spyre_le32 status;	/* SPYRE_ENGINE_FAULT_NONE (0) or an engine fault cause */
	spyre_le32 fault_core;
	spyre_le32 fault_pc;
	spyre_le32 cores_run;
	spyre_le64 fault_addr;
	spyre_le64 device_ns;	/* modeled device time of the launch */
	spyre_le64 device_cycles;
	spyre_le64 insns;
	spyre_le64 core_busy_cycles[SPYRE_MAX_CORES];
};

/* SIGNAL writes value; WAIT blocks until *addr >= value (unsigned 64-bit). */
struct spyre_pkt_sem {
	struct spyre_pkt_hdr hdr;
	spyre_le64 addr;		/* 8-byte aligned */
	spyre_le64 value;
	uint8_t space;		/* SPYRE_AS_* except SPYRE_AS_HOST_SGL */
	uint8_t reserved[31];
};

/* TIMESTAMP writes the device clock (ns, SPYRE_REG_CLOCK) to addr. */
#define spyre_pkt_timestamp spyre_pkt_sem

/* One scatter-gather entry for SPYRE_AS_HOST_SGL; the list ends at size bytes. */
struct spyre_sge {
	spyre_le64 addr;		/* host bus address */
	spyre_le64 len;		/* bytes, non-zero */
};

/*
 * Packet preparers: every layer (driver, runtime, device tests, kselftests)
 * builds packets with these, as liburing's io_uring_prep_*() build SQEs. Each
 * clears the whole packet first, so reserved bytes are zero; the header
 * fields the driver owns (flags, ctx, seq) stay zero for user space to pass
 * to DRM_IOCTL_SPYRE_SUBMIT, and whoever writes a ring sets them after.
 */
static inline void spyre_prep_hdr(void *pkt, uint8_t opcode)
{
	struct spyre_pkt_hdr *h = (struct spyre_pkt_hdr *)pkt;

	memset(pkt, 0, SPYRE_PKT_SIZE);
	h->opcode = opcode;
	h->version = SPYRE_PKT_VERSION;
}

static inline void spyre_prep_nop(void *pkt)
{
	spyre_prep_hdr(pkt, SPYRE_PKT_OP_NOP);
}

/* COPY @size bytes (a multiple of SPYRE_STICK_BYTES) from @src to @dst. */
static inline void spyre_prep_copy(void *pkt, uint8_t src_space, uint64_t src,
				   uint8_t dst_space, uint64_t dst, uint64_t size)
{
	struct spyre_pkt_copy *c = (struct spyre_pkt_copy *)pkt;

	spyre_prep_hdr(pkt, SPYRE_PKT_OP_COPY);
	c->src = spyre_cpu_to_le64(src);
	c->dst = spyre_cpu_to_le64(dst);
	c->size = spyre_cpu_to_le64(size);
	c->src_space = src_space;
	c->dst_space = dst_space;
}

/* COPY between two context virtual addresses: what user space submits. */
static inline void spyre_prep_copy_va(void *pkt, uint64_t src, uint64_t dst, uint64_t size)
{
	spyre_prep_copy(pkt, SPYRE_AS_VIRT, src, SPYRE_AS_VIRT, dst, size);
}

/* LAUNCH @program with argument block @args on @core_mask; @record may be 0. */
static inline void spyre_prep_launch(void *pkt, uint64_t program, uint64_t args,
				     uint32_t core_mask, uint64_t record)
{
	struct spyre_pkt_launch *l = (struct spyre_pkt_launch *)pkt;

	spyre_prep_hdr(pkt, SPYRE_PKT_OP_LAUNCH);
	l->program = spyre_cpu_to_le64(program);
	l->args = spyre_cpu_to_le64(args);
	l->core_mask = spyre_cpu_to_le32(core_mask);
	l->record = spyre_cpu_to_le64(record);
}

/* SIGNAL (write @value) or WAIT (until >= @value) on the 64-bit word at @addr. */
static inline void spyre_prep_sem(void *pkt, uint8_t opcode, uint8_t space, uint64_t addr,
				  uint64_t value)
{
	struct spyre_pkt_sem *m = (struct spyre_pkt_sem *)pkt;

	spyre_prep_hdr(pkt, opcode);
	m->addr = spyre_cpu_to_le64(addr);
	m->value = spyre_cpu_to_le64(value);
	m->space = space;
}

/* TIMESTAMP: write the device clock (ns) to the 64-bit word at @addr. */
static inline void spyre_prep_timestamp(void *pkt, uint8_t space, uint64_t addr)
{
	spyre_prep_sem(pkt, SPYRE_PKT_OP_TIMESTAMP, space, addr, 0);
}

/*
 * The layouts above are the device's: checked where the header is compiled,
 * in every layer, so a change that breaks one fails the build.
 */
static_assert(sizeof(struct spyre_pkt_hdr) == 16, "packet header is 16 bytes");
static_assert(sizeof(struct spyre_pkt_copy) == SPYRE_PKT_SIZE, "COPY is one packet");
static_assert(sizeof(struct spyre_pkt_launch) == SPYRE_PKT_SIZE, "LAUNCH is one packet");
static_assert(sizeof(struct spyre_pkt_sem) == SPYRE_PKT_SIZE, "SIGNAL/WAIT is one packet");
static_assert(sizeof(struct spyre_sge) == 16, "SGL entry is 16 bytes");
static_assert(sizeof(struct spyre_launch_record) % 8 == 0, "launch record is 8-aligned");
static_assert(SPYRE_PT_ENTRIES * 8 == SPYRE_PAGE_SIZE, "a page table fills one page");
static_assert(SPYRE_PT_L0_USED <= SPYRE_PT_ENTRIES, "the VA space fits one L0 table");
static_assert((SPYRE_Q_SIZE_MAX & (SPYRE_Q_SIZE_MAX - 1)) == 0, "ring sizes are powers of 2");

#endif /* SPYRE_HW_H */
