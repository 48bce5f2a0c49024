// SPDX-License-Identifier: MIT
/* spyre-as: assemble spyre program text (docs/spyre-isa.md §8) into an image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyre_asm.h"
#include "spyre_isa_codec.h"

int main(int argc, char **argv)
{
	const char *in = NULL, *out = NULL;
	char err[256], *text = NULL;
	size_t len = 0, size;
	void *img;
	FILE *f;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || in)
			goto usage;
		else
			in = argv[i];
	}
	if (!in || !out)
		goto usage;
	text = spyre_read_file(in, &len);
	if (!text) {
		perror(in);
		return 1;
	}
	if (spyre_asm_text(text, &img, &size, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", in, err);
		return 1;
	}
	uint32_t core, pc, v = spyre_prog_validate(img, size, 2u << 20, &core, &pc);

	if (v)
		fprintf(stderr, "%s: warning: core %d pc %d: %s\n", in, (int)core, (int)pc, spyre_fault_name(v));
	f = fopen(out, "wb");
	if (!f || fwrite(img, 1, size, f) != size || fclose(f)) {
		perror(out);
		return 1;
	}
	free(img);
	free(text);
	return 0;
usage:
	fprintf(stderr, "usage: spyre-as FILE.s|- -o FILE.bin\n");
	return 2;
}
