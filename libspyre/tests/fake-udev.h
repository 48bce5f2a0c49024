/* SPDX-License-Identifier: MIT */
/*
 * fake-udev.h - the libudev a host test of libspyre links instead of the real
 * one: one accel device, bound to spyre, whose node is the test's fake driver
 * file (the including file defines `static char devnode[64]` first). Include
 * it in exactly one file of a test program.
 */
#ifndef LIBSPYRE_TESTS_FAKE_UDEV_H
#define LIBSPYRE_TESTS_FAKE_UDEV_H

#include <libudev.h>
#include <sys/sysmacros.h>

/* libudev: one accel device, bound to spyre, whose node is the memfd. */
static char udev_obj;

#define UDEV_OBJ(type) ((struct type *)(void *)&udev_obj)

struct udev *udev_new(void) { return UDEV_OBJ(udev); }
struct udev *udev_unref(struct udev *u) { (void)u; return NULL; }
struct udev_enumerate *udev_enumerate_new(struct udev *u)
{
	(void)u;
	return UDEV_OBJ(udev_enumerate);
}
struct udev_enumerate *udev_enumerate_unref(struct udev_enumerate *e) { (void)e; return NULL; }
int udev_enumerate_add_match_subsystem(struct udev_enumerate *e, const char *s) { (void)e; (void)s; return 0; }
int udev_enumerate_scan_devices(struct udev_enumerate *e) { (void)e; return 0; }
struct udev_list_entry *udev_enumerate_get_list_entry(struct udev_enumerate *e)
{
	(void)e;
	return UDEV_OBJ(udev_list_entry);
}
struct udev_list_entry *udev_list_entry_get_next(struct udev_list_entry *l) { (void)l; return NULL; }
const char *udev_list_entry_get_name(struct udev_list_entry *l) { (void)l; return "/sys/class/accel/accel0"; }
struct udev_device *udev_device_new_from_syspath(struct udev *u, const char *p)
{
	(void)u;
	(void)p;
	return UDEV_OBJ(udev_device);
}
struct udev_device *udev_device_unref(struct udev_device *d) { (void)d; return NULL; }
struct udev_device *udev_device_get_parent_with_subsystem_devtype(struct udev_device *d, const char *s,
								  const char *t)
{
	(void)s;
	(void)t;
	return d;
}
const char *udev_device_get_driver(struct udev_device *d) { (void)d; return "spyre"; }
const char *udev_device_get_devnode(struct udev_device *d) { (void)d; return devnode; }
dev_t udev_device_get_devnum(struct udev_device *d) { (void)d; return makedev(261, 0); }
const char *udev_device_get_sysname(struct udev_device *d) { (void)d; return "0000:00:04.0"; }
const char *udev_device_get_sysattr_value(struct udev_device *d, const char *a)
{
	(void)d;
	(void)a;
	return "-1";
}

#endif
