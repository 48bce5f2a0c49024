// SPDX-License-Identifier: MIT
/*
 * Description: a short bounded run of the libFuzzer target for the program
 * validator, disassembler/assembler and engine (build/fuzz/spyre-prog-fuzz,
 * built by `make fuzz`): 200,000 executions or 45 s, whichever comes first,
 * seeded with valid programs written by the builder (DMA and matmul, the
 * ring, a loop, address registers and ARGMAX). Fails on any crash,
 * sanitizer report or timeout; skips (77) when clang's libFuzzer was not
 * available to build the target. Prints the number of executions. The
 * target runs each input at 1 and 2 host threads and with LOADs moved
 * eagerly, and fails unless all three agree byte for byte.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spyre_progbuild.h"
#include "../../../tests/tap.h"
#include "../../../tests/fuzz-run.h"

static void seed(const char *dir, int i, struct spyre_pb *pb)
{
	char path[PATH_MAX + 32];
	void *img;
	size_t sz;

	if (spyre_pb_finish(pb, &img, &sz) == 0) {
		snprintf(path, sizeof(path), "%s/seed%d", dir, i);
		FILE *f = fopen(path, "wb");

		if (f) {
			fwrite(img, 1, sz, f);
			fclose(f);
		}
		free(img);
	}
	spyre_pb_free(pb);
}

static char fuzz[PATH_MAX + 32];

static void test_libfuzzer_run(void)
{
	char dir[] = "/tmp/spyre-fuzz-XXXXXX";

	if (!TAP_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %m"))
		return;

	/* seeds: a DMA + matmul program, a ring program, a loop, address registers + ARGMAX */
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "x", SPYRE_DT_FP32, 1, (uint64_t[]){ 1024 }, 4096, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0 }, .rows = 4, .row_bytes = 256 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP16,
		.dt2 = SPYRE_DT_FP32, .d = 2048, .a = 0, .b = 1024, .rows = 4, .cols = 32, .k = 64 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_SOFTMAX, .dt = SPYRE_DT_FP32,
		.dt2 = SPYRE_DT_DL16, .d = 4096, .a = 2048, .rows = 4, .cols = 32 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 4096, .mem = { .sym = 0 }, .row_bytes = 256 });
	spyre_pb_set_addressing(pb, SPYRE_PB_ADDR_RELOC);
	spyre_pb_dma(pb, 1, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0, .off = 128 }, .row_bytes = 128 });
	seed(dir, 0, pb);
	pb = spyre_pb_new();
	spyre_pb_ring(pb, 0, SPYRE_ISA_OP_SEND, 0, 1, 3, 256);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_RECV, 0, 0, 3, 256);
	spyre_pb_ring(pb, 1, SPYRE_ISA_OP_SIGNAL, 0, 2, 1, 0);
	spyre_pb_ring(pb, 2, SPYRE_ISA_OP_WAIT, 0, 0, 1, 1);
	for (unsigned c = 0; c < 4; c++)
		spyre_pb_ring(pb, c, SPYRE_ISA_OP_BARRIER, 0, 0, 0, 0);
	seed(dir, 1, pb);
	pb = spyre_pb_new();
	spyre_pb_set_scalars(pb, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 1, 0, 0);
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ADD, .dt = SPYRE_DT_INT8, .dt2 = SPYRE_DT_INT8,
		.flags = SPYRE_IF_BCAST_ROW, .d = 0, .a = 0, .b = 128, .rows = 2, .cols = 100 });
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 1, (uint64_t)-1, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_BNZ, 1, 1, 0);
	seed(dir, 2, pb);
	pb = spyre_pb_new();
	spyre_pb_sym(pb, "x", SPYRE_DT_FP16, 1, (uint64_t[]){ 1024 }, 2048, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	spyre_pb_set_scalars(pb, 2);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 1, 1, 0);	/* odd scalars: stick-aligned offsets */
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_LDARG, 2, 1, 0);
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .sp_reg = SPYRE_PB_REG(2),
		.mem = { .sym = 0, .reg = SPYRE_PB_REG(1) }, .rows = 2, .row_bytes = 128 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = SPYRE_DT_FP16,
		.dt2 = SPYRE_DT_INT32, .d = 4096, .a = 128, .rows = 2, .cols = 64 });
	spyre_pb_op(pb, 0, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_ARGMAX, .dt = SPYRE_DT_FP16,
		.dt2 = SPYRE_DT_INT32, .flags = SPYRE_IF_INDEX, .d = 4224, .a = 128, .b = 8192, .rows = 2, .cols = 64 });
	spyre_pb_dma(pb, 0, SPYRE_ISA_OP_STORE, &(struct spyre_pb_dma){ .sp = 4096, .sp_reg = SPYRE_PB_REG(1),
		.mem = { .sym = 0 }, .row_bytes = 128 });
	spyre_pb_set_addressing(pb, SPYRE_PB_ADDR_RELOC);
	spyre_pb_dma(pb, 1, SPYRE_ISA_OP_LOAD, &(struct spyre_pb_dma){ .mem = { .sym = 0, .off = 256,
		.reg = SPYRE_PB_REG(1) }, .row_bytes = 128 });
	seed(dir, 3, pb);

	fuzz_run(fuzz, "spyre-prog-fuzz", dir, 200000, 45);
}

static const struct tap_case cases[] = {
	{ "libfuzzer_run", test_libfuzzer_run },
};

int main(int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		tap_bail("cannot find this program's directory");
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(fuzz, sizeof(fuzz), "%s/../fuzz/spyre-prog-fuzz", self);
	if (access(fuzz, X_OK))
		tap_skip_all("%s not built (needs clang with libFuzzer: make fuzz)", fuzz);
	return TAP_RUN(cases, argc, argv);
}
