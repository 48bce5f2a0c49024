// SPDX-License-Identifier: MIT
/*
 * Description: the safetensors reader and writer (model/safetensors.h) and
 * the F16/BF16 element formats they read and write, which are the ISA
 * library's conversions (isa/spyre_dtype.h): conversions on chosen bit
 * patterns (subnormals, infinities, -0, NaN, rounding ties) and every fp16
 * and bf16 value round-tripped; write/read of F32/F16/BF16 tensors of ranks
 * 0..3 with exact values, the header padded to 8 bytes and laid out as the
 * Python library requires (contiguous offsets covering the data area); every
 * class of bad input refused with a message naming it: every truncation of
 * a valid file, header length past the end or over 100 MiB, bad JSON,
 * data_offsets past the data area or reversed, shape/size mismatch, unknown
 * dtype (F64 named), duplicate or unknown fields and names, missing tensor,
 * wrong shape.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "spyre_dtype.h"
#include "test-util.h"
#include "../../tests/tap.h"

static char err[512];

static uint32_t bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static void test_f16(void)
{
	static const struct {
		uint16_t h;
		uint32_t f;
	} dec[] = {
		{ 0x0000, 0x00000000 }, { 0x8000, 0x80000000 },	/* +-0 */
		{ 0x0001, 0x33800000 },					/* 2^-24, smallest subnormal */
		{ 0x03ff, 0x387fc000 },					/* largest subnormal */
		{ 0x0400, 0x38800000 },					/* 2^-14 */
		{ 0x3c00, 0x3f800000 }, { 0xc000, 0xc0000000 },		/* 1, -2 */
		{ 0x3555, 0x3eaaa000 },					/* 0.333251953125 */
		{ 0x7bff, 0x477fe000 },					/* 65504 */
		{ 0x7c00, 0x7f800000 }, { 0xfc00, 0xff800000 },		/* +-inf */
		{ 0x8001, 0xb3800000 },					/* -2^-24 */
	};
	static const struct {
		uint32_t f;
		uint16_t h;
	} enc[] = {
		{ 0x00000000, 0x0000 }, { 0x80000000, 0x8000 },
		{ 0x477fefff, 0x7bff },		/* 65519.99: still 65504 */
		{ 0x477ff000, 0x7c00 },		/* 65520: rounds to inf */
		{ 0x7f800000, 0x7c00 }, { 0xff800000, 0xfc00 },
		{ 0x33000000, 0x0000 },		/* 2^-25: a tie, to even (0) */
		{ 0x33000001, 0x0001 },		/* just above: the smallest subnormal */
		{ 0x33c00000, 0x0002 },		/* 1.5 * 2^-24: a tie, to even (2) */
		{ 0x3f801000, 0x3c00 },		/* 1 + 2^-11: a tie, to even (1) */
		{ 0x3f803000, 0x3c02 },		/* 1 + 3 * 2^-11: a tie, to even (1 + 2^-9) */
		{ 0x3f801001, 0x3c01 },		/* above the tie */
		{ 0x387fe000, 0x03ff + 1 },	/* 2^-14 - 2^-25: a tie between the top subnormal and 2^-14: even */
		{ 0x3eaaaaab, 0x3555 },		/* 1/3 */
		{ 0x00000001, 0x0000 },		/* fp32 subnormal */
	};

	for (size_t i = 0; i < sizeof(dec) / sizeof(dec[0]); i++)
		TAP_CHECK(bits(spyre_f16_to_f32(dec[i].h)) == dec[i].f, "f16 %#06x -> %#010x, expected %#010x",
			  dec[i].h, bits(spyre_f16_to_f32(dec[i].h)), dec[i].f);
	for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++)
		TAP_CHECK(spyre_f32_to_f16(from_bits(enc[i].f)) == enc[i].h,
			  "f32 %#010x -> f16 %#06x, expected %#06x", enc[i].f,
			  spyre_f32_to_f16(from_bits(enc[i].f)), enc[i].h);
	TAP_CHECK(isnan(spyre_f16_to_f32(0x7e00)) && isnan(spyre_f16_to_f32(0x7c01)), "NaN decodes");
	TAP_CHECK((spyre_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (spyre_f32_to_f16(NAN) & 0x3ff),
		  "NaN encodes as NaN");
	/* every fp16 value: decode, encode back */
	unsigned int wrong = 0;

	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		wrong += spyre_f32_to_f16(spyre_f16_to_f32((uint16_t)h)) != h;
	}
	TAP_EQ(0, wrong);
}

static void test_bf16(void)
{
	TAP_EQ(0x3f800000, bits(spyre_bf16_to_f32(0x3f80)));
	TAP_EQ(0x00010000, bits(spyre_bf16_to_f32(0x0001)));	/* subnormal 2^-133 */
	TAP_EQ(0x80000000, bits(spyre_bf16_to_f32(0x8000)));
	TAP_EQ(0x7f800000, bits(spyre_bf16_to_f32(0x7f80)));
	TAP_EQ(0x3f80, spyre_f32_to_bf16(from_bits(0x3f808000)));	/* tie to even */
	TAP_EQ(0x3f82, spyre_f32_to_bf16(from_bits(0x3f818000)));	/* tie to even */
	TAP_EQ(0x3f81, spyre_f32_to_bf16(from_bits(0x3f808001)));
	TAP_EQ(0x7f80, spyre_f32_to_bf16(from_bits(0x7f7fffff)));	/* overflow: inf */
	TAP_EQ(0x0001, spyre_f32_to_bf16(from_bits(0x00010000)));
	TAP_EQ(0x8000, spyre_f32_to_bf16(-0.0f));
	TAP_CHECK(isnan(spyre_bf16_to_f32(spyre_f32_to_bf16(from_bits(0x7f800001)))),
		  "a NaN whose payload is in the low bits stays NaN");
	unsigned int wrong = 0;

	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
			continue;
		wrong += spyre_f32_to_bf16(spyre_bf16_to_f32((uint16_t)h)) != h;
	}
	TAP_EQ(0, wrong);
}

/* ---- files ---- */

static char path[256];

static const char *tmp_path(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", model_tmpdir(), name);
	return path;
}

static const float f32_vals[6] = { 1.0f, -0.0f, 3.14159274f, 1e-45f /* fp32 subnormal */, INFINITY, -65504.0f };
static const uint16_t f16_raw[4] = { 0x0001, 0x7c00, 0x8000, 0x3555 };
static const uint16_t bf16_raw[3] = { 0x0001, 0xff80, 0x4049 };

/* A small valid file: F32 [2,3], F16 [4] (raw bits), BF16 [3,1,1] (raw), a scalar F32 [], an empty F16 [0,5]. */
static const struct spyre_st_out small[] = {
	{ "a.weight", SPYRE_ST_F32, 2, { 2, 3 }, f32_vals, NULL },
	{ "half", SPYRE_ST_F16, 1, { 4 }, NULL, f16_raw },
	{ "brain \"q\"\\", SPYRE_ST_BF16, 3, { 3, 1, 1 }, NULL, bf16_raw },
	{ "scalar", SPYRE_ST_F32, 0, { 0 }, f32_vals + 2, NULL },
	{ "empty", SPYRE_ST_F16, 2, { 0, 5 }, NULL, f16_raw },
};

static char *small_file(size_t *len)
{
	if (spyre_st_write(tmp_path("small.safetensors"), small, sizeof(small) / sizeof(small[0]), err,
			   sizeof(err)))
		return NULL;
	return model_read_file(tmp_path("small.safetensors"), len);
}

static void test_round_trip(void)
{
	size_t len;
	char *file = small_file(&len);
	struct spyre_st *st;
	float out[8];

	if (!TAP_CHECK(file != NULL, "write: %s", err))
		return;
	uint64_t hlen = 0;

	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | (unsigned char)file[i];
	TAP_EQ(0, (8 + hlen) % 8);
	TAP_CHECK(file[8] == '{' && file[8 + hlen - 1] == ' ', "header starts with '{', padded with spaces");
	TAP_EQ(8 + hlen + 24 + 8 + 6 + 4, len);
	if (!TAP_CHECK(spyre_st_open(tmp_path("small.safetensors"), &st, err, sizeof(err)) == 0, "%s", err))
		goto out;
	TAP_EQ(5, spyre_st_count(st));
	TAP_STREQ("pt", spyre_st_metadata(st, "format"));
	TAP_CHECK(spyre_st_metadata(st, "nothing") == NULL, "absent metadata");

	TAP_EQ(0, spyre_st_read_f32(st, "a.weight", 2, (uint64_t[]){ 2, 3 }, out, err, sizeof(err)));
	for (int i = 0; i < 6; i++)
		TAP_CHECK(bits(out[i]) == bits(f32_vals[i]), "F32 %d: %#x, expected %#x", i, bits(out[i]),
			  bits(f32_vals[i]));
	TAP_EQ(0, spyre_st_read_f32(st, "half", 1, (uint64_t[]){ 4 }, out, err, sizeof(err)));
	TAP_EQ(0x33800000, bits(out[0]));	/* 2^-24 */
	TAP_EQ(0x7f800000, bits(out[1]));
	TAP_EQ(0x80000000, bits(out[2]));
	TAP_EQ(0x3eaaa000, bits(out[3]));
	TAP_EQ(0, spyre_st_read_f32(st, "brain \"q\"\\", 3, (uint64_t[]){ 3, 1, 1 }, out, err, sizeof(err)));
	TAP_EQ(0x00010000, bits(out[0]));
	TAP_EQ(0xff800000, bits(out[1]));
	TAP_EQ(0x40490000, bits(out[2]));
	TAP_EQ(0, spyre_st_read_f32(st, "scalar", 0, NULL, out, err, sizeof(err)));
	TAP_CHECK(out[0] == 3.14159274f, "scalar");
	TAP_EQ(0, spyre_st_read_f32(st, "empty", 2, (uint64_t[]){ 0, 5 }, out, err, sizeof(err)));

	/* the layout the Python library demands: sorted by offset, contiguous, covering the data */
	uint64_t end = 0;

	for (size_t i = 0; i < spyre_st_count(st); i++) {
		const struct spyre_st_tensor *t = spyre_st_tensor_at(st, i);

		TAP_CHECK(t->begin == end, "tensor %zu begins at %llu, not %llu", i, (unsigned long long)t->begin,
			  (unsigned long long)end);
		end = t->end;
	}
	TAP_EQ(len - 8 - hlen, end);
	TAP_CHECK(spyre_st_find(st, "half") == spyre_st_tensor_at(st, 1), "find");
	TAP_STREQ("F16", spyre_st_dtype_name(spyre_st_find(st, "half")->dtype));

	/* fp32 data written as F16/BF16: round to nearest even */
	const float conv[3] = { 1.0f + 1.0f / 2048.0f, 65520.0f, 1.0f / 3.0f };
	const struct spyre_st_out c2[] = {
		{ "h", SPYRE_ST_F16, 1, { 3 }, conv, NULL },
		{ "b", SPYRE_ST_BF16, 1, { 3 }, conv, NULL },
	};
	struct spyre_st *st2;

	TAP_EQ(0, spyre_st_write(tmp_path("conv.safetensors"), c2, 2, err, sizeof(err)));
	if (TAP_CHECK(spyre_st_open(tmp_path("conv.safetensors"), &st2, err, sizeof(err)) == 0, "%s", err)) {
		TAP_EQ(0, spyre_st_read_f32(st2, "h", 1, (uint64_t[]){ 3 }, out, err, sizeof(err)));
		TAP_CHECK(out[0] == 1.0f && isinf(out[1]) && bits(out[2]) == 0x3eaaa000, "F16 written rounded");
		TAP_EQ(0, spyre_st_read_f32(st2, "b", 1, (uint64_t[]){ 3 }, out, err, sizeof(err)));
		TAP_CHECK(out[0] == 1.0f && out[1] == 65536.0f && bits(out[2]) == 0x3eab0000, "BF16 written rounded");
		spyre_st_close(st2);
	}
	spyre_st_close(st);
out:
	free(file);
}

/* @buf (len) is refused on opening with a message containing @frag. */
static void open_bad(const char *what, const void *buf, size_t len, const char *frag)
{
	struct spyre_st *st = NULL;
	void *copy = malloc(len ? len : 1);	/* exactly len bytes */

	memcpy(copy, buf, len);
	err[0] = 0;
	TAP_CHECK(spyre_st_open_mem(copy, len, &st, err, sizeof(err)) == -1 && strstr(err, frag),
		  "%s: expected an error with \"%s\", got \"%s\"", what, frag, err);
	spyre_st_close(st);
	free(copy);
}

/* A file of header text @hdr and @data bytes of zeros. */
static void hdr_bad(const char *hdr, size_t data, const char *frag)
{
	size_t n = strlen(hdr), len = 8 + n + data;
	unsigned char *buf = calloc(1, len);

	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, hdr, n);
	open_bad(hdr, buf, len, frag);
	free(buf);
}

static void test_bad_headers(void)
{
	unsigned char b[16] = { 0 };

	open_bad("5 bytes", b, 5, "file is 5 bytes, shorter than the 8-byte header length");
	b[0] = 0xe8;	/* 1000 */
	b[1] = 0x03;
	open_bad("header past the end", b, 16, "header length 1000 runs past the end of the file (16 bytes)");
	memset(b, 0, 8);
	b[3] = 0x10;	/* 256 MiB */
	open_bad("huge header", b, 16, "header length 268435456 is more than the limit 104857600 (100 MiB)");
	memset(b, 0xff, 8);
	open_bad("2^64-1 header", b, 16, "header length 18446744073709551615 is more than the limit");
	hdr_bad("", 0, "header is not valid JSON: expected a value, found the end at byte 0");
	hdr_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4,
		"header is not valid JSON: unterminated object at byte 53 (of the header)");
	hdr_bad("[]", 0, "header is not a JSON object but array");
	hdr_bad("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
		"tensor 'w' has dtype 'F64', not one of F32, F16, BF16");
	hdr_bad("{\"w\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype 'I8'");
	hdr_bad("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
		"tensor 'w': dtype must be a string, not number");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4,
		"tensor 'w': data_offsets [0, 8] run past the data area (4 bytes)");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8,
		"tensor 'w': data_offsets [8, 4] end before they begin");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
		"tensor 'w': shape [2,3] of F32 needs 24 bytes, data_offsets [0, 20] hold 20");
	hdr_bad("{\"w\":{\"dtype\":\"BF16\",\"shape\":[4611686018427387904,2],\"data_offsets\":[0,2]}}", 2,
		"tensor 'w': shape [4611686018427387904,2] of BF16 needs more than 2^64 bytes");
	hdr_bad("{\"w\":{\"dtype\":\"F16\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,2]}}", 2,
		"tensor 'w': shape [4294967296,4294967296,2] has too many elements");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
		"tensor 'w': shape[0] is not a non-negative integer");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0] is not");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4,
		"tensor 'w': shape must be an array, not number");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
		"tensor 'w': rank 9 is more than 8");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
		"tensor 'w': data_offsets must be two non-negative integers");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w': missing field 'data_offsets'");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
		"tensor 'w': unknown field 'x'");
	hdr_bad("{\"w\":[1]}", 4, "tensor 'w': expected an object, found array");
	hdr_bad("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		"\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
		"header is not valid JSON: duplicate key \"w\" at byte 54");
	hdr_bad("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
		"tensor name 'a...' holds a NUL");
	hdr_bad("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__ must be an object of strings");
	hdr_bad("{\"__metadata__\":[]}", 0, "__metadata__ must be an object of strings, not array");
	/* a long, odd name is shown shortened and printable */
	hdr_bad("{\"\\n0123456789012345678901234567890123456789012345678901234567890123456789012345678901234\":"
		"{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
		"tensor '?0123456789012345678901234567890123456789012345678901234567890123456789012345678...' "
		"has dtype 'F64'");

	/* accepted: overlapping and out-of-order ranges inside the data area, trailing bytes, empty header */
	const char *ok = "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
			 "\"a\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}";
	size_t n = strlen(ok);
	unsigned char *buf = calloc(1, 8 + n + 12);
	struct spyre_st *st;

	buf[0] = (unsigned char)n;
	memcpy(buf + 8, ok, n);
	TAP_CHECK(spyre_st_open_mem(buf, 8 + n + 12, &st, err, sizeof(err)) == 0 && spyre_st_count(st) == 2,
		  "overlapping ranges: %s", err);
	spyre_st_close(st);
	free(buf);
	TAP_CHECK(spyre_st_open_mem("\2\0\0\0\0\0\0\0{}", 10, &st, err, sizeof(err)) == 0 && !spyre_st_count(st),
		  "no tensors: %s", err);
	spyre_st_close(st);

	/* files */
	TAP_CHECK(spyre_st_open("/nonexistent.safetensors", &st, err, sizeof(err)) == -1 &&
		  !strcmp(err, "/nonexistent.safetensors: No such file or directory"), "%s", err);
	model_write_file(tmp_path("short.safetensors"), "abc", 3);
	TAP_CHECK(spyre_st_open(path, &st, err, sizeof(err)) == -1 && strstr(err, path) &&
		  strstr(err, "file is 3 bytes, shorter than the 8-byte header length"), "%s", err);
	TAP_CHECK(spyre_st_open(model_tmpdir(), &st, err, sizeof(err)) == -1 && strstr(err, "not a regular file"),
		  "%s", err);
}

static void test_read_errors(void)
{
	size_t len;
	char *file = small_file(&len);
	struct spyre_st *st;
	float out[8];

	if (!TAP_CHECK(file && spyre_st_open_mem(file, len, &st, err, sizeof(err)) == 0, "%s", err)) {
		free(file);
		return;
	}
	TAP_CHECK(spyre_st_read_f32(st, "nope", 1, (uint64_t[]){ 1 }, out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "tensor 'nope' not found"), "%s", err);
	TAP_CHECK(spyre_st_read_f32(st, "a.weight", 2, (uint64_t[]){ 3, 2 }, out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "tensor 'a.weight' has shape [2,3], expected [3,2]"), "%s", err);
	TAP_CHECK(spyre_st_read_f32(st, "a.weight", 1, (uint64_t[]){ 6 }, out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "tensor 'a.weight' has shape [2,3], expected [6]"), "%s", err);
	TAP_CHECK(spyre_st_read_f32(st, "scalar", 1, (uint64_t[]){ 1 }, out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "tensor 'scalar' has shape [], expected [1]"), "%s", err);
	spyre_st_close(st);
	free(file);
}

static void test_truncated(void)
{
	size_t len, refused = 0;
	char *file = small_file(&len);

	if (!TAP_CHECK(file != NULL, "%s", err))
		return;
	for (size_t n = 0; n < len; n++) {
		char *cut = malloc(n ? n : 1);
		struct spyre_st *st = NULL;

		memcpy(cut, file, n);
		err[0] = 0;
		if (spyre_st_open_mem(cut, n, &st, err, sizeof(err)) == -1 && err[0])
			refused++;
		else
			TAP_CHECK(0, "cut at %zu of %zu bytes: %s", n, len, st ? "accepted" : "no message");
		spyre_st_close(st);
		free(cut);
	}
	TAP_EQ(len, refused);
	/* the three regions' messages */
	open_bad("cut in the length", file, 7, "shorter than the 8-byte header length");
	open_bad("cut in the header", file, 20, "runs past the end of the file (20 bytes)");
	open_bad("cut in the data", file, len - 1, "tensor 'scalar': data_offsets [38, 42] run past the data "
		 "area (41 bytes)");
	open_bad("cut in the data", file, len - 5, "run past the data area");
	free(file);
}

static void test_writer_errors(void)
{
	const float v[1] = { 1 };
	const struct spyre_st_out dup[] = {
		{ "x", SPYRE_ST_F32, 1, { 1 }, v, NULL },
		{ "x", SPYRE_ST_F32, 1, { 1 }, v, NULL },
	};
	const struct spyre_st_out none[] = { { "y", SPYRE_ST_F32, 1, { 1 }, NULL, NULL } };
	const struct spyre_st_out meta[] = { { "__metadata__", SPYRE_ST_F32, 1, { 1 }, v, NULL } };

	TAP_CHECK(spyre_st_write(tmp_path("w.safetensors"), dup, 2, err, sizeof(err)) == -1 &&
		  strstr(err, "tensor 'x' is given twice"), "%s", err);
	TAP_CHECK(spyre_st_write(tmp_path("w.safetensors"), none, 1, err, sizeof(err)) == -1 &&
		  strstr(err, "invalid name, rank, dtype or data"), "%s", err);
	TAP_CHECK(spyre_st_write(tmp_path("w.safetensors"), meta, 1, err, sizeof(err)) == -1, "%s", err);
	TAP_CHECK(access(tmp_path("w.safetensors"), F_OK) && access(tmp_path("w.safetensors.tmp"), F_OK),
		  "nothing left behind");
	TAP_CHECK(spyre_st_write("/nonexistent/w.safetensors", dup, 1, err, sizeof(err)) == -1 &&
		  strstr(err, "/nonexistent/w.safetensors.tmp: No such file or directory"), "%s", err);
}

/* I64 (BERT's embeddings.position_ids): listed with its 8-byte size, refused as floats. */
static void test_i64(void)
{
	static const char hdr[] = "{\"ids\":{\"dtype\":\"I64\",\"shape\":[1,3],\"data_offsets\":[0,24]},"
				  "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}";
	size_t n = strlen(hdr), len = 8 + n + 28;
	unsigned char *buf = calloc(1, len);
	struct spyre_st *st = NULL;
	const struct spyre_st_tensor *t;
	float out[3];

	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, hdr, n);
	if (!TAP_CHECK(spyre_st_open_mem(buf, len, &st, err, sizeof(err)) == 0, "%s", err)) {
		free(buf);
		return;
	}
	t = spyre_st_find(st, "ids");
	TAP_CHECK(t && t->dtype == SPYRE_ST_I64 && t->nelem == 3 && t->end - t->begin == 24, "ids listed");
	TAP_STREQ("I64", spyre_st_dtype_name(SPYRE_ST_I64));
	TAP_EQ(8u, spyre_st_dtype_size(SPYRE_ST_I64));
	TAP_CHECK(spyre_st_read_f32(st, "ids", 2, (uint64_t[]){ 1, 3 }, out, err, sizeof(err)) == -1 &&
		  !strcmp(err, "tensor 'ids' has dtype 'I64', not a float (F32, F16, BF16)"), "%s", err);
	TAP_CHECK(spyre_st_read_f32(st, "w", 1, (uint64_t[]){ 1 }, out, err, sizeof(err)) == 0 && out[0] == 0.0f,
		  "%s", err);
	spyre_st_close(st);
	free(buf);
	/* its size is 8 bytes an element: 3 elements in 12 bytes is refused */
	hdr_bad("{\"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12, "tensor 'ids'");
}

static const struct tap_case cases[] = {
	{ "f16", test_f16 },
	{ "bf16", test_bf16 },
	{ "round_trip", test_round_trip },
	{ "bad_headers", test_bad_headers },
	{ "read_errors", test_read_errors },
	{ "truncated", test_truncated },
	{ "writer_errors", test_writer_errors },
	{ "i64", test_i64 },
};

int main(int argc, char **argv)
{
	int rc;

	if (!model_tmpdir())
		tap_bail("mkdtemp failed");
	rc = TAP_RUN(cases, argc, argv);
	model_rmtmp();
	return rc;
}
