/* SPDX-License-Identifier: MIT */
/*
 * safetensors.h - read and write the safetensors format
 * (https://github.com/huggingface/safetensors):
 *
 *	u64 little-endian N | N bytes of JSON header | data area
 *	header: { "NAME": { "dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END] },
 *		  ..., "__metadata__": { "KEY": "VALUE", ... } }
 *
 * Offsets are relative to the data area. The reader accepts the dtypes F32,
 * F16, BF16 and I64 (others are refused by name; I64, which BERT checkpoints
 * carry as embeddings.position_ids, is listed but never read as floats), ranks 0..SPYRE_ST_MAX_RANK, and
 * checks everything: N within the file and at most 100 MiB, strict JSON (a
 * repeated name is an error), the three fields of each tensor and no other,
 * shape product * dtype size == END - BEGIN without overflow, BEGIN <= END
 * <= the data area's size. Tensors may overlap or be out of order (the
 * Python library is stricter: its writer and this one emit them contiguous).
 * Errors are one line naming the tensor, e.g. "tensor 'w' has dtype 'F64',
 * not one of F32, F16, BF16".
 */
#ifndef SPYRE_MODEL_SAFETENSORS_H
#define SPYRE_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SPYRE_ST_MAX_RANK 8
#define SPYRE_ST_MAX_HEADER (100u << 20)

enum spyre_st_dtype {
	SPYRE_ST_F32,
	SPYRE_ST_F16,
	SPYRE_ST_BF16,
	SPYRE_ST_I64,		/* listed and checked, not readable by spyre_st_read_f32() */
};

struct spyre_st_tensor {
	const char *name;
	enum spyre_st_dtype dtype;
	uint32_t rank;
	uint64_t shape[SPYRE_ST_MAX_RANK];
	uint64_t nelem;			/* product of shape (1 for rank 0) */
	uint64_t begin, end;		/* data_offsets, in the data area */
	const unsigned char *data;	/* its END - BEGIN bytes (unaligned, little-endian) */
};

struct spyre_st;

/* Open a safetensors image in memory; @buf must outlive the handle. */
int spyre_st_open_mem(const void *buf, size_t len, struct spyre_st **st, char *err, size_t errlen);
/* Open a file (mapped read-only); errors start with the path. */
int spyre_st_open(const char *path, struct spyre_st **st, char *err, size_t errlen);
void spyre_st_close(struct spyre_st *st);

size_t spyre_st_count(const struct spyre_st *st);
/* Tensor @i in header order, or NULL. */
const struct spyre_st_tensor *spyre_st_tensor_at(const struct spyre_st *st, size_t i);
/* The tensor named @name, or NULL. */
const struct spyre_st_tensor *spyre_st_find(const struct spyre_st *st, const char *name);
/* A string of __metadata__, or NULL. */
const char *spyre_st_metadata(const struct spyre_st *st, const char *key);

const char *spyre_st_dtype_name(enum spyre_st_dtype dtype);	/* "F32", "F16", "BF16", "I64" */
unsigned int spyre_st_dtype_size(enum spyre_st_dtype dtype);

/*
 * Tensor @name as fp32 into @out (its element count), checking that it has
 * rank @expected_rank and shape @expected_shape. Errors: "tensor 'X' not
 * found", "tensor 'X' has shape [a,b], expected [c,d]", "tensor 'X' has
 * dtype 'I64', not a float (F32, F16, BF16)".
 */
int spyre_st_read_f32(const struct spyre_st *st, const char *name, uint32_t expected_rank,
		      const uint64_t *expected_shape, float *out, char *err, size_t errlen);

/* One tensor to write: its data either as fp32 (converted to @dtype, round
 * to nearest even) or as raw bytes already in @dtype (little-endian). */
struct spyre_st_out {
	const char *name;
	enum spyre_st_dtype dtype;
	uint32_t rank;
	uint64_t shape[SPYRE_ST_MAX_RANK];
	const float *f32;
	const void *raw;
};

/*
 * Write @n tensors to @path (through @path.tmp, renamed at the end): header
 * with "__metadata__": {"format": "pt"}, padded with spaces so the data area
 * starts 8-byte aligned; data contiguous in the given order.
 */
int spyre_st_write(const char *path, const struct spyre_st_out *t, size_t n, char *err, size_t errlen);

#endif /* SPYRE_MODEL_SAFETENSORS_H */
