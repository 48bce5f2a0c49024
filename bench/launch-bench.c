// SPDX-License-Identifier: MIT
/*
 * launch-bench: host cost of a launch through libspyre on a spyre card (run
 * in the VM), three-step patching vs the patch-free path, as ratios measured
 * in the same run:
 *  1. program size 1 KiB .. 1 MiB (relocated LOADs on cores outside the
 *     launch mask, so the device work stays the same and only the launch
 *     path's own cost grows), bindings changing on every launch;
 *  2. bindings 1 .. 64 slots, and the published comparison's case (a
 *     64 KiB program with 16 bindings);
 *  3. end-to-end launch rate (launch + wait, tiny program) as a ratio to a
 *     null driver ioctl (GET_PARAM) in the same VM;
 *  4. a captured graph of GRAPH_LAUNCHES patch-free launches replayed with
 *     spyre_graph_launch() (one SUBMIT), per launch, vs the same launches
 *     one by one, and a replay that updates one launch's bindings first.
 * Host cost = wall time inside spyre_launch() per launch, averaged over a
 * burst of launches that alternate between two binding sets (so the patch
 * path must patch and upload every time); the burst is then synchronized.
 * The cheapest of BURSTS bursts is reported (the guest runs under TCG, where
 * single bursts are disturbed by the emulator).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xf86drm.h>

#include "spyre.h"
#include "spyre_accel.h"
#include "spyre_isa.h"
#include "spyre_progbuild.h"

#define BURST 24		/* launches per burst: below the 32-slot argument ring */
#define BURSTS 7		/* the cheapest burst counts: TCG timing is noisy */
#define GRAPH_LAUNCHES 30	/* a decode step's launches; below the 32-slot argument ring */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * Core 0: one LOAD of slot 0. Cores 1..31 (not launched): filler LOADs,
 * every one relocated, until the image has about @bytes. @nslots slots,
 * each named by at least one relocation.
 */
static void *build(int abs, size_t bytes, unsigned nslots, size_t *size)
{
	struct spyre_pb *pb = spyre_pb_new();
	size_t insns = bytes / SPYRE_INSN_BYTES, i;
	void *img = NULL;
	unsigned s;

	spyre_pb_set_addressing(pb, abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT);
	for (s = 0; s < nslots; s++) {
		char name[16];

		snprintf(name, sizeof(name), "t%u", s);
		spyre_pb_sym(pb, name, SPYRE_DT_FP32, 1, (uint64_t[]){ 32 }, 128, SPYRE_SYM_IN);
	}
	for (i = 0; i < insns || i < nslots; i++) {
		unsigned core = i < nslots ? 0 : 1 + (unsigned)(i % 31);

		spyre_pb_dma(pb, core, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){
			.mem = { .sym = (int)(i % nslots) }, .row_bytes = 128 });
	}
	if (spyre_pb_finish(pb, &img, size))
		img = NULL;
	spyre_pb_free(pb);
	return img;
}

/* Mean wall time in spyre_launch() over a burst with alternating bindings. */
static double launch_cost(spyre_device_t *dev, spyre_stream_t *s, int abs, size_t bytes,
			  unsigned nslots, const spyre_dptr_t *a, const spyre_dptr_t *b)
{
	spyre_program_t *prog;
	double t, total, best = 1e30;
	size_t size;
	void *img = build(abs, bytes, nslots, &size);
	int i, r;

	if (!img || spyre_program_load(dev, img, size, &prog)) {
		fprintf(stderr, "launch-bench: %s\n", spyre_last_error());
		exit(1);
	}
	free(img);
	/* warm-up: first patch, first argument blocks */
	spyre_launch(s, prog, 1, a, nslots, NULL, 0);
	spyre_launch(s, prog, 1, b, nslots, NULL, 0);
	if (spyre_stream_synchronize(s)) {
		fprintf(stderr, "launch-bench: %s\n", spyre_last_error());
		exit(1);
	}
	for (r = 0; r < BURSTS; r++) {
		total = 0;
		for (i = 0; i < BURST; i++) {
			t = now_us();
			if (spyre_launch(s, prog, 1, i % 2 ? a : b, nslots, NULL, 0)) {
				fprintf(stderr, "launch-bench: %s\n", spyre_last_error());
				exit(1);
			}
			total += now_us() - t;
		}
		spyre_stream_synchronize(s);
		if (total / BURST < best)
			best = total / BURST;
	}
	spyre_program_unload(prog);
	return best;
}

static void die(void)
{
	fprintf(stderr, "launch-bench: %s\n", spyre_last_error());
	exit(1);
}

/*
 * Host cost per launch of GRAPH_LAUNCHES launches of a 1 KiB patch-free
 * program with alternating bindings: one by one (*@single), as replays of
 * their captured graph (*@replay), and as replays after an update of one
 * launch's bindings (*@updated). Each the cheapest of BURSTS bursts.
 */
static void graph_cost(spyre_device_t *dev, spyre_stream_t *s, const spyre_dptr_t *a,
		       const spyre_dptr_t *b, double *single, double *replay, double *updated)
{
	spyre_graph_exec_t *x;
	spyre_program_t *prog;
	spyre_graph_t *g;
	double t, one, rep, upd;
	size_t size;
	void *img = build(0, 1024, 4, &size);
	int i, r;

	if (!img || spyre_program_load(dev, img, size, &prog))
		die();
	free(img);
	if (spyre_stream_begin_capture(s))
		die();
	for (i = 0; i < GRAPH_LAUNCHES; i++)
		if (spyre_launch(s, prog, 1, i % 2 ? a : b, 4, NULL, 0))
			die();
	if (spyre_stream_end_capture(s, &g) || spyre_graph_instantiate(g, &x) || spyre_graph_launch(x, s) ||
	    spyre_stream_synchronize(s))
		die();
	*single = *replay = *updated = 1e30;
	for (r = 0; r < BURSTS; r++) {
		t = now_us();
		for (i = 0; i < GRAPH_LAUNCHES; i++)
			if (spyre_launch(s, prog, 1, i % 2 ? a : b, 4, NULL, 0))
				die();
		one = (now_us() - t) / GRAPH_LAUNCHES;
		if (spyre_stream_synchronize(s))
			die();
		t = now_us();
		if (spyre_graph_launch(x, s))
			die();
		rep = (now_us() - t) / GRAPH_LAUNCHES;
		if (spyre_stream_synchronize(s))
			die();
		t = now_us();
		if (spyre_graph_exec_set_kernel_args(x, 0, r % 2 ? a : b, 4, NULL, 0) || spyre_graph_launch(x, s))
			die();
		upd = (now_us() - t) / GRAPH_LAUNCHES;
		if (spyre_stream_synchronize(s))
			die();
		*single = one < *single ? one : *single;
		*replay = rep < *replay ? rep : *replay;
		*updated = upd < *updated ? upd : *updated;
	}
	spyre_graph_exec_destroy(x);
	spyre_graph_destroy(g);
	spyre_program_unload(prog);
}

int main(void)
{
	static const size_t sizes[] = { 1024, 4096, 16384, 65536, 262144, 1048576 };
	static const unsigned binds[] = { 1, 4, 16, 64 };
	spyre_dptr_t a[64], b[64];
	spyre_device_t *dev;
	spyre_stream_t *s;
	double patch, fast, t, ioctl_us, e2e_us;
	unsigned i;
	int k;

	if (spyre_device_open(0, &dev) || spyre_stream_create(dev, 1, &s)) {
		fprintf(stderr, "launch-bench: %s\n", spyre_last_error());
		return 1;
	}
	for (i = 0; i < 64; i++)
		if (spyre_malloc(dev, 128, &a[i]) || spyre_malloc(dev, 128, &b[i]))
			return 1;

	printf("launch host cost (us per launch, bindings change every launch)\n");
	printf("%-12s %10s %10s %14s\n", "program", "patch", "fast", "patch/fast");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		patch = launch_cost(dev, s, 1, sizes[i], 4, a, b);
		fast = launch_cost(dev, s, 0, sizes[i], 4, a, b);
		printf("%7zu KiB %10.1f %10.1f %13.1fx\n", sizes[i] / 1024, patch, fast, patch / fast);
	}
	printf("%-12s %10s %10s %14s\n", "bindings", "patch", "fast", "patch/fast");
	for (i = 0; i < sizeof(binds) / sizeof(binds[0]); i++) {
		patch = launch_cost(dev, s, 1, 16384, binds[i], a, b);
		fast = launch_cost(dev, s, 0, 16384, binds[i], a, b);
		printf("%12u %10.1f %10.1f %13.1fx\n", binds[i], patch, fast, patch / fast);
	}

	/* The case the published comparison names (bench/published) */
	patch = launch_cost(dev, s, 1, 65536, 16, a, b);
	fast = launch_cost(dev, s, 0, 65536, 16, a, b);
	printf("published case: 64 KiB program, 16 bindings: patch %.1f us, fast %.1f us, patch/fast %.2fx\n",
	       patch, fast, patch / fast);

	/* End-to-end launch rate vs a null ioctl. */
	{
		struct drm_spyre_get_param gp = { .param = DRM_SPYRE_PARAM_NUM_CORES };
		spyre_program_t *prog;
		size_t size;
		void *img = build(0, 1024, 1, &size);

		spyre_program_load(dev, img, size, &prog);
		free(img);
		t = now_us();
		for (k = 0; k < 200; k++)
			drmIoctl(spyre_device_fd(dev), DRM_IOCTL_SPYRE_GET_PARAM, &gp);
		ioctl_us = (now_us() - t) / 200;
		t = now_us();
		for (k = 0; k < 100; k++) {
			spyre_launch(s, prog, 1, a, 1, NULL, 0);
			spyre_stream_synchronize(s);
		}
		e2e_us = (now_us() - t) / 100;
		printf("end to end: %.1f us per launch+wait, %.1f us per null ioctl: %.1fx a null ioctl "
		       "(%.0f launches/s)\n", e2e_us, ioctl_us, e2e_us / ioctl_us, 1e6 / e2e_us);
		spyre_program_unload(prog);
	}

	/* Graph replay vs launches one by one (both patch-free). */
	{
		double single, replay, updated;

		graph_cost(dev, s, a, b, &single, &replay, &updated);
		printf("graph replay: %d launches, host us per launch: one by one %.2f, replay %.2f "
		       "(%.1fx less), replay after an update %.2f (%.1fx less)\n", GRAPH_LAUNCHES, single,
		       replay, single / replay, updated, single / updated);
	}
	spyre_stream_destroy(s);
	spyre_device_close(dev);
	return 0;
}
