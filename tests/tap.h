/* SPDX-License-Identifier: MIT */
/*
 * tap.h - the harness of every host test written in C: TAP version 13 on
 * stdout. (The kselftests in the VM keep the kernel's kselftest_harness.h;
 * shell tests use tests/tap.sh.)
 *
 * A test is a table of cases run in order; the plan is the table's length:
 *
 *	static void test_nop(void)
 *	{
 *		TAP_EQ(0, sdev_wait(&D, 0, 2000));
 *		TAP_CHECK(!memcmp(in, out, n), "round trip differs at size %zu", n);
 *	}
 *
 *	static const struct tap_case cases[] = {
 *		{ "nop", test_nop },
 *	};
 *
 *	int main(int argc, char **argv)
 *	{
 *		...set-up: tap_skip_all() or tap_bail() when it cannot be done...
 *		return TAP_RUN(cases, argc, argv);
 *	}
 *
 * prints
 *
 *	TAP version 13
 *	1..1
 *	#   qemu-device/tests/spyre-queue-test.c:40: sdev_wait(&D, 0, 2000): expected 0 (0x0), got -1 (...)
 *	not ok 1 - nop
 *	# 1 case: 0 passed, 1 failed, 0 skipped; 2 checks, 1 failed
 *
 * A failed check prints its file:line, expression and message and the case
 * goes on; the case is "not ok" when any of its checks failed (with
 * TAP_VERBOSE=1 in the environment passed checks print theirs too). tap_skip()
 * in a case reports it "ok ... # SKIP reason". Arguments name the cases to
 * run; the others are reported skipped, so the plan always holds. Checks may
 * run on several threads at once (the counters are atomic, lines whole).
 *
 * Exit status (TAP_RUN's value): 0 when no check failed, 1 when one did,
 * 77 when every case was skipped (tools/check counts the program skipped).
 * tap_skip_all() exits 77 with the plan "1..0 # SKIP reason"; tap_bail()
 * exits 1 after "Bail out! reason".
 *
 * Checks may be in any file of the program: the state is shared.
 */
#ifndef SPYRE_TAP_H
#define SPYRE_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tap_case {
	const char *name;
	void (*fn)(void);
};

/* One per program: every file that includes this header shares it (weak). */
struct tap_state {
	int started;			/* "TAP version 13" printed */
	unsigned int checks, failed;	/* checks run and failed, all cases */
	unsigned int case_failed;	/* checks failed in the running case */
	char skip[256];			/* the running case's skip reason */
};
__attribute__((weak)) struct tap_state tap_state;

#define TAP_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Print one whole line (a prefix, then the formatted text) atomically. */
static inline TAP_PRINTF(2, 0) void tap_vline_(const char *prefix, const char *fmt, va_list ap)
{
	flockfile(stdout);
	if (!__atomic_exchange_n(&tap_state.started, 1, __ATOMIC_SEQ_CST))
		fputs("TAP version 13\n", stdout);
	fputs(prefix, stdout);
	vfprintf(stdout, fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	funlockfile(stdout);
}

static inline TAP_PRINTF(2, 3) void tap_line_(const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_vline_(prefix, fmt, ap);
	va_end(ap);
}

/* A diagnostic line: "# ...". */
#define tap_diag(...) tap_line_("# ", __VA_ARGS__)

/* Nothing of the test can run here: "1..0 # SKIP reason", exit 77. */
#define tap_skip_all(...) (tap_line_("1..0 # SKIP ", __VA_ARGS__), exit(77))

/* The test cannot go on (its set-up failed): "Bail out! reason", exit 1. */
#define tap_bail(...) (tap_line_("Bail out! ", __VA_ARGS__), exit(1))

/* In a case: report it skipped with @fmt as the reason (return after it). */
static inline TAP_PRINTF(1, 2) void tap_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tap_state.skip, sizeof(tap_state.skip), fmt, ap);
	va_end(ap);
}

/* $TAP_VERBOSE set: passed checks print their line too, "#   ok file:line: ...". */
static inline int tap_verbose_(void)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("TAP_VERBOSE") != NULL;
	return verbose;
}

/*
 * Count one check; when @ok is false, count a failure of it and of the
 * running case and print "#   file:line: expr: message". Returns @ok.
 */
static inline TAP_PRINTF(5, 6) int tap_check_(int ok, const char *file, int line,
					      const char *expr, const char *fmt, ...)
{
	char where[512];
	va_list ap;

	__atomic_add_fetch(&tap_state.checks, 1, __ATOMIC_SEQ_CST);
	if (ok && !tap_verbose_())
		return 1;
	if (!ok) {
		__atomic_add_fetch(&tap_state.failed, 1, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&tap_state.case_failed, 1, __ATOMIC_SEQ_CST);
	}
	snprintf(where, sizeof(where), "#   %s%s:%d: %s: ", ok ? "ok " : "", file, line, expr);
	va_start(ap, fmt);
	tap_vline_(where, fmt, ap);
	va_end(ap);
	return ok;
}

/* @cond holds; else print @... (a printf format and its arguments). An expression: @cond's truth. */
#define TAP_CHECK(cond, ...) tap_check_(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

/* Integers (any width or sign, compared as unsigned long long) are equal. */
#define TAP_EQ(exp, got) __extension__({						\
		unsigned long long tap_e_ = (exp), tap_g_ = (got);			\
		tap_check_(tap_e_ == tap_g_, __FILE__, __LINE__, #got " == " #exp,	\
			   "expected %lld (%#llx), got %lld (%#llx)", (long long)tap_e_,	\
			   tap_e_, (long long)tap_g_, tap_g_);				\
	})

/* @x as text in @buf, by its type: signed, unsigned, floating or a pointer. */
static inline const char *tap_sval_(char *buf, size_t size, long long v)
{
	snprintf(buf, size, "%lld", v);
	return buf;
}

static inline const char *tap_uval_(char *buf, size_t size, unsigned long long v)
{
	snprintf(buf, size, "%llu (%#llx)", v, v);
	return buf;
}

static inline const char *tap_fval_(char *buf, size_t size, double v)
{
	snprintf(buf, size, "%.17g", v);
	return buf;
}

static inline const char *tap_pval_(char *buf, size_t size, const volatile void *v)
{
	snprintf(buf, size, "%p", (const void *)v);
	return buf;
}

#define TAP_VAL_(buf, x) _Generic((x),							\
		_Bool: tap_sval_, char: tap_sval_, signed char: tap_sval_,		\
		short: tap_sval_, int: tap_sval_, long: tap_sval_, long long: tap_sval_,	\
		unsigned char: tap_uval_, unsigned short: tap_uval_,			\
		unsigned int: tap_uval_, unsigned long: tap_uval_,			\
		unsigned long long: tap_uval_,						\
		float: tap_fval_, double: tap_fval_, default: tap_pval_)(buf, sizeof(buf), x)

/* @a @op @b in the operands' own types, e.g. TAP_CMP(t2 - t1, >=, 1000000); prints both sides. */
#define TAP_CMP(a, op, b) __extension__({						\
		__typeof__(a) tap_a_ = (a);						\
		__typeof__(b) tap_b_ = (b);						\
		char tap_sa_[64], tap_sb_[64];						\
		tap_check_(tap_a_ op tap_b_, __FILE__, __LINE__, #a " " #op " " #b,	\
			   "%s %s %s is false", TAP_VAL_(tap_sa_, tap_a_), #op,		\
			   TAP_VAL_(tap_sb_, tap_b_));					\
	})

/* Two strings are equal (NULL equals only NULL). */
#define TAP_STREQ(exp, got) __extension__({						\
		const char *tap_e_ = (exp), *tap_g_ = (got);				\
		tap_check_(tap_e_ && tap_g_ ? !strcmp(tap_e_, tap_g_) : tap_e_ == tap_g_,	\
			   __FILE__, __LINE__, #got " == " #exp, "expected \"%s\", got \"%s\"",	\
			   tap_e_ ? tap_e_ : "(null)", tap_g_ ? tap_g_ : "(null)");	\
	})

static inline int tap_selected_(const char *name, int argc, char **argv)
{
	int i;

	if (argc < 2)
		return 1;
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], name))
			return 1;
	return 0;
}

/*
 * Run the cases named in @argv (all without arguments) in order, the plan
 * first: only the cases run are planned and numbered (a run of a few cases
 * reports no skips it did not mean). Returns the exit status: 0, 1 (a check
 * failed) or 77 (all skipped).
 */
static inline int tap_run(const struct tap_case *cases, size_t n, int argc, char **argv)
{
	unsigned int passed = 0, failed = 0, skipped = 0;
	size_t i, k = 0, planned = 0;
	int a;

	for (a = 1; a < argc; a++) {
		for (i = 0; i < n && strcmp(argv[a], cases[i].name); i++)
			;
		if (i == n)
			tap_bail("no case named '%s'", argv[a]);
	}
	for (i = 0; i < n; i++)
		planned += tap_selected_(cases[i].name, argc, argv);
	tap_line_("1..", "%zu", planned);
	for (i = 0; i < n; i++) {
		if (!tap_selected_(cases[i].name, argc, argv))
			continue;
		k++;
		__atomic_store_n(&tap_state.case_failed, 0, __ATOMIC_SEQ_CST);
		tap_state.skip[0] = '\0';
		cases[i].fn();
		if (__atomic_load_n(&tap_state.case_failed, __ATOMIC_SEQ_CST)) {
			tap_line_("not ok ", "%zu - %s", k, cases[i].name);
			failed++;
		} else if (tap_state.skip[0]) {
			tap_line_("ok ", "%zu - %s # SKIP %s", k, cases[i].name, tap_state.skip);
			skipped++;
		} else {
			tap_line_("ok ", "%zu - %s", k, cases[i].name);
			passed++;
		}
	}
	tap_diag("%zu case%s: %u passed, %u failed, %u skipped; %u checks, %u failed", planned,
		 planned == 1 ? "" : "s", passed, failed, skipped, tap_state.checks, tap_state.failed);
	if (failed || tap_state.failed)
		return 1;
	return planned && skipped == planned ? 77 : 0;
}

#define TAP_RUN(cases, argc, argv) tap_run(cases, sizeof(cases) / sizeof((cases)[0]), argc, argv)

#endif /* SPYRE_TAP_H */
