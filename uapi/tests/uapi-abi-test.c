// SPDX-License-Identifier: MIT
/*
 * Description: the uapi headers compile stand-alone in userspace against
 * libdrm's drm.h, and the ABI structures have the documented sizes, field
 * offsets and ioctl numbers (an accidental layout change fails here before it
 * reaches a kernel).
 */
#include <stddef.h>
#include <stdio.h>

#include "spyre_accel.h"
#include "spyre_hw.h"

static int failures;

#define CHECK_EQ(exp, got) do {							\
		unsigned long long e_ = (exp), g_ = (got);			\
		if (e_ != g_) {							\
			fprintf(stderr, "FAIL %s:%d: %s: expected 0x%llx, got 0x%llx\n", \
				__FILE__, __LINE__, #got, e_, g_);		\
			failures++;						\
		}								\
	} while (0)

int main(void)
{
	CHECK_EQ(16, sizeof(struct drm_spyre_get_param));
	CHECK_EQ(0, offsetof(struct drm_spyre_get_param, param));
	CHECK_EQ(4, offsetof(struct drm_spyre_get_param, reserved));
	CHECK_EQ(8, offsetof(struct drm_spyre_get_param, value));
	/* _IOWR('d', 0x40, 16 bytes) */
	CHECK_EQ(0xc0106440, DRM_IOCTL_SPYRE_GET_PARAM);

	/* Register map invariants the driver and device rely on. */
	CHECK_EQ(0x52595053, SPYRE_ID_MAGIC);
	CHECK_EQ(0, SPYRE_REG_CAP_MEM_LO % 8);
	CHECK_EQ(SPYRE_REG_CAP_MEM_LO + 4, SPYRE_REG_CAP_MEM_HI);
	CHECK_EQ(128, SPYRE_STICK_BYTES);
	CHECK_EQ(128ULL << 30, SPYRE_MAX_MEM_SIZE);
	CHECK_EQ(0x1234, SPYRE_PCI_VENDOR_ID);	/* never IBM's 0x1014 */

	if (failures)
		return 1;
	printf("uapi-abi-test: all checks passed\n");
	return 0;
}
