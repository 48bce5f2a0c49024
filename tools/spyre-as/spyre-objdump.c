// SPDX-License-Identifier: MIT
/* spyre-objdump: print a spyre program image as spyre-as text; validates it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_asm.h"
#include "spyre_isa_codec.h"

int main(int argc, char **argv)
{
	struct spyre_prog_view view;
	uint8_t *buf = NULL;
	char why[160];
	size_t len = 0;

	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: spyre-objdump FILE.bin|-\n");
		return 2;
	}
	buf = (uint8_t *)spyre_read_file(argv[1], &len);
	if (!buf) {
		perror(argv[1]);
		return 1;
	}
	if (spyre_prog_check_container(buf, len, &view) || spyre_disasm_image(buf, len, stdout)) {
		spyre_prog_describe(&view, why, sizeof(why));
		fprintf(stderr, "%s: not a valid spyre program container: %s\n", argv[1], why);
		return 1;
	}
	uint32_t core, pc, v = spyre_prog_validate(buf, len, 2u << 20, &core, &pc);

	if (v)
		printf("# invalid: core %d pc %d: %s\n", (int)core, (int)pc, spyre_fault_name(v));
	free(buf);
	return 0;
}
