/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * spyre_submit.h - DRM_IOCTL_SPYRE_SUBMIT.
 */
#ifndef __SPYRE_SUBMIT_H__
#define __SPYRE_SUBMIT_H__

struct drm_device;
struct drm_file;

int spyre_submit_ioctl(struct drm_device *dev, void *data, struct drm_file *file);

#endif /* __SPYRE_SUBMIT_H__ */
