/* SPDX-License-Identifier: MIT */
/*
 * bert_device.h - the BERT encoder (bert.h) on a spyre card: weights
 * uploaded once, a batch of sentences padded to the longest (rounded up to
 * a stick) and run through the kernel library in fp32, a padding mask in
 * every layer's attention, mean pooling and L2 normalization on the card;
 * one vector per sentence comes back. docs/model.md ("The encoder") lists
 * the kernels of a batch.
 *
 *	struct spyre_dbert *db;
 *	spyre_dbert_new(dev, model, 0, &db, err, sizeof(err));
 *	spyre_dbert_embed(db, ids, lens, batch, vectors, NULL, err, sizeof(err));
 *
 * One handle is one stream: calls on one handle are serialized by a lock
 * (a server may call it from several threads); open several handles for
 * parallel batches.
 */
#ifndef SPYRE_MODEL_BERT_DEVICE_H
#define SPYRE_MODEL_BERT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "bert.h"
#include "spyre.h"

struct spyre_dbert;

/* What one batch cost. */
struct spyre_dbert_stats {
	uint64_t host_ns;	/* wall time of the call */
	uint64_t device_ns;	/* modeled device time, sum over its launches */
	uint64_t launches;
	uint32_t padded_len;	/* tokens per sentence after padding */
	uint64_t kernel_misses;	/* kernels built for this call (a new batch shape) */
};

/*
 * Upload @m's weights to @dev (@m is not kept). @cores 0: all the device
 * has. 0, or a negative errno with @err (a shape the card's path does not
 * take, not enough device memory).
 */
int spyre_dbert_new(spyre_device_t *dev, const struct spyre_bert *m, uint32_t cores, struct spyre_dbert **out,
		    char *err, size_t errlen);
void spyre_dbert_free(struct spyre_dbert *db);

/*
 * Embed @batch sentences (packed ids, lens: as spyre_bert_embed(), the same
 * checks) into @out [batch][hidden]; @st (optional) gets the cost. 0, or a
 * negative errno with a message in @err.
 */
int spyre_dbert_embed(struct spyre_dbert *db, const int32_t *ids, const uint32_t *lens, uint32_t batch,
		      float *out, struct spyre_dbert_stats *st, char *err, size_t errlen);

#endif /* SPYRE_MODEL_BERT_DEVICE_H */
