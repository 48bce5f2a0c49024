/* SPDX-License-Identifier: MIT */
#ifndef LIBSPYRE_INTERNAL_H
#define LIBSPYRE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "spyre.h"

#define SPYRE_EXPORT __attribute__((visibility("default")))

#define SPYRE_STICK		128u
#define SPYRE_NCLASSES		14	/* 128 B << 0 .. 128 B << 13 = 1 MiB */
#define SPYRE_CHUNK_SIZE	(2u << 20)
#define SPYRE_STAGING_SIZE	(4u << 20)

/* One buffer object of the driver. */
struct spyre_bo {
	uint32_t handle;
	uint64_t va;
	uint64_t size;
	void *map;		/* host BOs: the CPU mapping */
};

/* A chunk of device memory carved into blocks of one size class. */
struct spyre_chunk {
	struct spyre_bo bo;
	uint32_t used;		/* blocks handed out */
	struct spyre_chunk *next;
};

/* One live allocation, for spyre_free() and pointer attributes. */
struct spyre_alloc {
	uint64_t base;		/* device address */
	uint64_t span;		/* bytes reserved for it */
	uint64_t size;		/* bytes requested */
	uint32_t type;		/* enum spyre_memory_type */
	int cls;		/* size class, or -1 for its own BO */
	struct spyre_chunk *chunk;
	struct spyre_bo bo;	/* own BO (cls == -1) */
};

struct spyre_free_block {
	uint64_t va;
	struct spyre_chunk *chunk;
};

struct spyre_device {
	int fd;
	struct spyre_device_props props;

	/* Protects everything below */
	pthread_mutex_t lock;
	struct spyre_alloc *allocs;	/* sorted by base */
	size_t nallocs, cap_allocs;
	struct spyre_chunk *chunks[SPYRE_NCLASSES];
	struct spyre_free_block *free[SPYRE_NCLASSES];
	size_t nfree[SPYRE_NCLASSES], cap_free[SPYRE_NCLASSES];
	struct spyre_bo *large_cache;	/* freed large BOs */
	size_t nlarge, cap_large;
	struct spyre_mem_stats stats;

	/* Staging for pageable host memory; internal stream for sync copies. */
	pthread_mutex_t staging_lock;
	struct spyre_bo staging;
	struct spyre_bo values;		/* memset sources: stick v holds byte v */
	struct spyre_stream *internal;
	struct spyre_stream **streams;
	size_t nstreams;
};

/* Record a detail for spyre_last_error() and return @status. */
int spyre_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* memory.c */
int spyre_bo_new(struct spyre_device *dev, uint64_t size, uint32_t flags, struct spyre_bo *bo);
void spyre_bo_del(struct spyre_device *dev, struct spyre_bo *bo);
const struct spyre_alloc *spyre_alloc_find_locked(struct spyre_device *dev, uint64_t ptr);
const struct spyre_alloc *spyre_alloc_find_host_locked(struct spyre_device *dev, const void *p);
void spyre_memory_fini(struct spyre_device *dev);

/* stream.c */
int spyre_stream_submit(struct spyre_stream *s, const void *packets, uint32_t count);
void spyre_streams_fini(struct spyre_device *dev);

#endif
