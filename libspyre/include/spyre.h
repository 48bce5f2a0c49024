/* SPDX-License-Identifier: MIT */
/*
 * spyre.h - libspyre, the runtime for spyre dataflow inference accelerators.
 *
 * Conventions (in the manner of liburing and libbpf):
 *  - Every function returns 0 (or a non-negative count) on success and a
 *    negative errno-style status on failure. spyre_last_error() then holds a
 *    human-readable detail for the calling thread.
 *  - Handles are opaque. Structures the library fills start with a size field
 *    the caller sets to sizeof(the structure), so they can grow compatibly.
 */
#ifndef LIBSPYRE_SPYRE_H
#define LIBSPYRE_SPYRE_H

#include <stddef.h>
#include <stdint.h>

#include "spyre_isa.h"	/* SPYRE_DT_*: the dtype of tensors and launch records */

#ifdef __cplusplus
extern "C" {
#endif

#define LIBSPYRE_VERSION_MAJOR 0
#define LIBSPYRE_VERSION_MINOR 11

/** An open spyre device. */
typedef struct spyre_device spyre_device_t;

/** Properties of a device, as reported by its driver. */
struct spyre_device_props {
	uint32_t size;			/**< In: sizeof(struct spyre_device_props). */
	uint32_t index;			/**< Device index (0 .. count-1). */
	char pci_address[32];		/**< PCI address, e.g. "0000:00:04.0". */
	char devnode[64];		/**< Device node, e.g. "/dev/accel/accel0". */
	uint16_t pci_vendor;		/**< PCI vendor ID. */
	uint16_t pci_device;		/**< PCI device ID. */
	uint32_t hw_version;		/**< Hardware interface version, major << 16 | minor. */
	uint32_t num_cores;		/**< Compute cores. */
	uint32_t scratchpad_bytes;	/**< Scratchpad bytes per core. */
	uint32_t stick_bytes;		/**< Bytes per stick. */
	uint32_t num_queues;		/**< Hardware command queues. */
	uint32_t clock_mhz;		/**< Core clock in MHz. */
	uint32_t pad;			/**< Zero. */
	uint64_t mem_size;		/**< Device memory in bytes. */
	uint64_t features;		/**< SPYRE_FEAT_* bits of spyre_hw.h. */
	int32_t numa_node;		/**< NUMA node of the PCI device, -1 if none. */
	uint32_t pad2;			/**< Zero. */
};

/**
 * spyre_device_count() - number of spyre devices bound to the spyre driver.
 * Never fails: 0 when there are none or discovery failed (see spyre_last_error()).
 */
int spyre_device_count(void);

/** spyre_set_device() / spyre_get_device() - the calling thread's current device index. */
int spyre_set_device(int index);
int spyre_get_device(int *index);

/**
 * spyre_device_open() - open device @index (0 .. count-1).
 * @index: device index, ordered by accel minor number.
 * @out: receives the handle; close it with spyre_device_close().
 * Return: 0, -ENODEV for an index with no device, or another negative status.
 */
int spyre_device_open(int index, spyre_device_t **out);

/** spyre_device_close() - close a handle from spyre_device_open(); NULL is a no-op. */
void spyre_device_close(spyre_device_t *dev);

/**
 * spyre_device_get_props() - fill @props for @dev.
 * @props: caller sets props->size = sizeof(*props) before the call.
 * Return: 0, or -EINVAL when props->size is too small to hold the base fields.
 */
int spyre_device_get_props(spyre_device_t *dev, struct spyre_device_props *props);

/**
 * spyre_device_get_param() - read one DRM_SPYRE_PARAM_* value from the driver.
 * Return: 0, or a negative status (-EINVAL for an unknown parameter).
 */
int spyre_device_get_param(spyre_device_t *dev, uint32_t param, uint64_t *value);

/** spyre_device_fd() - the device's file descriptor (for libdrm calls). */
int spyre_device_fd(const spyre_device_t *dev);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

/** A device pointer: a device virtual address in this process's context. */
typedef uint64_t spyre_dptr_t;

/**
 * spyre_malloc() - allocate device memory.
 *
 * Small sizes come from a caching sub-allocator (no ioctl once warm);
 * allocations are 128-byte (stick) aligned. Return: 0, -EINVAL for size 0,
 * -ENOMEM.
 */
int spyre_malloc(spyre_device_t *dev, size_t size, spyre_dptr_t *ptr);

/** spyre_free() - release device memory; 0 is a no-op. -EINVAL for an unknown pointer. */
int spyre_free(spyre_device_t *dev, spyre_dptr_t ptr);

/**
 * spyre_malloc_host() - allocate pinned host memory the device can reach.
 * Copies from and to it need no staging. Return: 0, -EINVAL, -ENOMEM.
 */
int spyre_malloc_host(spyre_device_t *dev, size_t size, void **host);

/** spyre_free_host() - release memory from spyre_malloc_host(). */
int spyre_free_host(spyre_device_t *dev, void *host);

enum spyre_memory_type {
	SPYRE_MEMORY_UNREGISTERED = 0,	/**< not known to libspyre */
	SPYRE_MEMORY_DEVICE = 1,	/**< from spyre_malloc() */
	SPYRE_MEMORY_HOST = 2,		/**< from spyre_malloc_host() */
};

/** What an (interior) pointer belongs to. */
struct spyre_pointer_attributes {
	uint32_t size;			/**< In: sizeof(struct spyre_pointer_attributes). */
	uint32_t type;			/**< enum spyre_memory_type. */
	int32_t device;			/**< Device index. */
	uint32_t pad;
	spyre_dptr_t device_base;	/**< Device address of the allocation. */
	void *host_base;		/**< Host address (SPYRE_MEMORY_HOST), else NULL. */
	uint64_t alloc_size;		/**< Bytes requested for the allocation. */
};

/**
 * spyre_pointer_get_attributes() - resolve @ptr (a device address, or a host
 * address cast to uint64_t) to its allocation. Unknown pointers give type
 * SPYRE_MEMORY_UNREGISTERED and return 0.
 */
int spyre_pointer_get_attributes(spyre_device_t *dev, uint64_t ptr,
				 struct spyre_pointer_attributes *attr);

/** Allocator statistics. */
struct spyre_mem_stats {
	uint32_t size;			/**< In: sizeof(struct spyre_mem_stats). */
	uint32_t pad;
	uint64_t allocated;		/**< Bytes handed out by spyre_malloc(). */
	uint64_t peak_allocated;	/**< High-water mark of @allocated. */
	uint64_t reserved;		/**< Device memory held in buffers (used + cached). */
	uint64_t alloc_calls;		/**< spyre_malloc() calls. */
	uint64_t bo_creates;		/**< Of those, calls that needed a new buffer (an ioctl). */
	/* Since 0.2: a caller's older, smaller structure is filled up to its size. */
	uint64_t h2d_bytes;		/**< Bytes copied host -> device by every spyre_memcpy*() call. */
	uint64_t d2h_bytes;		/**< Bytes copied device -> host. */
	uint64_t d2d_bytes;		/**< Bytes copied device -> device. */
};

int spyre_mem_get_stats(spyre_device_t *dev, struct spyre_mem_stats *stats);

/** spyre_empty_cache() - give cached, unused device memory back to the driver. */
int spyre_empty_cache(spyre_device_t *dev);

/* ------------------------------------------------------------------------ */
/* Streams, events, copies                                                    */
/* ------------------------------------------------------------------------ */

typedef struct spyre_stream spyre_stream_t;
typedef struct spyre_event spyre_event_t;

enum spyre_stream_priority {
	SPYRE_STREAM_PRIORITY_LOW = 0,
	SPYRE_STREAM_PRIORITY_NORMAL = 1,
	SPYRE_STREAM_PRIORITY_HIGH = 2,
};

/** spyre_stream_create() - an ordered stream of device work on its own queue. */
int spyre_stream_create(spyre_device_t *dev, int priority, spyre_stream_t **stream);
/** spyre_stream_destroy() - wait for the stream's work, then release it; its events stay valid. */
int spyre_stream_destroy(spyre_stream_t *stream);
/**
 * spyre_stream_synchronize() - wait until all work on @stream is done.
 * Return: 0, or -EIO once a job of the stream failed: the stream is poisoned,
 * every later call on it fails the same way, and spyre_last_error() carries
 * the device's fault record. Other streams are unaffected.
 */
int spyre_stream_synchronize(spyre_stream_t *stream);
/** spyre_stream_query() - 0 when all work is done, -EBUSY while some runs, -EIO if poisoned. */
int spyre_stream_query(spyre_stream_t *stream);
/**
 * spyre_stream_wait_event() - later work on @stream waits for @event (no host
 * wait); an event of another card must be SPYRE_EVENT_CROSS_DEVICE.
 */
int spyre_stream_wait_event(spyre_stream_t *stream, spyre_event_t *event);
/*
 * Stream memory operations (since 0.11; CUDA's cuStreamWriteValue64 and
 * cuStreamWaitValue64): @addr is an 8-byte aligned address of @stream's
 * card (device memory, spyre_malloc_host() memory's device address from
 * spyre_pointer_get_attributes(), or a spyre_ipc_import()).
 */
/**
 * spyre_stream_write_value64() - after the work enqueued so far, the card
 * stores @value at @addr and wakes the WAITs of every card.
 */
int spyre_stream_write_value64(spyre_stream_t *stream, spyre_dptr_t addr, uint64_t value);
/**
 * spyre_stream_wait_value64() - later work on @stream waits, on the card,
 * until the 64-bit word at @addr is >= @value (unsigned). A value that has
 * not come after @timeout_ms (0: the driver's job timeout, 2 s without
 * progress; at most 60 000, checked every 2 s) is a hung job: it fails the
 * stream (-EIO).
 */
int spyre_stream_wait_value64(spyre_stream_t *stream, spyre_dptr_t addr, uint64_t value,
			      unsigned int timeout_ms);
/**
 * spyre_stream_add_callback() - run @fn(@arg) on a library thread after all
 * work enqueued so far; work enqueued later starts after @fn returned.
 */
int spyre_stream_add_callback(spyre_stream_t *stream, void (*fn)(void *arg), void *arg);

int spyre_event_create(spyre_device_t *dev, spyre_event_t **event);
/**
 * SPYRE_EVENT_CROSS_DEVICE - a stream of another card may wait for the event:
 * each record also SIGNALs a 64-bit value that only grows, and the other
 * card's stream WAITs on the device for the value of the last record (no
 * host wait; spyre_event_create_flags.3). Not recordable into a graph.
 */
#define SPYRE_EVENT_CROSS_DEVICE	0x1u
/** spyre_event_create_flags() - spyre_event_create() with SPYRE_EVENT_* @flags. */
int spyre_event_create_flags(spyre_device_t *dev, unsigned int flags, spyre_event_t **event);
int spyre_event_destroy(spyre_event_t *event);
/** spyre_event_record() - capture the work enqueued on @stream so far (re-recordable). */
int spyre_event_record(spyre_event_t *event, spyre_stream_t *stream);
/** spyre_event_query() - 0 when reached, -EBUSY before; -EINVAL if never recorded. */
int spyre_event_query(spyre_event_t *event);
int spyre_event_synchronize(spyre_event_t *event);
/** spyre_event_elapsed_ms() - device time between two reached events, in ms. */
int spyre_event_elapsed_ms(spyre_event_t *start, spyre_event_t *end, float *ms);

enum spyre_memcpy_kind {
	SPYRE_MEMCPY_H2D = 1,
	SPYRE_MEMCPY_D2H = 2,
	SPYRE_MEMCPY_D2D = 3,
};

/**
 * spyre_memcpy() / spyre_memcpy_async() - copy @size bytes. Device addresses
 * must be 128-byte (stick) aligned; host addresses and sizes are free.
 * Host memory from spyre_malloc_host() is used in place (truly async);
 * other host memory is staged (the async call then returns after the
 * host-side part). D2D needs a whole number of sticks.
 */
int spyre_memcpy(spyre_device_t *dev, uint64_t dst, uint64_t src, size_t size,
		 enum spyre_memcpy_kind kind);
int spyre_memcpy_async(spyre_stream_t *stream, uint64_t dst, uint64_t src, size_t size,
		       enum spyre_memcpy_kind kind);
/** spyre_memset_async() - set @size bytes (whole sticks) at @dst to @value. */
int spyre_memset_async(spyre_stream_t *stream, spyre_dptr_t dst, uint8_t value, size_t size);

/** spyre_device_synchronize() - wait for every stream of @dev. */
int spyre_device_synchronize(spyre_device_t *dev);

/* ------------------------------------------------------------------------ */
/* Peer-to-peer (since 0.8)                                                   */
/* ------------------------------------------------------------------------ */

/**
 * spyre_device_can_access_peer() - *@can = 1 when copies run by @dev can
 * read and write @peer's device memory directly (@peer shows its memory to
 * peers and the PCI topology carries it), else 0. Return: 0, -EINVAL.
 */
int spyre_device_can_access_peer(spyre_device_t *dev, spyre_device_t *peer, int *can);
/**
 * spyre_memcpy_peer() / spyre_memcpy_peer_async() - copy @size bytes (whole
 * sticks, 128-byte aligned) from @src, device memory of @src_dev, to @dst,
 * device memory of @dst_dev, card to card without the host. The
 * synchronous call picks the device that runs the copy; the asynchronous
 * one runs it on @stream, whose device must be @dst_dev or @src_dev and
 * able to access the other (spyre_device_can_access_peer()). Return: 0;
 * -EINVAL for a range outside one allocation, misalignment or a foreign
 * stream; -EXDEV or -EOPNOTSUPP where neither card can reach the other.
 */
int spyre_memcpy_peer(spyre_device_t *dst_dev, spyre_dptr_t dst, spyre_device_t *src_dev,
		      spyre_dptr_t src, size_t size);
int spyre_memcpy_peer_async(spyre_stream_t *stream, spyre_device_t *dst_dev, spyre_dptr_t dst,
			    spyre_device_t *src_dev, spyre_dptr_t src, size_t size);

/* Memory shared with another process's card (since 0.9) */

/**
 * spyre_ipc_export() - *@fd = a dma-buf file descriptor of @dev's device
 * allocation @ptr (spyre_malloc() of more than 1 MiB: a smaller one shares
 * its buffer with other allocations; since 0.11 also the device address of
 * a spyre_malloc_host() allocation, which every card imports, for
 * semaphores between processes), for another process to import with
 * spyre_ipc_import() (pass it with SCM_RIGHTS); the caller closes it. Once
 * exported, the allocation is not cached when freed: its memory lives on
 * while an import holds it. Return: 0; -EINVAL; -EOPNOTSUPP when @dev
 * shows no memory to peers (no SPYRE_FEAT_PEER_BAR).
 */
int spyre_ipc_export(spyre_device_t *dev, spyre_dptr_t ptr, int *fd);
/**
 * spyre_ipc_import() - import @fd (spyre_ipc_export() of another card, in
 * any process) into @dev: *@ptr is the memory's address in @dev's context,
 * for copies on @dev's streams (spyre_memcpy_async(), SPYRE_MEMCPY_D2D),
 * *@size (may be NULL) its bytes. @fd stays the caller's. Return: 0;
 * -EXDEV when no peer-to-peer path joins the two cards; -EINVAL.
 */
int spyre_ipc_import(spyre_device_t *dev, int fd, spyre_dptr_t *ptr, size_t *size);
/** spyre_ipc_close() - close @dev's import at @ptr (after its jobs); closing the device closes every one. */
int spyre_ipc_close(spyre_device_t *dev, spyre_dptr_t ptr);

/* ------------------------------------------------------------------------ */
/* Programs and launch                                                        */
/* ------------------------------------------------------------------------ */

typedef struct spyre_program spyre_program_t;

/** How launches of a program reach the device. */
enum spyre_launch_path {
	/**
	 * Three-step patching (the baseline): resolve the bound addresses,
	 * patch them into a copy of the program through its relocation table,
	 * upload the copy, then launch. Skipped when the bindings are
	 * unchanged; only relocations of changed slots are re-patched.
	 */
	SPYRE_LAUNCH_PATCH = 0,
	/**
	 * Patch-free: the program stays immutable and resident; each launch
	 * writes only its argument block (slot addresses) into a per-stream
	 * ring, and nothing at all when the bindings are unchanged.
	 */
	SPYRE_LAUNCH_FAST = 1,
};

/**
 * spyre_program_load() - upload a program image (uapi/spyre_isa.h format).
 * The path is SPYRE_LAUNCH_PATCH when the image has relocations (absolute
 * operands), SPYRE_LAUNCH_FAST when it has none (slot-relative operands).
 * Return: 0, -EINVAL for a malformed image, -ENOMEM.
 */
int spyre_program_load(spyre_device_t *dev, const void *image, size_t size,
		       spyre_program_t **prog);
int spyre_program_unload(spyre_program_t *prog);

/** A tensor slot of a program. */
struct spyre_slot_info {
	uint32_t size;			/**< In: sizeof(struct spyre_slot_info). */
	uint32_t index;
	char name[32];
	uint32_t dtype;			/**< SPYRE_DT_* of spyre_isa.h */
	uint32_t rank;
	uint64_t shape[4];
	uint64_t bytes;			/**< bytes a binding must provide */
	uint32_t flags;			/**< SPYRE_SYM_IN / SPYRE_SYM_OUT */
	uint32_t pad;
};

/** Slots and scalars of one program together, at most (one launch's argument block). */
#define SPYRE_LAUNCH_MAX_ARGS 200

struct spyre_program_info {
	uint32_t size;			/**< In: sizeof(struct spyre_program_info). */
	uint32_t path;			/**< enum spyre_launch_path */
	uint32_t num_slots;
	uint32_t num_scalars;
	uint32_t num_relocs;
	uint32_t num_cores;
	uint64_t image_bytes;
};

int spyre_program_get_info(spyre_program_t *prog, struct spyre_program_info *info);
/** spyre_program_find_slot() - slot index by name; -ENOENT if there is none. */
int spyre_program_find_slot(spyre_program_t *prog, const char *name, uint32_t *index);
int spyre_program_slot_info(spyre_program_t *prog, uint32_t index, struct spyre_slot_info *info);

/**
 * spyre_launch() - run @prog on @stream's device on the cores in @core_mask.
 * @slots: one device pointer per slot, in slot order (@nslots must equal
 * the program's slot count); each must lie in an allocation of this device
 * with at least the slot's bytes from that pointer on.
 * @scalars: the program's scalars (@nscalars must match).
 * Return: 0 (asynchronous: errors of the run surface on the stream), or
 * -EINVAL with a detail naming the slot for a wrong binding.
 */
int spyre_launch(spyre_stream_t *stream, spyre_program_t *prog, uint32_t core_mask,
		 const spyre_dptr_t *slots, uint32_t nslots, const uint64_t *scalars,
		 uint32_t nscalars);

/** What the device reported for the last launch on a stream. */
struct spyre_launch_stats {
	uint32_t size;			/**< In: sizeof(struct spyre_launch_stats). */
	uint32_t status;		/**< engine fault cause, 0 = success */
	uint64_t device_ns;		/**< modeled device time */
	uint64_t device_cycles;
	uint64_t insns;
	uint32_t cores_run;
	uint32_t fault_core, fault_pc;
	uint32_t pad;
	uint64_t core_busy_cycles[32];	/**< per core; busy / device_cycles = utilization */
};

/** spyre_stream_last_launch() - stats of the stream's last launch (synchronizes first). */
int spyre_stream_last_launch(spyre_stream_t *stream, struct spyre_launch_stats *stats);

/**
 * What a stream did since it was created or its totals were last reset: the
 * sums over its launches, and the bytes its copies, fills and launches moved.
 */
struct spyre_stream_stats {
	uint32_t size;			/**< In: sizeof(struct spyre_stream_stats). */
	uint32_t pad;
	uint64_t launches;		/**< launches completed since the last reset */
	uint64_t failed_launches;	/**< of those, with an engine fault */
	uint64_t device_ns;		/**< sum of modeled device time of those launches */
	uint64_t device_cycles;		/**< sum of their device_cycles */
	uint64_t insns;			/**< sum of their instructions */
	uint64_t core_busy_cycles;	/**< sum over launches and cores of busy cycles */
	/**
	 * sum over launches of device_cycles x the cores the launch ran on
	 * (cores_run): core_busy_cycles / core_cycles is the utilization
	 */
	uint64_t core_cycles;
	uint64_t h2d_bytes;		/**< bytes copied host -> device by spyre_memcpy_async() on this stream */
	uint64_t d2h_bytes;		/**< bytes copied device -> host */
	uint64_t d2d_bytes;		/**< bytes copied device -> device */
	/**
	 * argument-block bytes written by launches (slot addresses + scalars);
	 * 0 for a launch that reuses the previous block
	 */
	uint64_t arg_bytes;
	uint64_t upload_bytes;		/**< program bytes uploaded by the patch path (patched copies) */
	uint64_t memset_bytes;		/**< bytes set by spyre_memset_async() */
	/* Since 0.7: a caller's older, smaller structure is filled up to its size. */
	/**
	 * jobs submitted (one SUBMIT ioctl each): one per launch, copy or event
	 * record, one per job of a graph replay (spyre_graph_launch()), one per
	 * collective call of a communicator on each rank's stream (spyre_comm(3))
	 */
	uint64_t jobs;
};

/**
 * spyre_stream_get_stats() - the totals of @stream, without a wait per launch.
 * @stats: caller sets stats->size = sizeof(*stats) before the call.
 *
 * Waits for the work enqueued on @stream so far (as spyre_stream_synchronize()),
 * then sums every launch of it that completed since the last reset. Launches
 * are counted as they complete, bytes as work is enqueued. While other threads
 * enqueue on @stream, all work enqueued before the call is counted and some
 * enqueued during it may be; each launch is counted once, whole.
 * Return: 0; -EIO when the stream is poisoned (@stats is filled all the same:
 * a launch whose job failed before it ran is not counted); -EINVAL for a NULL
 * argument or a size below 8.
 */
int spyre_stream_get_stats(spyre_stream_t *stream, struct spyre_stream_stats *stats);

/**
 * spyre_stream_reset_stats() - zero the totals of @stream, after waiting for
 * the work enqueued so far: it counts toward no later spyre_stream_get_stats().
 * Return: 0; -EIO when the stream is poisoned (the totals are zeroed all the same).
 */
int spyre_stream_reset_stats(spyre_stream_t *stream);

/* ------------------------------------------------------------------------ */
/* Graphs (since 0.7)                                                         */
/* ------------------------------------------------------------------------ */

/** A captured sequence of stream work, and an instance of it ready to replay. */
typedef struct spyre_graph spyre_graph_t;
typedef struct spyre_graph_exec spyre_graph_exec_t;

/** What a node of a graph does; nodes are numbered 0, 1, ... in capture order. */
enum spyre_graph_node_kind {
	SPYRE_GRAPH_NODE_LAUNCH = 1,	/**< spyre_launch() (patch-free programs only) */
	SPYRE_GRAPH_NODE_COPY = 2,	/**< spyre_memcpy_async(): D2D, or H2D/D2H with spyre_malloc_host() memory */
	SPYRE_GRAPH_NODE_MEMSET = 3,	/**< spyre_memset_async() */
	SPYRE_GRAPH_NODE_EVENT_RECORD = 4,	/**< spyre_event_record() */
};

/**
 * spyre_stream_begin_capture() - record @stream's work into a graph instead
 * of running it. Until spyre_stream_end_capture(), spyre_launch() (and
 * spyre_kernel_launch()), spyre_memcpy_async(), spyre_memset_async() and
 * spyre_event_record() on @stream add a node each and return without
 * submitting anything; their arguments are checked as always. Calls that
 * wait for or order the stream (synchronize, query, wait_event, callbacks,
 * statistics, destroy) and copies of pageable host memory fail with -EBUSY
 * and leave the capture as it was. Work enqueued before the call still runs.
 * Return: 0; -EBUSY when @stream already captures; -EINVAL for NULL.
 */
int spyre_stream_begin_capture(spyre_stream_t *stream);

/**
 * spyre_stream_end_capture() - stop capturing and hand the graph over.
 * @graph: receives the graph (possibly of no node); free it with
 * spyre_graph_destroy(). The programs, events and memory its nodes name
 * must outlive it and its execs.
 * Return: 0; -EINVAL when @stream does not capture.
 */
int spyre_stream_end_capture(spyre_stream_t *stream, spyre_graph_t **graph);

/** spyre_stream_is_capturing() - 1 while @stream captures a graph, 0 if not, -EINVAL for NULL. */
int spyre_stream_is_capturing(spyre_stream_t *stream);

/** spyre_graph_node_count() - the nodes of @graph (>= 0), -EINVAL for NULL. */
int spyre_graph_node_count(const spyre_graph_t *graph);

/** A node of a graph. */
struct spyre_graph_node_info {
	uint32_t size;			/**< In: sizeof(struct spyre_graph_node_info). */
	uint32_t kind;			/**< enum spyre_graph_node_kind */
	uint32_t num_slots;		/**< a launch: its program's slots, else 0 */
	uint32_t num_scalars;		/**< a launch: its program's scalars, else 0 */
	uint32_t packets;		/**< device packets it takes */
	uint32_t pad;
	uint64_t bytes;			/**< a copy's or a memset's bytes, else 0 */
};

/** spyre_graph_get_node() - describe node @index; -EINVAL for a bad index or size. */
int spyre_graph_get_node(const spyre_graph_t *graph, uint32_t index, struct spyre_graph_node_info *info);

/** spyre_graph_destroy() - free a graph; its execs stay usable. NULL is a no-op. */
int spyre_graph_destroy(spyre_graph_t *graph);

/**
 * spyre_graph_instantiate() - make @graph replayable: device memory for
 * every launch's argument block is allocated up front, and the packets of
 * all nodes are built once, in capture order, as jobs of up to
 * DRM_SPYRE_MAX_JOB_PACKETS packets (less three: room for an argument
 * update and a trace's timestamps); a node's packets never straddle two
 * jobs. @exec is independent of @graph, which may be destroyed or
 * instantiated again.
 * Return: 0; -EINVAL for NULL or a graph still being captured; -ENOMEM.
 */
int spyre_graph_instantiate(spyre_graph_t *graph, spyre_graph_exec_t **exec);

/** What an exec submits per replay. */
struct spyre_graph_exec_info {
	uint32_t size;			/**< In: sizeof(struct spyre_graph_exec_info). */
	uint32_t num_nodes;
	uint32_t num_jobs;		/**< SUBMIT ioctls per replay */
	uint32_t num_packets;		/**< packets per replay (plus one after an update) */
	uint64_t arg_bytes;		/**< device bytes of its argument blocks */
};

/** spyre_graph_exec_get_info() - describe @exec; -EINVAL for NULL or @info->size below 8. */
int spyre_graph_exec_get_info(const spyre_graph_exec_t *exec, struct spyre_graph_exec_info *info);

/**
 * spyre_graph_launch() - replay @exec on @stream: one SUBMIT per job of the
 * exec, after the work enqueued on @stream so far and after the exec's
 * previous replay (on whichever stream). Asynchronous, as spyre_launch();
 * completion and failures show on @stream (synchronize, events). A fault
 * inside a replay poisons @stream with a detail that names the node
 * ("graph node 7 (launch)"). Event record nodes record their events on
 * @stream, reached at the end of the job that holds them. The replay's
 * launches count in @stream's statistics as spyre_launch()'s do.
 * Return: 0; -EIO on a poisoned stream; -EBUSY on a capturing stream;
 * -EINVAL for NULL or a stream of another device. A failure after the first
 * job leaves the replay's earlier jobs submitted.
 */
int spyre_graph_launch(spyre_graph_exec_t *exec, spyre_stream_t *stream);

/**
 * spyre_graph_exec_set_kernel_args() - new bindings and/or scalars for
 * launch node @node of @exec, without rebuilding it: the next replay
 * writes the node's argument block on the card before its first packet;
 * replays enqueued before still use the old ones.
 * @slots: @nslots device pointers (the program's slot count, checked as by
 * spyre_launch()), or @nslots 0 to keep the bindings.
 * @scalars: @nscalars scalars (the program's count), or @nscalars 0 to keep them.
 * Return: 0; -EINVAL with a detail for a bad node index, a node that is
 * not a launch, wrong counts or a bad binding (naming the slot).
 */
int spyre_graph_exec_set_kernel_args(spyre_graph_exec_t *exec, uint32_t node,
				     const spyre_dptr_t *slots, uint32_t nslots,
				     const uint64_t *scalars, uint32_t nscalars);

/** spyre_graph_exec_destroy() - wait for the exec's replays, then free it. NULL is a no-op. */
int spyre_graph_exec_destroy(spyre_graph_exec_t *exec);

/* ------------------------------------------------------------------------ */
/* Traces (since 0.3)                                                         */
/* ------------------------------------------------------------------------ */

/**
 * spyre_trace_start() - record a trace of this process's libspyre work.
 * @path: the file spyre_trace_stop() (or the process's exit) writes: a
 * Chrome/Perfetto trace in the JSON trace event format (open it in
 * ui.perfetto.dev or chrome://tracing).
 *
 * Recorded: the library's calls that enqueue or wait (launch, copies, fills,
 * synchronizes, event records, program loads, statistics) as spans on one
 * lane per host thread; the caller's spans (spyre_trace_span_begin()); each
 * job's submit with its queue and timeline point; per queue, each job on the
 * device, timed by a TIMESTAMP packet the library adds before and after its
 * packets while tracing (a LAUNCH drawn for its modeled time, the launch
 * record's device_ns); per core, each launch's busy and idle time from its
 * launch record. The device clock is aligned to the host's CLOCK_MONOTONIC
 * when the file is written. Setting SPYRE_TRACE=FILE in the environment
 * traces the whole process into FILE. Off, tracing costs one branch per call.
 * Return: 0; -EINVAL for a NULL or empty @path; -EBUSY while a trace is
 * being recorded; a negative errno when the file cannot be created.
 */
int spyre_trace_start(const char *path);

/**
 * spyre_trace_stop() - finish the trace: wait for the traced jobs of every
 * stream, write the file and close it.
 * Return: the number of events written (INT32_MAX at the most); -EINVAL when
 * no trace is being recorded; a negative errno when writing failed.
 */
int spyre_trace_stop(void);

/** spyre_trace_active() - 1 while a trace is being recorded, else 0. */
int spyre_trace_active(void);

/**
 * spyre_trace_span_begin() - open a span named @name (copied, up to 47
 * bytes) on the calling thread's lane, e.g. "decode step 3"; spans nest, and
 * jobs submitted inside one carry its name and the outermost span's. A no-op
 * when not tracing.
 */
void spyre_trace_span_begin(const char *name);

/** spyre_trace_span_end() - close the calling thread's innermost open span. */
void spyre_trace_span_end(void);

/**
 * spyre_last_error() - detail of the calling thread's last failed call.
 * Return: a string owned by the library, valid until the thread's next call.
 */
const char *spyre_last_error(void);

/** spyre_strerror() - short description of a status code. */
const char *spyre_strerror(int status);

/**
 * spyre_engine_fault_name() - short description of an engine fault cause
 * (struct spyre_launch_stats status, SPYRE_FAULT_* of spyre_isa.h), e.g.
 * "scratchpad access out of range"; "no fault" for 0. Never NULL.
 */
const char *spyre_engine_fault_name(uint32_t cause);

#ifdef __cplusplus
}
#endif

#endif /* LIBSPYRE_SPYRE_H */
