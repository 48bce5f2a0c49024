/*
 * spyre interrupts and the device clock. MSI-X: one vector per queue plus
 * one for errors; whoever finishes a packet or stops a queue marks its
 * vector pending (spyre_raise_irq(), from any thread) and the pending
 * vectors are sent under the BQL (spyre_irq_flush(): a bottom half in
 * functional mode, the caller itself in timed mode). The device clock
 * (CLOCK_LO/HI, TIMESTAMP) counts ns from the last reset: host time, or in
 * timed mode the virtual timeline. Called by spyre.c, spyre_timed.c and
 * spyre_packet.c; calls no other file of the device.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/atomic.h"
#include "qemu/host-utils.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "hw/pci/msix.h"
#include "trace.h"
#include "spyre_int.h"

int64_t spyre_vclock_ns(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

/* The device clock: host time, or in timed mode the virtual timeline. */
int64_t spyre_clock_now(SpyreState *s)
{
    return s->params.timed ? spyre_vclock_ns() :
           qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
}

int64_t spyre_clock_ns(SpyreState *s)
{
    return spyre_clock_now(s) - s->clock_base_ns;
}

/*
 * Called from queue workers: MSI-X is sent from the main loop, under the BQL.
 * In timed mode the caller holds the BQL on the vCPU's timeline and sends the
 * pending vectors itself with spyre_irq_flush(), once it holds no queue lock:
 * a bottom half would run at a host-dependent point of the guest's execution.
 */
void spyre_raise_irq(SpyreState *s, unsigned vector)
{
    qatomic_or(&s->irq_pending[vector / 64], 1ULL << (vector % 64));
    if (!s->params.timed) {
        qemu_bh_schedule(s->irq_bh);
    }
}

/* Send the pending MSI-X vectors. Under the BQL, no queue lock held. */
void spyre_irq_flush(SpyreState *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    unsigned w, v;

    for (w = 0; w < ARRAY_SIZE(s->irq_pending); w++) {
        uint64_t bits = qatomic_xchg(&s->irq_pending[w], 0);

        while (bits) {
            v = ctz64(bits);
            bits &= bits - 1;
            trace_spyre_irq(w * 64 + v);
            if (msix_enabled(pdev)) {
                msix_notify(pdev, w * 64 + v);
            }
        }
    }
}

static void spyre_irq_bh(void *opaque)
{
    spyre_irq_flush(opaque);
}

void spyre_irq_init(SpyreState *s)
{
    s->irq_bh = qemu_bh_new(spyre_irq_bh, s);
}

void spyre_irq_fini(SpyreState *s)
{
    qemu_bh_delete(s->irq_bh);
}
