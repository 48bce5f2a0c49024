/*
 * spyre fault injection (docs/spyre-device.md, "Fault injection"): the
 * INJECT register arms one fault of a kind on a queue (spyre_inject(), from
 * the register file in spyre.c); the part of the queue the fault hits takes
 * it when it gets there (spyre_inject_take(): host DMA, the MMU's view of an
 * operand, the completion word; an injected hang is taken before a fetch).
 * Calls nothing else of the device's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/log.h"
#include "trace.h"
#include "spyre_int.h"

/* Consume one armed injection of @kind on @q, if any. */
bool spyre_inject_take(SpyreQueue *q, unsigned kind)
{
    bool hit;

    qemu_mutex_lock(&q->lock);
    hit = q->inject & (1u << kind);
    q->inject &= ~(1u << kind);
    qemu_mutex_unlock(&q->lock);
    if (hit) {
        trace_spyre_inject_fired(q->idx, kind);
    }
    return hit;
}

void spyre_inject(SpyreState *s, uint32_t val)
{
    unsigned qi = (val >> 8) & 0xff, kind = val & 0xff, i;

    if (kind == SPYRE_INJECT_NONE) {
        for (i = 0; i < s->params.queues; i++) {
            qemu_mutex_lock(&s->queues[i].lock);
            s->queues[i].inject = 0;
            qemu_mutex_unlock(&s->queues[i].lock);
        }
        return;
    }
    if (qi >= s->params.queues || kind >= SPYRE_INJECT_KINDS || val >> 16) {
        SPYRE_GUEST_ERR("INJECT: bad value 0x%x", val);
        return;
    }
    qemu_mutex_lock(&s->queues[qi].lock);
    s->queues[qi].inject |= 1u << kind;
    qemu_cond_broadcast(&s->queues[qi].cond);
    qemu_mutex_unlock(&s->queues[qi].lock);
    trace_spyre_inject_armed(qi, kind);
}

uint32_t spyre_inject_armed(SpyreState *s)
{
    uint32_t v = 0;
    unsigned i;

    for (i = 0; i < s->params.queues; i++) {
        qemu_mutex_lock(&s->queues[i].lock);
        v |= s->queues[i].inject;
        qemu_mutex_unlock(&s->queues[i].lock);
    }
    return v;
}
