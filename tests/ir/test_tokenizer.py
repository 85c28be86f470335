"""The shipped WordPiece tokenizer: round trip (MIREncoder Figure 2), shape, errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("tokenizers")

from mirecc.ir import tokenizer as T  # noqa: E402
from mirecc.ir.normalise import IRError, module_statements, normalise_statement  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok() -> T.IRTokenizer:
    return T.load()


# ---------------------------------------------------------------- a grammar of statements

INT_TYPES = ["i1", "i8", "i16", "i32", "i64", "i128"]
FP_TYPES = ["half", "float", "double", "x86_fp80"]
names = st.sampled_from(["%id", "@id", "@malloc", "@llvm.memcpy.p0.p0.i64", "@sqrt", "@__kmpc_fork_call"])
ints = st.integers(-2**63, 2**64 - 1).map(str)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(lambda f: f"{f:e}"),
    st.integers(0, 2**64 - 1).map(lambda v: f"0x{v:016x}"))


@st.composite
def types(draw, depth=0):
    base = st.sampled_from(INT_TYPES + FP_TYPES + ["ptr", "ptr addrspace(1)", "%struct", "%union"])
    if depth >= 2:
        return draw(base)
    kind = draw(st.sampled_from(["base", "base", "base", "array", "vector", "struct"]))
    if kind == "array":
        return f"[{draw(st.integers(0, 4096))} x {draw(types(depth + 1))}]"
    if kind == "vector":
        return f"<{draw(st.sampled_from([2, 4, 8, 16]))} x {draw(st.sampled_from(INT_TYPES + FP_TYPES))}>"
    if kind == "struct":
        return "{ " + ", ".join(draw(st.lists(types(depth + 1), min_size=1, max_size=3))) + " }"
    return draw(base)


operands = st.one_of(names, ints, floats, st.sampled_from(["null", "undef", "poison", "true", "false",
                                                           "zeroinitializer"]))
typed_operand = st.builds(lambda t, o: f"{t} {o}", types(), operands)
binops = st.sampled_from(["add", "add nsw", "sub nuw", "mul nsw", "sdiv exact", "udiv", "shl", "lshr",
                          "ashr", "and", "or", "xor", "fadd", "fmul fast", "fsub", "fdiv reassoc"])
preds = st.sampled_from(["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ugt", "oeq", "olt", "une"])


@st.composite
def statements(draw):
    t = draw(types())
    a, b = draw(operands), draw(operands)
    forms = [
        f"%id = {draw(binops)} {t} {a}, {b}",
        f"%id = icmp {draw(preds)} {t} {a}, {b}",
        f"%id = load {t}, ptr %id, align {draw(st.sampled_from([1, 2, 4, 8, 16]))}",
        f"store {t} {a}, ptr %id, align 4",
        f"%id = alloca {t}, align 8",
        f"%id = getelementptr inbounds {t}, ptr %id, " + ", ".join(
            draw(st.lists(st.builds(lambda it, o: f"{it} {o}", st.sampled_from(["i32", "i64"]),
                                    st.one_of(ints, st.just("%id"))), min_size=1, max_size=3))),
        f"%id = {draw(st.sampled_from(['sext', 'zext', 'trunc', 'bitcast', 'fptosi', 'sitofp']))} {t} {a} to {draw(types())}",
        f"%id = phi {t} [ {a}, %id ], [ {b}, %id ]",
        f"%id = select i1 %id, {t} {a}, {t} {b}",
        "br i1 %id, label %id, label %id",
        "br label %id",
        f"ret {t} {a}",
        "ret void",
        f"%id = call {t} {draw(names)}(" + ", ".join(draw(st.lists(typed_operand, max_size=4))) + ")",
        " ".join(["switch i32 %id, label %id ["] + [
            f"i32 {v}, label %id" for v in draw(st.lists(st.integers(-100, 100), max_size=3))] + ["]"]),
    ]
    return draw(st.sampled_from(forms))


def fits(tok: T.IRTokenizer, s: str) -> bool:
    return tok.length(s) <= T.MAX_LENGTH


@settings(max_examples=300, deadline=None)
@given(statements())
def test_round_trip_of_generated_statements(tok, stmt):
    """decode(encode(s)) == s for statements within 64 tokens (Figure 2)."""
    assert normalise_statement(stmt) in (stmt, None)     # generated in normalised form
    ids = tok.encode(stmt)
    assert len(ids) == T.MAX_LENGTH
    assert ids[0] == T.CLS_ID
    assert T.UNK_ID not in ids
    if fits(tok, stmt):
        assert tok.decode(ids) == stmt
        assert tok.tok.decode(ids) == stmt            # the decoder stored in the JSON agrees
    else:
        assert ids[-1] == T.SEP_ID and T.PAD_ID not in ids
        assert stmt.startswith(tok.decode(ids))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=60))
def test_round_trip_of_any_printable_ascii_line(tok, text):
    """Not just IR: any lowercase printable-ASCII line within 64 tokens comes back exactly."""
    text = text.lower()
    if fits(tok, text):
        ids = tok.encode(text)
        assert T.UNK_ID not in ids
        assert tok.decode(ids) == text


def _fixture_statements(tmp_path_factory) -> list[str]:
    srcs = sorted((ROOT / "benchmarks" / "programs").glob("*.c"))
    out = tmp_path_factory.mktemp("tokir")
    stmts: list[str] = []
    for cc in ("clang-14", "clang-19"):
        if not shutil.which(cc):
            continue
        for src in srcs[:4]:
            ll = out / f"{cc}-{src.stem}.ll"
            subprocess.run([cc, "-O1", "-Xclang", "-disable-llvm-passes", "-S", "-emit-llvm", "-g",
                            str(src), "-o", str(ll)], check=True, capture_output=True)
            stmts += module_statements(ll)
    return stmts


def test_round_trip_of_compiled_statements(tok, tmp_path_factory):
    stmts = _fixture_statements(tmp_path_factory)
    if not stmts:
        pytest.skip("needs clang-14 or clang-19")
    for s in set(stmts):
        ids = tok.encode(s)
        assert T.UNK_ID not in ids, s
        if fits(tok, s):
            assert tok.decode(ids) == s


def test_shape_and_special_tokens(tok):
    vocab = tok.tok.get_vocab()
    assert [vocab[t] for t in T.SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    ids, mask = tok.encode_batch(["ret void", "%id = load i32, ptr %id, align 4"])
    assert [len(r) for r in ids] == [T.MAX_LENGTH, T.MAX_LENGTH]
    assert sum(mask[0]) == tok.length("ret void")
    assert ids[0][sum(mask[0]) - 1] == T.SEP_ID and ids[0][sum(mask[0])] == T.PAD_ID
    assert tok.decode(tok.encode("RET VOID")) == "ret void"          # lowercased
    long = " ".join(["%id"] * 100)
    enc = tok.encode(long)
    assert len(enc) == T.MAX_LENGTH and enc[-1] == T.SEP_ID


def test_train_small_corpus_and_cli(tmp_path):
    corpus = tmp_path / "stmts.txt"
    corpus.write_text("\n".join(["%id = load i32, ptr %id, align 4", "ret void",
                                 "%id = add nsw i32 %id, 1"] * 20))
    out = tmp_path / "tok.json"
    assert T.main(["train", "--corpus", str(corpus), "--out", str(out)]) == 0
    tok = T.IRTokenizer.from_file(out)
    s = "%id = getelementptr inbounds [4 x i32], ptr @id, i64 0, i64 %id"   # unseen pieces
    assert tok.decode(tok.encode(s)) == s


def test_cli_errors_name_the_file(tmp_path, capsys):
    missing = tmp_path / "nothere"
    assert T.main(["train", "--corpus", str(missing), "--out", str(tmp_path / "t.json")]) == 1
    assert "nothere: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.ll"
    bad.write_bytes(b"\xff\xfe not ir")
    assert T.main(["train", "--corpus", str(tmp_path), "--out", str(tmp_path / "t.json")]) == 1
    assert "bad.ll: not UTF-8 text" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="nope.json"):
        T.IRTokenizer.from_file(tmp_path / "nope.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(ValueError, match="junk.json: not a tokenizers JSON file"):
        T.IRTokenizer.from_file(tmp_path / "junk.json")


def test_corpus_not_ir_names_file(tmp_path):
    f = tmp_path / "x.ll"
    f.write_text("hello world\n")
    with pytest.raises(IRError, match=r"x\.ll: not valid LLVM IR"):
        list(T.corpus_statements([f]))


def test_normalised_statements_are_fixed_points_of_tokenisation(tok):
    raw = "%32 = call noalias i8* @malloc(i64 noundef %31) #7, !dbg !71"
    n = normalise_statement(raw)
    assert tok.decode(tok.encode(n)) == n == "%id = call ptr @malloc(i64 %id)"
