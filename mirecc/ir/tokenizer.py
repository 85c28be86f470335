"""WordPiece tokenizer for normalised LLVM IR statements (MIREncoder §3.1).

Built with HuggingFace ``tokenizers``: special tokens [PAD] [UNK] [CLS] [SEP]
[MASK] (ids 0-4), lowercased, every statement encoded as
``[CLS] tokens [SEP]`` truncated and padded to ``MAX_LENGTH`` = 64.

How text becomes tokens, and why decoding gives the statement back exactly:

- normaliser: lowercase, then every space becomes the visible mark ``▁``
  (U+2581), so spaces are part of the tokens and not lost;
- pre-tokeniser: a word is an optional ``▁`` followed either by a run of
  ``[%@!#]?[a-z0-9_.$-]+`` (``%id``, ``i32``, ``@llvm.memcpy.p0.p0.i64``,
  ``-1``, ``1.000000e+00`` splits at ``+``) or by one punctuation character
  (``,`` ``(`` ``[`` ``=`` ``*``...); a lone ``▁`` is a word too (runs of
  spaces). ``%id = load i32, ptr %id`` -> ``%id ▁= ▁load ▁i32 , ▁ptr ▁%id``;
- WordPiece splits each word into vocabulary pieces, continuations marked
  ``##``. After training, every printable ASCII character and ``▁`` is added
  both as a piece and as a ``##`` continuation, so no ASCII word ever becomes
  [UNK];
- decoding drops the special tokens, glues ``##`` pieces to what precedes
  them, glues words *without* a separator (the separator is already inside
  the words as ``▁``) and turns ``▁`` back into a space.

So ``decode(encode(s)) == s.lower()`` for any single-line ASCII statement of
up to 62 tokens without ``▁`` in it (normalised statements are lowercase
already); longer ones come back truncated.  The same decoding is stored in
the JSON (``decoders.WordPiece(cleanup=False)`` then ``Replace``), so
``tokenizers.Tokenizer.from_file(...).decode(ids)`` agrees with ``decode``.

The shipped ``mirecc/data/tokenizer.json`` is trained on the pretraining
corpus built by ``mire corpus build`` (docs/encoder.md, "Pretraining corpus"): 7,400
modules from 24 Debian packages, csmith, OpenCL kernels and generated loop
kernels, 13.2M normalised statements (148,498 distinct).  Vocabulary 8,043;
tokens per statement with [CLS] and [SEP]: p50 11, p99 26; 0.042% longer
than 64.  It was made with (from the repository root; ~9 min on 2 cores):

    .venv/bin/mire corpus build
    .venv/bin/python -m mirecc.ir.tokenizer train --corpus .work/corpus/ir \\
        --out mirecc/data/tokenizer.json
"""

from __future__ import annotations

import argparse
import string
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

from .normalise import IRError, module_statements, normalise_statement

__all__ = [
    "MAX_LENGTH", "SPECIAL_TOKENS", "DEFAULT_PATH", "IRTokenizer", "build_tokenizer",
    "train", "load", "corpus_statements",
]

MAX_LENGTH = 64
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
SPACE = "\u2581"
DEFAULT_PATH = Path(__file__).resolve().parent.parent / "data" / "tokenizer.json"
DEFAULT_VOCAB_SIZE = 8000
_WORD = rf"{SPACE}?(?:[%@!#]?[\w.$-]+|[^\w\s{SPACE}])|{SPACE}"
_ALPHABET = [c for c in string.printable if not c.isspace()] + [SPACE]


def build_tokenizer(vocab: dict[str, int] | None = None):
    """An (untrained when vocab is None) tokenizers.Tokenizer with mirecc's pipeline."""
    model = models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=10_000) \
        if vocab is not None else models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=10_000)
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(" ", SPACE)])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(_WORD), behavior="isolated")
    tok.decoder = decoders.Sequence([
        decoders.WordPiece(prefix="##", cleanup=False),
        decoders.Replace(" ", ""),
        decoders.Replace(SPACE, " "),
    ])
    if vocab is not None:
        tok.add_special_tokens(SPECIAL_TOKENS)      # already ids 0-4 in vocab
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)])
        tok.enable_truncation(MAX_LENGTH)
        tok.enable_padding(length=MAX_LENGTH, pad_id=PAD_ID, pad_token="[PAD]")
    return tok


def train(statements: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE,
          min_frequency: int = 2) -> "IRTokenizer":
    """Train a WordPiece vocabulary on normalised statements (one per item)."""
    tok = build_tokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=_ALPHABET, continuing_subword_prefix="##", show_progress=False)
    tok.train_from_iterator(statements, trainer)
    vocab = tok.get_vocab()
    assert [vocab[s] for s in SPECIAL_TOKENS] == list(range(5)), "special tokens must be ids 0-4"
    for c in _ALPHABET:                       # every character, first and continuing
        for piece in (c, "##" + c):
            if piece not in vocab:
                vocab[piece] = len(vocab)
    return IRTokenizer(build_tokenizer(vocab))


class IRTokenizer:
    """A trained tokenizer: encode to fixed-length ids, decode back to text."""

    def __init__(self, tok) -> None:
        self.tok = tok                       # truncates and pads to MAX_LENGTH
        self._raw = Tokenizer.from_str(tok.to_str())   # neither: for lengths and pieces
        self._raw.no_padding()
        self._raw.no_truncation()

    @classmethod
    def from_file(cls, path: str | Path) -> "IRTokenizer":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such tokenizer file")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ValueError(f"{path}: not a tokenizers JSON file: {exc}") from None
        return cls(tok)

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.tok.save(str(path), pretty=False)

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def tokens(self, statement: str) -> list[str]:
        """The pieces of one statement, without special tokens or padding."""
        return self._raw.encode(statement, add_special_tokens=False).tokens

    def length(self, statement: str) -> int:
        """Untruncated length in tokens, [CLS] and [SEP] included."""
        return len(self._raw.encode(statement, add_special_tokens=False).ids) + 2

    def encode(self, statement: str) -> list[int]:
        """``MAX_LENGTH`` ids: [CLS] pieces [SEP], truncated, then [PAD]s."""
        return self.tok.encode(statement).ids

    def encode_batch(self, statements: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """(ids, attention masks), each ``len(statements)`` x ``MAX_LENGTH``."""
        encs = self.tok.encode_batch(list(statements))
        return [e.ids for e in encs], [e.attention_mask for e in encs]

    def decode(self, ids: Sequence[int]) -> str:
        """The statement back: special tokens dropped, ``##`` pieces glued, ``▁`` -> space."""
        out = []
        for i in ids:
            if i < len(SPECIAL_TOKENS):
                continue
            piece = self.tok.id_to_token(i)
            out.append(piece[2:] if piece.startswith("##") else piece)
        return "".join(out).replace(SPACE, " ")


@lru_cache(maxsize=4)
def _load(path: str) -> IRTokenizer:
    return IRTokenizer.from_file(path)


def load(path: str | Path | None = None) -> IRTokenizer:
    """The shipped tokenizer (``mirecc/data/tokenizer.json``) or the one at path."""
    return _load(str(path or DEFAULT_PATH))


# ---------------------------------------------------------------- corpus

_IR_SUFFIXES = (".ll", ".bc")


def corpus_statements(inputs: Iterable[str | Path]) -> Iterator[str]:
    """Normalised statements from files and directories.

    ``.ll``/``.bc`` modules are read and normalised; any other file is taken
    as normalised statements, one per line.  Directories are searched
    recursively for ``.ll``, ``.bc`` and ``.txt`` files.
    """
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.suffix in (*_IR_SUFFIXES, ".txt") and f.is_file())
        elif p.exists():
            files = [p]
        else:
            raise IRError(f"{p}: no such file or directory")
        for f in files:
            if f.suffix in _IR_SUFFIXES:
                yield from module_statements(f)
            else:
                try:
                    text = f.read_text(encoding="utf-8")
                except UnicodeDecodeError as exc:
                    raise IRError(f"{f}: not UTF-8 text (offset {exc.start})") from None
                yield from (ln for ln in text.splitlines() if ln.strip())


def _percentile(sorted_vals: list[int], q: float) -> int:
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))] if sorted_vals else 0


def stats(tok: IRTokenizer, statements: list[str]) -> dict:
    """Token-length figures over statements ([CLS]/[SEP] included, untruncated)."""
    lengths = sorted(tok.length(s) for s in statements)
    return {
        "vocab_size": tok.vocab_size,
        "statements": len(statements),
        "unique": len(set(statements)),
        "p50": _percentile(lengths, 0.50),
        "p99": _percentile(lengths, 0.99),
        "max": lengths[-1] if lengths else 0,
        "over_max_length": sum(n > MAX_LENGTH for n in lengths) / len(lengths) if lengths else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mirecc.ir.tokenizer",
                                 description="Train or try mirecc's IR WordPiece tokenizer.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train on IR modules or statement files")
    t.add_argument("--corpus", nargs="+", required=True, help=".ll/.bc/.txt files or directories")
    t.add_argument("--out", required=True, type=Path, help="tokenizer JSON to write")
    t.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    t.add_argument("--min-frequency", type=int, default=2)
    e = sub.add_parser("encode", help="show the tokens of statements (raw IR is normalised first)")
    e.add_argument("statements", nargs="+")
    e.add_argument("--tokenizer", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "train":
            statements = list(corpus_statements(args.corpus))
            if not statements:
                print("mirecc.ir.tokenizer: no statements in the corpus", file=sys.stderr)
                return 1
            tok = train(statements, args.vocab_size, args.min_frequency)
            tok.save(args.out)
            s = stats(tok, statements)
            print(f"wrote {args.out}: vocabulary {s['vocab_size']}, {s['statements']} statements "
                  f"({s['unique']} unique); tokens per statement p50 {s['p50']}, p99 {s['p99']}, "
                  f"max {s['max']}; over {MAX_LENGTH}: {100 * s['over_max_length']:.3f}%")
        else:
            tok = load(args.tokenizer)
            for raw in args.statements:
                norm = normalise_statement(raw)
                if norm is None:
                    print(f"{raw!r}: dropped by normalisation")
                    continue
                ids = tok.encode(norm)
                print(norm)
                print("  tokens:", tok.tokens(norm))
                print("  ids:   ", [i for i in ids if i != PAD_ID])
                print("  decode:", tok.decode(ids))
    except (IRError, FileNotFoundError, ValueError) as exc:
        print(f"mirecc.ir.tokenizer: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
