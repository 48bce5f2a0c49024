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
	{ "register_map", test_register_map },
};

int main(int argc, char **argv)
{
	return TAP_RUN(cases, argc, argv);
}
