// SPDX-License-Identifier: MIT
/*
 * Description: a short bounded run of the libFuzzer target for the program
 * validator, disassembler/assembler and engine (build/fuzz/spyre-prog-fuzz,
 * built by `make fuzz`): 200,000 executions or 45 s, whichever comes first,
 * seeded with valid programs written by the builder. Fails on any crash,
 * sanitizer report or timeout; skips (77) when clang's libFuzzer was not
 * available to build the target. Prints the number of executions.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spyre_progbuild.h"
#include "../../../tests/tap.h"

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
	char dir[] = "/tmp/spyre-fuzz-XXXXXX", cmd[4 * PATH_MAX];

	if (!TAP_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %m"))
		return;

	/* seeds: a DMA + matmul program, a ring program, a loop */
	struct spyre_pb *pb = spyre_pb_new();

	spyre_pb_sym(pb, "x", SPYRE_DT_FP32, 1, (uint64_t[]){ 1024 }, 4096, SPYRE_SYM_IN | SPYRE_SYM_OUT);
	spyre_pb_load(pb, 0, 0, SPYRE_SLOT_ADDR(0, 0), 4, 256, 256, 256, SPYRE_IF_SLOT);
	spyre_pb_matmul(pb, 0, SPYRE_DT_FP16, SPYRE_DT_FP32, 0, 2048, 0, 1024, 4, 32, 64, 1, 1, 1);
	spyre_pb_unary(pb, 0, SPYRE_ISA_OP_SOFTMAX, SPYRE_DT_FP32, SPYRE_DT_DL16, 4096, 2048, 4, 32, 1, 1);
	spyre_pb_store(pb, 0, 4096, SPYRE_SLOT_ADDR(0, 0), 1, 256, 0, 0, SPYRE_IF_SLOT);
	spyre_pb_dma_abs(pb, 1, SPYRE_ISA_OP_LOAD, 0, 0, 128, 1, 128, 0, 0);
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
	spyre_pb_tensor(pb, 0, SPYRE_ISA_OP_ADD, SPYRE_DT_INT8, SPYRE_DT_INT8, SPYRE_IF_BCAST_ROW, 0, 0, 128, 2, 100, 0, 1, 1, 0);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_ADDI, 1, (uint64_t)-1, 1);
	spyre_pb_ctl(pb, 0, SPYRE_ISA_OP_BNZ, 1, 1, 0);
	seed(dir, 2, pb);

	snprintf(cmd, sizeof(cmd), "%s -runs=200000 -max_total_time=45 -timeout=10 -rss_limit_mb=2048 "
		 "-print_final_stats=1 -artifact_prefix=%s/ %s > %s/log 2>&1", fuzz, dir, dir, dir);
	int rc = system(cmd);

	snprintf(cmd, sizeof(cmd), "grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' %s/log |"
		 " sed 's/^/# /'; grep -q 'stat::number_of_executed_units' %s/log", dir, dir);
	int stats = system(cmd);

	TAP_CHECK(rc == 0 && stats == 0, "libFuzzer run of spyre-prog-fuzz: no crash (exit %d)", rc);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "tail -n 40 %s/log | sed 's/^/# /'", dir);
		if (system(cmd))
			rc = 1;
	}
	if (rc) {	/* keep the reproducer */
		tap_diag("crash input kept in %s", dir);
	} else {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd))
			tap_diag("could not remove %s", dir);
	}
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
