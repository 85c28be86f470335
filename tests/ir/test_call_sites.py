"""mirecc.ir.text.call_sites: a caller's direct calls in layout order, as the
pass plugin numbers them (passes/plugin/FORMAT.md, "Call sites"; the plugin
side is checked on real clangs in tests/plugin/test_call_plugin.py)."""
from mirecc.ir.text import call_sites

IR = r'''
define internal i32 @"odd name"(i32 %0) {
  ret i32 %0
}

define i32 @main(i32 %argc, i8** %argv) personality i8* null {
entry:
  %call = call i32 @f(i32 %argc)
  %call1 = tail call fastcc %struct.S* @make(%struct.S* @g, i32 %call)
  call void @llvm.memcpy.p0i8.p0i8.i64(i8* %p, i8* @buf, i64 4, i1 false)
  %r = call i32 %fp(i32 ()* @f, i8* @buf)
  %k = call i64 (i32, ...) bitcast (i64 (i64)* @old to i64 (i32, ...)*)(i32 %call)
  %v = call i32 (i8*, ...) @printf(i8* getelementptr ([4 x i8], [4 x i8]* @.str, i64 0, i64 0), i32 %call)
  %w = invoke i32 @"odd name"(i32 %call) to label %ok unwind label %bad
ok:
  call void asm sideeffect "nop", ""()
  %s = add i32 %call, %call1
  ret i32 %s
bad:
  ret i32 0
}
'''


def test_direct_calls_in_layout_order():
    sites = call_sites(IR)
    assert sites["odd name"] == []
    # not the intrinsic, the call through a pointer, the cast, or the asm
    assert sites["main"] == ["f", "make", "printf", "odd name"]


def test_site_features_cover_each_site_with_a_defined_callee():
    from mirecc.tasks.code_size.inline_features import NAMES, site_features

    ir = IR.replace("define i32 @main", "define internal i32 @f(i32 %x) #0 {\n  ret i32 %x\n}\n\n"
                    "define i32 @main") + "\nattributes #0 = { inlinehint nounwind }\n"
    rows = site_features(ir)
    # f (defined, internal, inlinehint, one site) and "odd name"; not make/printf
    assert set(rows) == {"main:call0", "main:call3"}
    f = dict(zip(NAMES, rows["main:call0"]))
    assert f["callee_internal"] == 1 and f["callee_single_site"] == 1
    assert f["callee_inlinehint"] == 1 and f["callee_args"] == 1 and f["site_args"] == 1
    assert f["site_result_used"] == 1 and f["site_constant_args"] == 0
    assert len(rows["main:call3"]) == len(NAMES)
