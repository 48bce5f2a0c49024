// SPDX-License-Identifier: MIT
/*
 * spyre-run - run a program on a spyre card and check it.
 *
 * Built-in examples (checked against a CPU reference):
 *   mlp   y = act(x . W1) . W2, the small model block of a transformer layer,
 *         rows of x split over the cores (default: 256x128 . 128x256 . 256x128 fp32)
 *   relu  y = relu(x) on one core
 * Or a program image file: slots are filled with seeded random data (or
 * --input NAME=FILE), outputs can be saved with --output NAME=FILE.
 *
 * Each example is built twice - with absolute operands (the three-step
 * patching path) and with slot-relative operands (the patch-free path) - and
 * both run; host time per launch, modeled device time and core utilization
 * are printed for each. --trace FILE writes a Chrome/Perfetto trace of the
 * run (libspyre's spyre_trace_start()), the launches of each path in a span.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spyre.h"
#include "spyre_isa.h"
#include "spyre_progbuild.h"

struct opts {
	int device, iters, act;
	int cores;			/* 0: all the device's */
	const char *example, *program, *path, *trace;
	unsigned int seed;
	uint32_t m, k, h, n;
	const char **inputs, **outputs;	/* NAME=FILE, as many as given */
	int ninputs, noutputs;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static float frand(unsigned int *seed)
{
	return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

static int die(const char *what)
{
	fprintf(stderr, "spyre-run: %s: %s\n", what, spyre_last_error());
	return 1;
}

/* LOAD or STORE of rows x row_bytes at byte offset off of slot sym (contiguous rows). */
static void dma(struct spyre_pb *pb, unsigned core, unsigned op, uint32_t sp, int sym, uint64_t off,
		uint32_t rows, uint32_t row_bytes)
{
	spyre_pb_dma(pb, core, op, &(struct spyre_pb_dma){ .sp = sp, .mem = { .sym = sym, .off = off },
		.rows = rows, .row_bytes = row_bytes, .mem_stride = row_bytes, .sp_stride = row_bytes });
}

/*
 * The MLP block, rows of x split evenly over the cores. Each core's
 * scratchpad: W1 (k x h), W2 (h x n), its rows of x (r x k), h, y.
 * All dimensions are multiples of 32 so rows are whole fp32 sticks.
 */
static void *build_mlp(const struct opts *o, int abs, size_t *size)
{
	uint32_t r = o->m / (uint32_t)o->cores, lk = o->k / 32, lh = o->h / 32, ln = o->n / 32;
	uint32_t W1 = 0, W2 = W1 + o->k * lh * 128, X = W2 + o->h * ln * 128;
	uint32_t H = X + r * lk * 128, Y = H + r * lh * 128;
	struct spyre_pb *pb = spyre_pb_new();
	void *img = NULL;
	int c;

	spyre_pb_set_addressing(pb, abs ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT);
	spyre_pb_sym(pb, "x", SPYRE_DT_FP32, 2, (uint64_t[]){ o->m, o->k }, 4ull * o->m * o->k, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "w1", SPYRE_DT_FP32, 2, (uint64_t[]){ o->k, o->h }, 4ull * o->k * o->h, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "w2", SPYRE_DT_FP32, 2, (uint64_t[]){ o->h, o->n }, 4ull * o->h * o->n, SPYRE_SYM_IN);
	spyre_pb_sym(pb, "y", SPYRE_DT_FP32, 2, (uint64_t[]){ o->m, o->n }, 4ull * o->m * o->n, SPYRE_SYM_OUT);
	for (c = 0; c < o->cores; c++) {
		uint64_t row0 = (uint64_t)c * r;

		dma(pb, c, SPYRE_ISA_OP_LOAD, W1, 1, 0, o->k, lh * 128);
		dma(pb, c, SPYRE_ISA_OP_LOAD, W2, 2, 0, o->h, ln * 128);
		dma(pb, c, SPYRE_ISA_OP_LOAD, X, 0, row0 * o->k * 4, r, lk * 128);
		spyre_pb_op(pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .d = H, .a = X, .b = W1, .rows = r, .cols = o->h, .k = o->k });
		spyre_pb_op(pb, c, &(struct spyre_pb_op){ .op = (unsigned)o->act, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .d = H, .a = H, .rows = r, .cols = o->h });
		spyre_pb_op(pb, c, &(struct spyre_pb_op){ .op = SPYRE_ISA_OP_MATMUL, .dt = SPYRE_DT_FP32,
			.dt2 = SPYRE_DT_FP32, .d = Y, .a = H, .b = W2, .rows = r, .cols = o->n, .k = o->h });
		dma(pb, c, SPYRE_ISA_OP_STORE, Y, 3, row0 * o->n * 4, r, ln * 128);
	}
	if (spyre_pb_finish(pb, &img, size))
		img = NULL;
	spyre_pb_free(pb);
	return img;
}

static double act_ref(int act, double v)
{
	if (act == SPYRE_ISA_OP_SILU)
		return v / (1 + exp(-v));
	return 0.5 * v * (1 + erf(v / sqrt(2.0)));
}

/* CPU reference of the example; returns max relative error (vs tol scale). */
static int check(const struct opts *o, float **host, double *worst)
{
	uint32_t i, j, p;
	int bad = 0;

	*worst = 0;
	if (!strcmp(o->example, "relu")) {
		for (i = 0; i < 1024; i++) {
			double ref = host[0][i] > 0 ? host[0][i] : 0;

			if (host[1][i] != (float)ref)
				bad++;
		}
		return bad;
	}
	for (i = 0; i < o->m; i++) {
		double *hrow = calloc(o->h, sizeof(double)), *hmag = calloc(o->h, sizeof(double));

		for (j = 0; j < o->h; j++) {
			for (p = 0; p < o->k; p++) {
				hrow[j] += (double)host[0][i * o->k + p] * host[1][p * o->h + j];
				hmag[j] += fabs((double)host[0][i * o->k + p] * host[1][p * o->h + j]);
			}
			hrow[j] = act_ref(o->act, hrow[j]);
		}
		for (j = 0; j < o->n; j++) {
			double ref = 0, mag = 0, err, tol;

			for (p = 0; p < o->h; p++) {
				ref += hrow[p] * host[2][p * o->n + j];
				mag += (fabs(hrow[p]) + 1e-3 * hmag[p]) * fabs(host[2][p * o->n + j]);
			}
			/* fp32 accumulation and fp32 GELU/SiLU: 1e-4 of the magnitude */
			tol = 1e-4 * mag + 1e-6;
			err = fabs(host[3][i * o->n + j] - ref);
			if (err / tol > *worst)
				*worst = err / tol;
			if (err > tol)
				bad++;
		}
		free(hrow);
		free(hmag);
	}
	return bad;
}

static int load_file(const char *path, void *buf, size_t size)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size, f);
	fclose(f);
	return n == size ? 0 : -EIO;
}

/* Write @size bytes to @path; 0 or a negative errno. */
static int save_file(const char *path, const void *buf, size_t size)
{
	FILE *f = fopen(path, "wb");
	int ret = 0;

	if (!f)
		return -errno;
	if (fwrite(buf, 1, size, f) != size)
		ret = -(errno ? errno : EIO);
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

/* The whole file @path, malloc'd, in *buf and *size; 0 or a negative errno. */
static int read_image(const char *path, void **buf, size_t *size)
{
	FILE *f = fopen(path, "rb");
	long end;
	int ret = 0;

	*buf = NULL;
	*size = 0;
	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) || (end = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		ret = -errno;
	} else if (!end) {
		ret = -ENODATA;
	} else if (!(*buf = malloc((size_t)end))) {
		ret = -ENOMEM;
	} else if (fread(*buf, 1, (size_t)end, f) != (size_t)end) {
		ret = -EIO;
		free(*buf);
		*buf = NULL;
	} else {
		*size = (size_t)end;
	}
	fclose(f);
	return ret;
}

static const char *lookup(const char *const *list, int n, const char *name)
{
	size_t len = strlen(name);
	int i;

	for (i = 0; i < n; i++)
		if (!strncmp(list[i], name, len) && list[i][len] == '=')
			return list[i] + len + 1;
	return NULL;
}

/* Every --input names a slot, every --output an output slot of @prog. */
static int check_slot_names(const struct opts *o, spyre_program_t *prog)
{
	int i, k;

	for (k = 0; k < 2; k++) {
		const char *const *list = k ? o->outputs : o->inputs;

		for (i = 0; i < (k ? o->noutputs : o->ninputs); i++) {
			struct spyre_slot_info si = { .size = sizeof(si) };
			size_t len = strcspn(list[i], "=");
			char name[sizeof(si.name)];
			uint32_t idx;

			snprintf(name, sizeof(name), "%.*s", (int)len, list[i]);
			if (len >= sizeof(name) || spyre_program_find_slot(prog, name, &idx)) {
				fprintf(stderr, "spyre-run: --%s %s: the program has no slot named '%.*s'\n",
					k ? "output" : "input", list[i], (int)len, list[i]);
				return -1;
			}
			if (k && (spyre_program_slot_info(prog, idx, &si) || !(si.flags & SPYRE_SYM_OUT))) {
				fprintf(stderr, "spyre-run: --output %s: slot '%s' is not an output\n",
					list[i], name);
				return -1;
			}
		}
	}
	return 0;
}

static int run(struct opts *o)
{
	static const char *const paths[] = { "patch", "fast" };
	struct spyre_device_props props = { .size = sizeof(props) };
	spyre_device_t *dev;
	spyre_stream_t *s;
	int pi, rc = 0;

	if (o->trace && spyre_trace_start(o->trace)) {
		fprintf(stderr, "spyre-run: --trace: %s\n", spyre_last_error());
		return 1;
	}
	if (spyre_device_open(o->device, &dev))
		return die("open");
	spyre_device_get_props(dev, &props);
	if (o->cores > (int)props.num_cores) {
		fprintf(stderr, "spyre-run: --cores %d: %s has %u cores\n", o->cores, props.devnode,
			props.num_cores);
		return 2;
	}
	if (!o->cores) {
		o->cores = (int)props.num_cores;
		if (!o->program && o->m % (uint32_t)o->cores) {
			fprintf(stderr, "spyre-run: --rows %u is not a multiple of the %d cores of %s\n",
				o->m, o->cores, props.devnode);
			return 2;
		}
	}
	if (spyre_stream_create(dev, SPYRE_STREAM_PRIORITY_NORMAL, &s))
		return die("stream");
	if (o->program)
		printf("program %s on %d core%s of %s\n", o->program, o->cores, o->cores == 1 ? "" : "s",
		       props.devnode);
	else if (!strcmp(o->example, "mlp"))
		printf("mlp block: y = %s(x . W1) . W2; x %ux%u, W1 %ux%u, W2 %ux%u, fp32, %d cores of %s\n",
		       o->act == SPYRE_ISA_OP_SILU ? "silu" : "gelu", o->m, o->k, o->k, o->h, o->h, o->n,
		       o->cores, props.devnode);
	printf("%-6s %7s %14s %14s %16s %12s  %s\n", "path", "relocs", "host us/launch",
	       "e2e us/launch", "device us (mod)", "utilization", "check");

	for (pi = 0; pi < 2; pi++) {
		struct spyre_program_info info = { .size = sizeof(info) };
		struct spyre_launch_stats st = { .size = sizeof(st) };
		spyre_dptr_t *slots;
		float **host;
		spyre_program_t *prog;
		double t0, host_us = 0, e2e_us, worst = 0, busy = 0;
		char span[64];
		unsigned int seed = o->seed;
		uint32_t i, c, nslots;
		size_t size = 0;
		void *img = NULL;
		int it, bad, ret;

		if (strcmp(o->path, "both") && strcmp(o->path, paths[pi]))
			continue;
		if (o->program) {
			ret = read_image(o->program, &img, &size);
			if (ret) {
				fprintf(stderr, "spyre-run: cannot read %s: %s\n", o->program,
					ret == -ENODATA ? "empty file" : strerror(-ret));
				return 1;
			}
		} else if (!strcmp(o->example, "mlp")) {
			img = build_mlp(o, pi == 0, &size);
		} else {
			img = spyre_pb_relu_image(pi == 0 ? SPYRE_PB_ADDR_RELOC : SPYRE_PB_ADDR_SLOT, 32, 4096, &size);
		}
		if (!img || !size) {
			fprintf(stderr, "spyre-run: cannot build the %s example\n", o->example);
			return 1;
		}
		if (spyre_program_load(dev, img, size, &prog))
			return die("load");
		free(img);
		spyre_program_get_info(prog, &info);
		if (check_slot_names(o, prog))
			return 2;
		/* As many slots as the image has (up to SPYRE_PROG_MAX_SYMS). */
		nslots = info.num_slots;
		slots = calloc(nslots + 1, sizeof(*slots));
		host = calloc(nslots + 1, sizeof(*host));
		if (!slots || !host) {
			fprintf(stderr, "spyre-run: out of memory for %u slots\n", nslots);
			return 1;
		}
		for (i = 0; i < nslots; i++) {
			struct spyre_slot_info si = { .size = sizeof(si) };
			const char *file;

			spyre_program_slot_info(prog, i, &si);
			host[i] = calloc(1, si.bytes ? si.bytes : 1);
			if (!host[i]) {
				fprintf(stderr, "spyre-run: out of memory for slot %u '%s' (%llu bytes)\n",
					i, si.name, (unsigned long long)si.bytes);
				return 1;
			}
			if (spyre_malloc(dev, si.bytes ? si.bytes : 1, &slots[i]))
				return die("malloc");
			file = lookup(o->inputs, o->ninputs, si.name);
			if (file) {
				ret = load_file(file, host[i], si.bytes);
				if (ret) {
					fprintf(stderr, "spyre-run: cannot read %llu bytes for slot '%s' from %s: %s\n",
						(unsigned long long)si.bytes, si.name, file,
						ret == -EIO ? "file too short" : strerror(-ret));
					return 1;
				}
			} else if (si.flags & SPYRE_SYM_IN) {
				for (c = 0; c < si.bytes / 4; c++)
					host[i][c] = frand(&seed) * (i == 0 ? 2.0f : 0.1f);
			}
			if (spyre_memcpy(dev, slots[i], (uintptr_t)host[i], si.bytes, SPYRE_MEMCPY_H2D))
				return die("upload");
		}
		/* The first launch patches/uploads; the timed ones reuse bindings. */
		snprintf(span, sizeof(span), "%s, %s path", o->program ? "program" : o->example, paths[pi]);
		spyre_trace_span_begin(span);
		e2e_us = now_us();
		for (it = 0; it < o->iters; it++) {
			t0 = now_us();
			if (spyre_launch(s, prog, (uint32_t)((1ull << o->cores) - 1), slots, nslots,
					 NULL, 0))
				return die("launch");
			host_us += now_us() - t0;
			if (spyre_stream_synchronize(s))
				return die("run");
		}
		e2e_us = (now_us() - e2e_us) / o->iters;
		spyre_trace_span_end();
		if (spyre_stream_last_launch(s, &st))
			return die("stats");
		for (c = 0; c < SPYRE_MAX_CORES; c++)
			busy += (double)st.core_busy_cycles[c];
		for (i = 0; i < nslots; i++) {
			struct spyre_slot_info si = { .size = sizeof(si) };
			const char *file;

			spyre_program_slot_info(prog, i, &si);
			if (!(si.flags & SPYRE_SYM_OUT))
				continue;
			if (spyre_memcpy(dev, (uintptr_t)host[i], slots[i], si.bytes, SPYRE_MEMCPY_D2H))
				return die("download");
			file = lookup(o->outputs, o->noutputs, si.name);
			if (file) {
				ret = save_file(file, host[i], si.bytes);
				if (ret) {
					fprintf(stderr, "spyre-run: cannot write slot '%s' to %s: %s\n",
						si.name, file, strerror(-ret));
					rc = 1;
				}
			}
		}
		bad = o->program ? 0 : check(o, host, &worst);
		printf("%-6s %7u %14.1f %14.1f %16.2f %11.1f%%  %s", paths[pi], info.num_relocs,
		       host_us / o->iters, e2e_us, (double)st.device_ns / 1e3,
		       st.cores_run && st.device_cycles ?
		       100.0 * busy / ((double)st.cores_run * (double)st.device_cycles) : 0.0,
		       o->program ? "(no reference)" : bad ? "FAIL" : "PASS");
		if (!o->program && !strcmp(o->example, "mlp"))
			printf(" (worst error %.2g of tolerance)", worst);
		printf("\n");
		if (bad)
			rc = 1;
		for (i = 0; i < nslots; i++) {
			spyre_free(dev, slots[i]);
			free(host[i]);
		}
		free(slots);
		free(host);
		spyre_program_unload(prog);
	}
	spyre_stream_destroy(s);
	spyre_device_close(dev);
	if (o->trace) {
		int n = spyre_trace_stop();

		if (n < 0) {
			fprintf(stderr, "spyre-run: --trace: %s\n", spyre_last_error());
			return 1;
		}
		printf("trace: %s, %d events (open it in ui.perfetto.dev)\n", o->trace, n);
	}
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: spyre-run [options]\n"
		"  -e, --example mlp|relu   built-in program, checked against the CPU (default mlp)\n"
		"  -p, --program FILE       run a program image instead (see spyre-as)\n"
		"  -i, --input NAME=FILE    slot contents (default: seeded random data)\n"
		"  -o, --output NAME=FILE   save an output slot\n"
		"  -P, --path patch|fast|both   launch path(s) (default both)\n"
		"  -n, --iters N            launches per path, 1..1000000 (default 20)\n"
		"  -c, --cores N            cores, 1..%d, for mlp dividing the rows (default: all)\n"
		"  -a, --act gelu|silu      mlp activation (default gelu)\n"
		"  -m, --rows M             mlp rows of x, 1..65536 (default 256)\n"
		"  -s, --seed S             random data seed (default 1)\n"
		"  -d, --device N           device index (default 0)\n"
		"  -t, --trace FILE         write a Chrome/Perfetto trace of the run to FILE\n"
		"  -h, --help               this text\n"
		"exit status: 0 every run passed its check (or had none), 1 a check failed or\n"
		"the device, a file or the runtime reported an error, 2 bad usage\n", SPYRE_MAX_CORES);
}

/* Parse @arg of option @opt as an integer in [min, max] (base 0 if @any_base, else 10). */
static int parse_num(const char *opt, const char *arg, long long min, long long max, int any_base,
		     long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, any_base ? 0 : 10);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "spyre-run: %s: '%s' is not a number from %lld to %lld\n", opt, arg,
			min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* @arg of @opt is one of the NULL-terminated @valid words: its index, or -1 with a message. */
static int parse_word(const char *opt, const char *what, const char *arg, const char *const *valid)
{
	int i;

	for (i = 0; valid[i]; i++)
		if (!strcmp(arg, valid[i]))
			return i;
	fprintf(stderr, "spyre-run: %s: unknown %s '%s' (valid:", opt, what, arg);
	for (i = 0; valid[i]; i++)
		fprintf(stderr, "%s %s", i ? "," : "", valid[i]);
	fprintf(stderr, ")\n");
	return -1;
}

static int name_file(const char *opt, const char *arg)
{
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || !eq[1]) {
		fprintf(stderr, "spyre-run: %s: want NAME=FILE, not '%s'\n", opt, arg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "example", 1, 0, 'e' }, { "program", 1, 0, 'p' }, { "input", 1, 0, 'i' },
		{ "output", 1, 0, 'o' }, { "path", 1, 0, 'P' }, { "iters", 1, 0, 'n' },
		{ "cores", 1, 0, 'c' }, { "act", 1, 0, 'a' }, { "rows", 1, 0, 'm' },
		{ "seed", 1, 0, 's' }, { "device", 1, 0, 'd' }, { "trace", 1, 0, 't' },
		{ "help", 0, 0, 'h' }, { 0 },
	};
	static const char *const examples[] = { "mlp", "relu", NULL };
	static const char *const paths[] = { "patch", "fast", "both", NULL };
	static const char *const acts[] = { "gelu", "silu", NULL };
	struct opts o = {
		.example = "mlp", .path = "both", .iters = 20, .seed = 1,
		.m = 256, .k = 128, .h = 256, .n = 128, .act = SPYRE_ISA_OP_GELU,
	};
	long long v;
	int c, w;

	/* At most one --input or --output per argument. */
	o.inputs = calloc((size_t)argc, sizeof(*o.inputs));
	o.outputs = calloc((size_t)argc, sizeof(*o.outputs));
	if (!o.inputs || !o.outputs) {
		fprintf(stderr, "spyre-run: out of memory\n");
		return 1;
	}
	while ((c = getopt_long(argc, argv, "e:p:i:o:P:n:c:a:m:s:d:t:h", lo, NULL)) != -1) {
		switch (c) {
		case 'e':
			if ((w = parse_word("--example", "example", optarg, examples)) < 0)
				return 2;
			o.example = examples[w];
			break;
		case 'p':
			o.program = optarg;
			break;
		case 'i':
			if (name_file("--input", optarg))
				return 2;
			o.inputs[o.ninputs++] = optarg;
			break;
		case 'o':
			if (name_file("--output", optarg))
				return 2;
			o.outputs[o.noutputs++] = optarg;
			break;
		case 'P':
			if ((w = parse_word("--path", "launch path", optarg, paths)) < 0)
				return 2;
			o.path = paths[w];
			break;
		case 'n':
			if (parse_num("--iters", optarg, 1, 1000000, 0, &v))
				return 2;
			o.iters = (int)v;
			break;
		case 'c':
			if (parse_num("--cores", optarg, 1, SPYRE_MAX_CORES, 0, &v))
				return 2;
			o.cores = (int)v;
			break;
		case 'a':
			if ((w = parse_word("--act", "activation", optarg, acts)) < 0)
				return 2;
			o.act = w ? SPYRE_ISA_OP_SILU : SPYRE_ISA_OP_GELU;
			break;
		case 'm':
			if (parse_num("--rows", optarg, 1, 65536, 0, &v))
				return 2;
			o.m = (uint32_t)v;
			break;
		case 's':
			if (parse_num("--seed", optarg, 0, UINT32_MAX, 1, &v))
				return 2;
			o.seed = (unsigned int)v;
			break;
		case 'd':
			if (parse_num("--device", optarg, 0, INT32_MAX, 0, &v))
				return 2;
			o.device = (int)v;
			break;
		case 't':
			o.trace = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "spyre-run: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!strcmp(o.example, "relu"))
		o.cores = 1;
	if (!o.program && o.cores && o.m % (uint32_t)o.cores) {
		fprintf(stderr, "spyre-run: --rows %u is not a multiple of --cores %d\n", o.m, o.cores);
		return 2;
	}
	return run(&o);
}
