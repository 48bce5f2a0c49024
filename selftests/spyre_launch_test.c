// SPDX-License-Identifier: GPL-2.0-only
/*
 * Description: LAUNCH through spyre.ko onto the emulated card's compute
 * engine: programs built with the engine's program builder run with their
 * tensors in device memory, in both address forms (slot-relative operands
 * resolved from the argument block, and absolute addresses patched through
 * the relocation table), results checked against a CPU reference (fp32
 * matmul: relative error <= 1e-5 of the sum of |products|); the launch
 * record reports modeled device time; an engine fault fails only its job and
 * QUEUE_ERROR names the core, instruction and cause; a program cannot reach
 * another file's memory.
 */
#include <math.h>

#include "kselftest_harness.h"
#include "spyre_test.h"
#include "spyre_progbuild.h"

FIXTURE(launch) {
	int fd;
	uint32_t q;
};

FIXTURE_SETUP(launch)
{
	self->fd = spyre_open(0);
	if (self->fd < 0)
		SKIP(return, "no spyre device");
	ASSERT_EQ(0, squeue_create(self->fd, DRM_SPYRE_PRIO_NORMAL, &self->q));
}

FIXTURE_TEARDOWN(launch)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* Copy host bytes into a device BO through a host BO and a COPY job. */
static int upload(int fd, uint32_t q, const struct sbo *dev, const void *data, size_t n)
{
	struct sbo h;
	uint8_t p[64];
	int ret;

	ret = sbo_create(fd, dev->size, DRM_SPYRE_BO_HOST, &h);
	if (ret)
		return ret;
	memcpy(h.map, data, n);
	spyre_prep_copy_va(p, h.va, dev->va, (dev->size + 127) & ~127ull);
	ret = srun(fd, q, p, 1);
	sbo_close(fd, &h);
	return ret;
}

static int download(int fd, uint32_t q, const struct sbo *dev, void *data, size_t n)
{
	struct sbo h;
	uint8_t p[64];
	int ret;

	ret = sbo_create(fd, dev->size, DRM_SPYRE_BO_HOST, &h);
	if (ret)
		return ret;
	spyre_prep_copy_va(p, dev->va, h.va, (dev->size + 127) & ~127ull);
	ret = srun(fd, q, p, 1);
	if (!ret)
		memcpy(data, h.map, n);
	sbo_close(fd, &h);
	return ret;
}

struct prog {
	struct sbo image, args, record;
};

/* Put @img in a host BO and write the argument block (one VA per slot). */
static int prog_load(int fd, struct prog *pr, const void *img, size_t size,
		     const uint64_t *slots, unsigned int nslots)
{
	int ret;

	ret = sbo_create(fd, size, DRM_SPYRE_BO_HOST, &pr->image);
	ret = ret ?: sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &pr->args);
	ret = ret ?: sbo_create(fd, 4096, DRM_SPYRE_BO_HOST, &pr->record);
	if (ret)
		return ret;
	memcpy(pr->image.map, img, size);
	memcpy(pr->args.map, slots, nslots * sizeof(uint64_t));
	return 0;
}

static int prog_launch(int fd, uint32_t q, struct prog *pr, uint32_t mask)
{
	struct spyre_pkt_launch l;

	memset(&l, 0, sizeof(l));
	l.hdr.opcode = SPYRE_PKT_OP_LAUNCH;
	l.hdr.version = SPYRE_PKT_VERSION;
	l.program = pr->image.va;
	l.args = pr->args.va;
	l.core_mask = mask;
	l.record = pr->record.va;
	return srun(fd, q, &l, 1);
}

static void relu_case(struct __test_metadata *_metadata, int fd, uint32_t q, int abs)
{
	struct spyre_launch_record *rec;
	struct sbo x, y;
	struct prog pr;
	float in[32], out[32];
	uint64_t slots[2];
	size_t size;
	void *img;
	int i;

	ASSERT_EQ(0, sbo_create(fd, 128, 0, &x));
	ASSERT_EQ(0, sbo_create(fd, 128, 0, &y));
	for (i = 0; i < 32; i++)
		in[i] = (float)(i - 15) * 0.25f;
	ASSERT_EQ(0, upload(fd, q, &x, in, sizeof(in)));
	img = spyre_pb_relu_image(abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT, 1, 128, &size);
	ASSERT_NE(NULL, img);
	slots[0] = x.va;
	slots[1] = y.va;
	if (abs)	/* the patch path: write the real addresses into the image */
		ASSERT_EQ(2, spyre_prog_relocate(img, size, slots, 2));
	ASSERT_EQ(0, prog_load(fd, &pr, img, size, slots, 2));
	ASSERT_EQ(0, prog_launch(fd, q, &pr, 0x1));
	ASSERT_EQ(0, download(fd, q, &y, out, sizeof(out)));
	for (i = 0; i < 32; i++)
		ASSERT_EQ(in[i] > 0 ? in[i] : 0.0f, out[i]) TH_LOG("element %d", i);
	rec = pr.record.map;
	ASSERT_EQ(0, rec->status);
	ASSERT_EQ(1, rec->cores_run);
	ASSERT_LE(3, rec->insns);
	ASSERT_LT(0, rec->device_ns);
	ASSERT_LT(0, rec->core_busy_cycles[0]);
	ASSERT_EQ(0, rec->core_busy_cycles[1]);
	free(img);
}

TEST_F(launch, relu_slot_relative)
{
	relu_case(_metadata, self->fd, self->q, 0);
}

TEST_F(launch, relu_absolute_patched)
{
	relu_case(_metadata, self->fd, self->q, 1);
}

TEST_F(launch, matmul_fp32_against_cpu)
{
	enum { M = 32, N = 32, K = 32 };
	static float a[M * K], b[K * N], c[M * N];
	struct spyre_pb *pb = spyre_pb_new();
	struct sbo A, B, C;
	struct prog pr;
	uint64_t slots[3];
	size_t size;
	void *img;
	int i, j, k;

	for (i = 0; i < M * K; i++)
		a[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
	for (i = 0; i < K * N; i++)
		b[i] = (float)((i * 11) % 13) / 6.0f - 1.0f;
	ASSERT_EQ(0, sbo_create(self->fd, sizeof(a), 0, &A));
	ASSERT_EQ(0, sbo_create(self->fd, sizeof(b), 0, &B));
	ASSERT_EQ(0, sbo_create(self->fd, sizeof(c), 0, &C));
	ASSERT_EQ(0, upload(self->fd, self->q, &A, a, sizeof(a)));
	ASSERT_EQ(0, upload(self->fd, self->q, &B, b, sizeof(b)));

	/* rows of 32 fp32 = one stick: load A to sp 0, B to sp 4096, C at 8192 */
	spyre_pb_sym(pb, "A", SPYRE_DT_FP32, 2, (uint64_t[]){ M, K }, sizeof(a), SPYRE_SYM_IN);
	spyre_pb_sym(pb, "B", SPYRE_DT_FP32, 2, (uint64_t[]){ K, N }, sizeof(b), SPYRE_SYM_IN);
	spyre_pb_sym(pb, "C", SPYRE_DT_FP32, 2, (uint64_t[]){ M, N }, sizeof(c), SPYRE_SYM_OUT);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = M,
		.row_bytes = 128, .mem_stride = 128, .sp_stride = 128 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp = 4096, .mem = { .sym = 1 },
		.rows = K, .row_bytes = 128, .mem_stride = 128, .sp_stride = 128 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_FP32, .d = 8192, .a = 0, .b = 4096, .rows = M, .cols = N, .k = K });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 8192, .mem = { .sym = 2 },
		.rows = M, .row_bytes = 128, .mem_stride = 128, .sp_stride = 128 });
	ASSERT_EQ(0, spyre_pb_finish(pb, &img, &size));
	spyre_pb_free(pb);
	slots[0] = A.va;
	slots[1] = B.va;
	slots[2] = C.va;
	ASSERT_EQ(0, prog_load(self->fd, &pr, img, size, slots, 3));
	ASSERT_EQ(0, prog_launch(self->fd, self->q, &pr, 0x1));
	ASSERT_EQ(0, download(self->fd, self->q, &C, c, sizeof(c)));
	for (i = 0; i < M; i++)
		for (j = 0; j < N; j++) {
			double ref = 0, mag = 0;

			for (k = 0; k < K; k++) {
				ref += (double)a[i * K + k] * b[k * N + j];
				mag += fabs((double)a[i * K + k] * b[k * N + j]);
			}
			ASSERT_GE(1e-5 * mag + 1e-30, fabs(c[i * N + j] - ref))
				TH_LOG("C[%d][%d] = %f, want %f", i, j, c[i * N + j], ref);
		}
	free(img);
}

TEST_F(launch, engine_fault_fails_only_its_job)
{
	struct drm_spyre_queue_error e;
	struct spyre_launch_record *rec;
	struct sbo x, y;
	struct prog pr;
	uint64_t slots[2];
	size_t size;
	void *img;

	ASSERT_EQ(0, sbo_create(self->fd, 128, 0, &x));
	ASSERT_EQ(0, sbo_create(self->fd, 128, 0, &y));
	/* "x" claims 64 bytes; the load reads 128 */
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 64, &size);
	ASSERT_NE(NULL, img);
	slots[0] = x.va;
	slots[1] = y.va;
	ASSERT_EQ(0, prog_load(self->fd, &pr, img, size, slots, 2));
	ASSERT_EQ(0, prog_launch(self->fd, self->q, &pr, 0x1));
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(DRM_SPYRE_ERROR_FAULT, e.fault.error);
	ASSERT_EQ(SPYRE_ERR_ENGINE, e.fault.hw_error);
	ASSERT_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, SPYRE_FAULT_CAUSE(e.fault.info));
	ASSERT_EQ(SPYRE_SOURCE_PROGRAM, SPYRE_FAULT_SOURCE(e.fault.info));
	ASSERT_EQ(0, e.fault.core);
	ASSERT_EQ(0, e.fault.pc);
	rec = pr.record.map;
	ASSERT_EQ(SPYRE_ENGINE_FAULT_MEM_RANGE, rec->status);
	free(img);
	/* The queue goes on. */
	relu_case(_metadata, self->fd, self->q, 0);
	ASSERT_EQ(0, squeue_error(self->fd, self->q, &e));
	ASSERT_EQ(1, e.error_count);
}

TEST_F(launch, program_cannot_reach_other_files)
{
	struct drm_spyre_queue_error e;
	struct sbo filler, secret, y;
	struct prog pr;
	uint64_t slots[2];
	size_t size;
	void *img;
	uint32_t q2;
	int fd2 = spyre_open(0);

	ASSERT_LE(0, fd2);
	/* Push the secret past anything the second file will map (4 BOs). */
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0, sbo_create(self->fd, 4096, 0, &filler));
	ASSERT_EQ(0, sbo_create(self->fd, 128, DRM_SPYRE_BO_HOST, &secret));
	memset(secret.map, 0x77, 128);
	ASSERT_EQ(0, squeue_create(fd2, DRM_SPYRE_PRIO_NORMAL, &q2));
	ASSERT_EQ(0, sbo_create(fd2, 128, 0, &y));
	img = spyre_pb_relu_image(SPYRE_PB_ADDR_SLOT, 1, 128, &size);
	ASSERT_NE(NULL, img);
	/* The second file's program names the first file's address. */
	slots[0] = secret.va;
	slots[1] = y.va;
	ASSERT_EQ(0, prog_load(fd2, &pr, img, size, slots, 2));
	ASSERT_EQ(0, prog_launch(fd2, q2, &pr, 0x1));
	ASSERT_EQ(0, squeue_error(fd2, q2, &e));
	ASSERT_EQ(SPYRE_ERR_ENGINE, e.fault.hw_error);
	ASSERT_EQ(SPYRE_ENGINE_FAULT_MEM, SPYRE_FAULT_CAUSE(e.fault.info));
	ASSERT_EQ(secret.va, e.fault.addr);
	ASSERT_EQ(0x77, ((uint8_t *)secret.map)[5]);
	free(img);
	close(fd2);
}

TEST_HARNESS_MAIN
