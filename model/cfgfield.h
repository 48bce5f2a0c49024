/* SPDX-License-Identifier: MIT */
/*
 * cfgfield.h - the fields of a Hugging Face JSON config as config.c reads
 * them, shared by the readers of model/ (config.c: the decoder; bert.c: the
 * encoder and sentence-transformers' files). Internal to model/. Errors name
 * the field: "missing field 'hidden_size'", "field 'hidden_size' must be an
 * integer, not a string".
 */
#ifndef SPYRE_MODEL_CFGFIELD_H
#define SPYRE_MODEL_CFGFIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* The member @key of object @root, NULL when absent or null. */
const struct spyre_json_node *spyre_cfg_member(const struct spyre_json_node *root, const char *key);
/* An integer field from 0 to UINT32_MAX (@def when absent and not @required); *@present (optional). */
int spyre_cfg_u32(const struct spyre_json_node *root, const char *key, bool required, uint32_t def,
		  uint32_t *out, bool *present, char *err, size_t errlen);
/* A number field in the range of a float (@def when absent). */
int spyre_cfg_float(const struct spyre_json_node *root, const char *key, float def, float *out,
		    char *err, size_t errlen);
/* The whole regular file @file (at most @max bytes) into a malloc'ed, NUL-terminated *@text. */
int spyre_cfg_read_file(const char *file, size_t max, char **text, size_t *len, char *err, size_t errlen);

#endif /* SPYRE_MODEL_CFGFIELD_H */
