/*
 * spyre: internal state shared by the device's source files, and what each
 * file offers the others. The files by concern, each calling only those
 * below it (spyre.c's header comment says what each holds):
 *
 *   spyre.c          PCI function, properties, register file, reset
 *   spyre_sriov.c    SR-IOV: the PF's capability and partitions, the VFs
 *   spyre_migrate.c  migration: vmstate, quiescing at VM stop, load checks
 *   spyre_queue.c    queue threads, queue registers, queue reset
 *   spyre_timed.c    timed mode
 *   spyre_packet.c   packet validation and execution, completion, errors
 *   spyre_dma.c      host DMA, operand cursors, DMA engine arbitration
 *   spyre_mmu.c      device MMU
 *   spyre_inject.c   fault injection
 *   spyre_irq.c      MSI-X and the device clock
 *
 * spyre_compat.h: what differs between QEMU 7.2 and 10.0 for all of them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_MISC_SPYRE_INT_H
#define HW_MISC_SPYRE_INT_H

#include "qemu/atomic.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "hw/pci/pci.h"
#include "migration/vmstate.h"
#include "spyre_compat.h"
#include "spyre_hw.h"
#include "engine/spyre_engine.h"

#define TYPE_SPYRE "spyre"
OBJECT_DECLARE_SIMPLE_TYPE(SpyreState, SPYRE)

#define SPYRE_TLB_ENTRIES 64

/* The DMA engine's turn: a queue's COPY moves at most this much at once. */
#define SPYRE_DMA_CHUNK     (256 * 1024)

#define SPYRE_GUEST_ERR(fmt, ...) do {                                      \
        char *msg_ = g_strdup_printf(fmt, ##__VA_ARGS__);                   \
        trace_spyre_guest_error(msg_);                                      \
        qemu_log_mask(LOG_GUEST_ERROR, "spyre: %s\n", msg_);                \
        g_free(msg_);                                                       \
    } while (0)

/* Device properties; validated once in spyre_check_params(). */
typedef struct SpyreParams {
    uint32_t cores;
    uint64_t scratchpad_size;
    uint64_t mem_size;
    uint32_t queues;
    uint32_t clock_mhz;
    /* Timed mode (docs/timed-mode.md): the modeled link and device memory. */
    bool timed;
    uint32_t dma_mbps;          /* host link bandwidth, 10^6 B/s */
    uint32_t dma_latency_ns;    /* fixed cost of every COPY */
    uint32_t mem_copy_mbps;     /* device memory to device memory */
    uint32_t wait_poll_ns;      /* first re-read of a WAIT's semaphore */
    /* The engine's dataflow timing model (docs/spyre-isa.md section 6). */
    uint32_t lpddr_mbps;        /* LPDDR bandwidth shared by the cores */
    uint32_t dma_burst_bytes;
    uint32_t dma_burst_overhead_bytes;
    uint32_t ring_bytes_per_cycle;  /* per link and direction */
    uint32_t ring_hop_cycles;
    /* Host threads for the engine's numerics (0: the host's CPUs, at most 8). */
    uint32_t engine_threads;
    /* BAR4 with all of device memory, for peer cards (SPYRE_FEAT_PEER_BAR). */
    OnOffAuto peer_bar;
    /* SR-IOV: TotalVFs of the PF (0: no SR-IOV capability). */
    uint32_t sriov_vfs;
} SpyreParams;

/* Where a queue's packet is on the virtual timeline (timed mode only). */
typedef enum SpyreTimedPhase {
    SPYRE_T_IDLE,           /* no packet in progress */
    SPYRE_T_PENDING,        /* done functionally, completes at t_done */
    SPYRE_T_WAITING,        /* a WAIT, re-read at the timer */
} SpyreTimedPhase;

typedef struct SpyreTLBEntry {
    uint64_t tag;           /* ctx << 32 | VA page number, + 1; 0 = empty */
    uint64_t pte;           /* leaf PTE */
    uint64_t page_size;
} SpyreTLBEntry;

/* A contiguous piece of an operand: device memory or host bus addresses. */
typedef struct SpyreSeg {
    bool devmem;
    uint64_t addr;
    uint64_t len;
} SpyreSeg;

/*
 * Not a guest-visible error: the packet stopped at a pause point (the VM
 * stopped during a WAIT) and runs again from the start when the VM runs.
 */
#define SPYRE_FAULT_REPLAY  UINT32_MAX

/* Why a packet failed; filled by whoever detects the problem. */
typedef struct SpyreFault {
    uint32_t error;         /* SPYRE_ERR_* */
    uint64_t addr;          /* SPYRE_Q_FAULT_* for SPYRE_ERR_FAULT / _DMA */
    uint32_t info;
    uint32_t core;          /* SPYRE_ERR_ENGINE */
    uint32_t pc;
} SpyreFault;

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

typedef struct SpyreQueue {
    struct SpyreState *s;
    unsigned idx;
    QemuThread thread;

    /*
     * Protects every field below up to the worker-private ones. Never held
     * across DMA or while taking the BQL: the vCPU thread takes it (under
     * the BQL) from MMIO handlers.
     */
    QemuMutex lock;
    QemuCond cond;          /* work, enable, reset or quit */
    uint64_t base;
    uint32_t size;
    uint32_t ctrl;          /* SPYRE_QCTRL_ENABLE | priority */
    uint32_t head;
    uint32_t tail;
    uint64_t compl_addr;
    uint32_t status;        /* SPYRE_QSTAT_* */
    uint32_t error;
    uint64_t err_seq;
    uint64_t fault_addr;
    uint32_t fault_info;
    uint32_t fault_core;    /* SPYRE_ERR_ENGINE: core and pc */
    uint32_t fault_pc;
    uint32_t done;
    uint32_t epoch;         /* bumped by a reset; stale work is discarded */
    uint32_t inject;        /* armed SPYRE_INJECT_* kinds, one bit each */
    bool hung;              /* SPYRE_INJECT_HANG fired */
    bool quit;

    /*
     * Worker-private: only the queue's own thread touches these (in timed
     * mode, which has no worker, the queue's timer callback).
     */
    SpyreTLBEntry tlb[SPYRE_TLB_ENTRIES];
    uint32_t tlb_gen;
    uint64_t moved_link;    /* last COPY: bytes with a host side */
    uint64_t moved_mem;     /* ... and device memory to device memory */
    uint64_t launch_ns;     /* last LAUNCH: the engine's modeled time */

    /*
     * Timed mode: the packet in progress runs in the queue's
     * QEMU_CLOCK_VIRTUAL timer callback and completes at a virtual time.
     * Only touched under the BQL (timer callback, MMIO, reset).
     */
    QEMUTimer *t_timer;
    uint32_t t_phase;       /* SpyreTimedPhase */
    bool t_running;         /* a packet executes (a reset may run inside) */
    bool t_ok;
    SpyreFault t_fault;
    int64_t t_done;         /* SPYRE_T_PENDING: completion, virtual ns */
    uint32_t t_poll_ns;     /* SPYRE_T_WAITING: next re-read interval */
    uint64_t t_compl;       /* completion word address at fetch */
    uint32_t t_head;        /* HEAD at fetch */
    uint8_t t_raw[SPYRE_PKT_SIZE];
    int64_t t_expire;       /* migration: the timer's deadline, or -1 */
} SpyreQueue;

struct SpyreState {
    PCIDevice parent_obj;

    MemoryRegion regs;
    MemoryRegion mem;       /* device memory (sparse host backing) */
    MemoryRegion window;    /* BAR2: alias into mem */
    MemoryRegion peer_bar;  /* BAR4 (when present): container of peer_mem */
    MemoryRegion peer_mem;  /* alias of mem's first mem-size bytes */
    bool has_peer_bar;
    SpyreParams params;
    uint8_t *mem_ptr;

    uint32_t scratch;
    uint32_t reset_count;
    int pm_cap;             /* offset of the PCI PM capability */
    uint32_t window_lo;
    uint64_t window_base;
    int64_t clock_base_ns;
    uint32_t clock_hi_latch;

    /* MMU configuration: written under the BQL, read by workers. */
    uint64_t ctx_table;
    uint32_t ctx_count;
    uint32_t mmu_gen;       /* bumped on invalidate and reset (atomic) */

    uint64_t err_queues;    /* atomic: queues stopped on an error */

    /* Interrupts are raised from workers through a bottom half. */
    QEMUBH *irq_bh;
    uint64_t irq_pending[2];        /* atomic bitmap of MSI-X vectors */

    /* SIGNAL wakes WAITs: a generation counter avoids lost wake-ups. */
    QemuMutex sem_lock;     /* Protects sem_gen */
    QemuCond sem_cond;
    uint64_t sem_gen;
    /* On the list of every card: a SIGNAL wakes WAITs on them all. */
    QLIST_ENTRY(SpyreState) sem_next;

    /*
     * The DMA engine is shared: queues take turns in SPYRE_DMA_CHUNK
     * pieces, higher priority first, first come first served within one.
     */
    QemuMutex arb_lock;     /* Protects the arb_* fields */
    QemuCond arb_cond;
    bool arb_busy;
    uint64_t arb_next[SPYRE_QCTRL_MAX_PRIO + 1];
    uint64_t arb_serving[SPYRE_QCTRL_MAX_PRIO + 1];

    /* The cores: one compute fabric, so launches take turns. */
    QemuMutex engine_lock;  /* Protects engine */
    struct spyre_engine *engine;

    /* Timed mode: when the shared resources are next free (virtual ns). */
    int64_t t_dma_free;
    int64_t t_engine_free;

    /*
     * The VM is stopped: workers fetch nothing and a WAIT gives way
     * (spyre_queues_pause()). Written under the BQL, read by workers.
     */
    bool paused;
    VMChangeStateEntry *vmse;
    /* Migration only: the stream's copy of params and of the clock. */
    SpyreParams mig_params;
    int64_t mig_clock_ns;

    /*
     * SR-IOV (spyre_sriov.c). A VF is a SpyreState of its own (queues,
     * MMU, interrupts, engine) whose device memory is its partition of the
     * PF's: mem_ptr and params.mem_size cover the partition only, so every
     * bounds check of the device confines the VF to it.
     */
    struct SpyreState *pf;  /* VF: its PF; NULL on the PF */
    uint64_t mem_base;      /* VF: the partition's offset in pf->mem */
    uint64_t window_size;   /* bytes BAR2's window shows (VF: may be less) */
    MemoryRegion vf_bar2;   /* VF: BAR2 container of the window */
    MemoryRegion vf_msix;   /* VF: BAR4, the MSI-X table and PBA */
    bool vf_bound;          /* VF: holds its partition and the blocker */
    /* PF: the partitions, written while VF Enable is clear (BQL). */
    uint64_t vf_base[SPYRE_MAX_VFS];
    uint64_t vf_size[SPYRE_MAX_VFS];
    uint32_t vfs_live;      /* PF: VFs enabled (bound) */
    Error *vf_blocker;      /* PF: migration blocker while VFs are enabled */

    SpyreQueue queues[SPYRE_MAX_QUEUES];
};

#define TYPE_SPYRE_VF "spyre-vf"

/* spyre_sriov.c: called by spyre.c and spyre_migrate.c */
#define SPYRE_ARI_CAP_OFFSET    0x100   /* then SR-IOV at 0x160 */
bool spyre_sriov_check_params(SpyreState *s, Error **errp);
bool spyre_sriov_pf_init(SpyreState *s, Error **errp);
void spyre_sriov_pf_exit(SpyreState *s);
void spyre_sriov_pf_reset(SpyreState *s);
bool spyre_sriov_read(SpyreState *s, hwaddr addr, uint64_t *val);
bool spyre_sriov_write(SpyreState *s, hwaddr addr, uint32_t val);
bool spyre_sriov_vf_init(SpyreState *s, Error **errp);
void spyre_sriov_vf_fini(SpyreState *s);
void spyre_sriov_vf_reset(SpyreState *s);
extern const VMStateDescription spyre_vmstate_sriov;

/* spyre_migrate.c: called by spyre.c */
extern const VMStateDescription spyre_vmstate;
void spyre_migrate_init(SpyreState *s);
void spyre_migrate_fini(SpyreState *s);

/* spyre_queue.c: called by spyre.c */
void spyre_queues_init(SpyreState *s);
void spyre_queues_fini(SpyreState *s);
void spyre_queue_reset(SpyreQueue *q);
uint64_t spyre_queue_read(SpyreQueue *q, unsigned reg);
uint64_t spyre_queue_engine_read(SpyreQueue *q, unsigned reg);
void spyre_queue_write(SpyreQueue *q, unsigned reg, uint32_t val);
bool spyre_queue_ring_ok(const SpyreQueue *q);
void spyre_queues_pause(SpyreState *s);
void spyre_queues_resume(SpyreState *s);

/* spyre_timed.c: called by spyre_queue.c */
void spyre_timed_init(SpyreQueue *q);
void spyre_timed_fini(SpyreQueue *q);
void spyre_timed_reset_locked(SpyreQueue *q);
void spyre_timed_kick(SpyreQueue *q);
int64_t spyre_timed_expire(SpyreQueue *q);
bool spyre_timed_check(SpyreQueue *q, char **why);
void spyre_timed_restore(SpyreQueue *q);

/* spyre_packet.c: called by spyre_queue.c and spyre_timed.c */
uint32_t spyre_packet_validate(const uint8_t *raw);
bool spyre_packet_execute(SpyreQueue *q, const uint8_t *raw, uint32_t epoch,
                          unsigned prio, SpyreFault *f);
bool spyre_sem_access(SpyreQueue *q, const struct spyre_pkt_sem *p,
                      uint64_t *val, bool write, SpyreFault *f);
void spyre_sem_kick(SpyreState *s);
void spyre_sem_register(SpyreState *s);
void spyre_sem_unregister(SpyreState *s);
void spyre_sem_kick_cards(SpyreState *from,
                          void (*timed_wake)(SpyreState *s, int64_t now),
                          int64_t now);
bool spyre_queue_may_fetch_locked(SpyreQueue *q);
bool spyre_queue_write_completion(SpyreQueue *q, uint64_t compl, uint64_t seq,
                                  SpyreFault *f);
void spyre_queue_finish_locked(SpyreQueue *q, bool ok, uint32_t head,
                               uint64_t seq, uint16_t flags,
                               const SpyreFault *f);
void spyre_queue_fail_locked(SpyreQueue *q, uint64_t seq, const SpyreFault *f);

/* spyre_dma.c: called by spyre_packet.c, spyre_timed.c, spyre_queue.c */
bool spyre_host_dma(SpyreQueue *q, uint64_t addr, void *buf, uint64_t len,
                    bool write, unsigned source, SpyreFault *f);
void spyre_cursor_init(SpyreCursor *c, uint8_t space, uint16_t ctx,
                       uint64_t addr, unsigned access, unsigned source);
bool spyre_cursor_peek(SpyreQueue *q, SpyreCursor *c, uint64_t want,
                       SpyreSeg *seg, SpyreFault *f);
void spyre_cursor_advance(SpyreCursor *c, uint64_t n);
void spyre_arb_acquire(SpyreState *s, unsigned prio);
void spyre_arb_release(SpyreState *s, unsigned prio);
void spyre_mem_dirty(SpyreState *s, uint64_t addr, uint64_t len);
bool spyre_dma_move(SpyreQueue *q, SpyreSeg *src, SpyreSeg *dst, uint64_t n,
                    uint8_t **bounce, SpyreFault *f);

/* spyre_mmu.c: called by spyre_dma.c and spyre_packet.c */
bool spyre_mmu_translate(SpyreQueue *q, uint16_t ctx, uint64_t va,
                         unsigned access, unsigned source, SpyreSeg *seg,
                         SpyreFault *f);

/* spyre_inject.c: called by spyre.c, spyre_packet.c and spyre_dma.c */
void spyre_inject(SpyreState *s, uint32_t val);
uint32_t spyre_inject_armed(SpyreState *s);
bool spyre_inject_take(SpyreQueue *q, unsigned kind);

/* spyre_irq.c: called by spyre.c, spyre_timed.c and spyre_packet.c */
void spyre_irq_init(SpyreState *s);
void spyre_irq_fini(SpyreState *s);
void spyre_raise_irq(SpyreState *s, unsigned vector);
void spyre_irq_flush(SpyreState *s);
int64_t spyre_clock_now(SpyreState *s);
int64_t spyre_clock_ns(SpyreState *s);
int64_t spyre_vclock_ns(void);

/* A reset of @q since @epoch was read: its work in flight is stale. */
static inline bool spyre_queue_stale(SpyreQueue *q, uint32_t epoch)
{
    return qatomic_read(&q->epoch) != epoch;
}

#endif
