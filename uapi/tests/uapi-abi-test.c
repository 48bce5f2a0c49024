// SPDX-License-Identifier: MIT
/*
 * Description: the uapi headers compile stand-alone in userspace against
 * libdrm's drm.h, and the ABI structures have the documented sizes, field
 * offsets and ioctl numbers (an accidental layout change fails here before it
 * reaches a kernel). The same headers compile as C++ too (the Makefile's
 * rule for this test checks that with -pedantic).
 */
#include <stddef.h>
#include <stdio.h>

#include "spyre_accel.h"
#include "spyre_devcoredump.h"
#include "spyre_hw.h"
#include "../../tests/tap.h"

static void test_get_param_layout(void)
{
	TAP_EQ(16, sizeof(struct drm_spyre_get_param));
	TAP_EQ(0, offsetof(struct drm_spyre_get_param, param));
	TAP_EQ(4, offsetof(struct drm_spyre_get_param, reserved));
	TAP_EQ(8, offsetof(struct drm_spyre_get_param, value));
	/* _IOWR('d', 0x40, 16 bytes) */
	TAP_EQ(0xc0106440, DRM_IOCTL_SPYRE_GET_PARAM);
}

/* The one fault record: 32 bytes, embedded at the offsets its fields had. */
static void test_fault_layout(void)
{
	TAP_EQ(32, sizeof(struct drm_spyre_fault));
	TAP_EQ(0, offsetof(struct drm_spyre_fault, error));
	TAP_EQ(4, offsetof(struct drm_spyre_fault, hw_error));
	TAP_EQ(8, offsetof(struct drm_spyre_fault, addr));
	TAP_EQ(16, offsetof(struct drm_spyre_fault, info));
	TAP_EQ(20, offsetof(struct drm_spyre_fault, packet));
	TAP_EQ(24, offsetof(struct drm_spyre_fault, core));
	TAP_EQ(28, offsetof(struct drm_spyre_fault, pc));
}

static void test_queue_error_layout(void)
{
	TAP_EQ(56, sizeof(struct drm_spyre_queue_error));
	TAP_EQ(0, offsetof(struct drm_spyre_queue_error, queue_id));
	TAP_EQ(4, offsetof(struct drm_spyre_queue_error, pad));
	TAP_EQ(8, offsetof(struct drm_spyre_queue_error, error_count));
	TAP_EQ(16, offsetof(struct drm_spyre_queue_error, job_seq));
	/* error, hw_error, fault_addr, fault_info, packet, core, pc: 24..55 as before */
	TAP_EQ(24, offsetof(struct drm_spyre_queue_error, fault));
	TAP_EQ(32, offsetof(struct drm_spyre_queue_error, fault.addr));
	TAP_EQ(52, offsetof(struct drm_spyre_queue_error, fault.pc));
	/* _IOWR('d', 0x47, 56 bytes) */
	TAP_EQ(0xc0386447, DRM_IOCTL_SPYRE_QUEUE_ERROR);
}

/* SUBMIT grew at its end: the first 64 bytes are what old callers pass. */
static void test_submit_layout(void)
{
	TAP_EQ(128, sizeof(struct drm_spyre_submit));
	TAP_EQ(0, offsetof(struct drm_spyre_submit, queue_id));
	TAP_EQ(4, offsetof(struct drm_spyre_submit, flags));
	TAP_EQ(8, offsetof(struct drm_spyre_submit, packets));
	TAP_EQ(16, offsetof(struct drm_spyre_submit, packet_count));
	TAP_EQ(20, offsetof(struct drm_spyre_submit, bo_count));
	TAP_EQ(24, offsetof(struct drm_spyre_submit, bo_handles));
	TAP_EQ(32, offsetof(struct drm_spyre_submit, in_syncs));
	TAP_EQ(40, offsetof(struct drm_spyre_submit, in_sync_count));
	TAP_EQ(44, offsetof(struct drm_spyre_submit, out_sync_handle));
	TAP_EQ(48, offsetof(struct drm_spyre_submit, out_sync_point));
	TAP_EQ(56, offsetof(struct drm_spyre_submit, job_seq));
	TAP_EQ(64, offsetof(struct drm_spyre_submit, errors_seen));
	TAP_EQ(72, offsetof(struct drm_spyre_submit, error_count));
	TAP_EQ(80, offsetof(struct drm_spyre_submit, error_job_seq));
	TAP_EQ(88, offsetof(struct drm_spyre_submit, fault));
	TAP_EQ(120, offsetof(struct drm_spyre_submit, wait_bound_ms));
	TAP_EQ(124, offsetof(struct drm_spyre_submit, pad));
	TAP_EQ(1, DRM_SPYRE_SUBMIT_QUEUE_ERROR);
	TAP_EQ(2, DRM_SPYRE_SUBMIT_WAIT_BOUND);
	TAP_EQ(3, DRM_SPYRE_SUBMIT_FLAGS);
	TAP_EQ(60000, DRM_SPYRE_MAX_WAIT_BOUND_MS);
	/* _IOWR('d', 0x46, 128 bytes); old callers' numbers had 64 (0xc0406446) and 120 (0xc0786446) */
	TAP_EQ(0xc0806446, DRM_IOCTL_SPYRE_SUBMIT);
}

/* The coredump's byte layout (docs/coredump.md), version 1. */
static void test_devcoredump_layout(void)
{
	TAP_EQ(80, sizeof(struct spyre_dump_header));
	TAP_EQ(8, sizeof(struct spyre_dump_section));
	TAP_EQ(64, sizeof(struct spyre_dump_device));
	TAP_EQ(104, sizeof(struct spyre_dump_queue));
	TAP_EQ(88, offsetof(struct spyre_dump_queue, seqno));
	TAP_EQ(96, offsetof(struct spyre_dump_queue, completion));
	TAP_EQ(96, sizeof(struct spyre_dump_job));
	TAP_EQ(16, offsetof(struct spyre_dump_job, job_seq));
	TAP_EQ(24, offsetof(struct spyre_dump_job, hw_seqno));
	TAP_EQ(44, offsetof(struct spyre_dump_job, ring_end));
	/* error, hw_error, fault_addr, fault_info, packet, core, pc: 48..79 as before */
	TAP_EQ(48, offsetof(struct spyre_dump_job, fault));
	TAP_EQ(56, offsetof(struct spyre_dump_job, fault.addr));
	TAP_EQ(64, offsetof(struct spyre_dump_job, fault.info));
	TAP_EQ(76, offsetof(struct spyre_dump_job, fault.pc));
	TAP_EQ(80, offsetof(struct spyre_dump_job, comm));
	TAP_EQ(320, sizeof(struct spyre_dump_launch));
	TAP_EQ(48, sizeof(struct spyre_dump_pt));
	TAP_EQ(32, sizeof(struct spyre_dump_range));
	TAP_EQ(40, sizeof(struct spyre_dump_walk));
}

/* Register map invariants the driver and device rely on. */
static void test_register_map(void)
{
	TAP_EQ(0x52595053, SPYRE_ID_MAGIC);
	TAP_EQ(0, SPYRE_REG_CAP_MEM_LO % 8);
	TAP_EQ(SPYRE_REG_CAP_MEM_LO + 4, SPYRE_REG_CAP_MEM_HI);
	TAP_EQ(128, SPYRE_STICK_BYTES);
	TAP_EQ(128ULL << 30, SPYRE_MAX_MEM_SIZE);
	TAP_EQ(0x1234, SPYRE_PCI_VENDOR_ID);	/* never IBM's 0x1014 */
	/* A new packet error raises the count, and libspyre's names follow. */
	TAP_EQ(SPYRE_ERR_ENGINE + 1, SPYRE_ERR_COUNT);
}

static const struct tap_case cases[] = {
	{ "get_param_layout", test_get_param_layout },
	{ "fault_layout", test_fault_layout },
	{ "queue_error_layout", test_queue_error_layout },
	{ "submit_layout", test_submit_layout },
	{ "devcoredump_layout", test_devcoredump_layout },
	{ "register_map", test_register_map },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
