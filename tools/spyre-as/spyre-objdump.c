// SPDX-License-Identifier: MIT
/* spyre-objdump: print a spyre program image as spyre-as text; validates it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "spyre_engine.h"

int main(int argc, char **argv)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: spyre-objdump FILE.bin|-\n");
		return 2;
	}
	f = strcmp(argv[1], "-") ? fopen(argv[1], "rb") : stdin;
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	for (;;) {
		uint8_t *n = realloc(buf, len + 65536);

		if (!n)
			return 1;
		buf = n;
		size_t r = fread(buf + len, 1, 65536, f);

		len += r;
		if (r < 65536)
			break;
	}
	if (spyre_disasm_image(buf, len, stdout)) {
		fprintf(stderr, "%s: not a valid spyre program container\n", argv[1]);
		return 1;
	}
	uint32_t core, pc, v = spyre_prog_validate(buf, len, 2u << 20, &core, &pc);

	if (v)
		printf("# invalid: core %d pc %d: %s\n", (int)core, (int)pc, spyre_fault_name(v));
	free(buf);
	return 0;
}
