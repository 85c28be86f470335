"""C programs big enough for the code-size search (shared by its tests)."""

# -Os vectorizes these loops (wide code plus a scalar tail); -Oz does not.
# Over 1024 bytes of .text at -Os: big enough to be searched (verify.MIN_TEXT_BYTES)
SOURCE = """\
#include <stdio.h>
#define AXPY(NAME, T, OP) \
  void NAME(T *restrict y, const T *restrict x, T a, int n) { \
    for (int i = 0; i < n; i++) y[i] OP a * x[i]; \
  }
AXPY(faxpy, float, +=)
AXPY(faxmy, float, -=)
AXPY(faxty, float, *=)
AXPY(faxdy, float, /=)
AXPY(daxpy, double, +=)
AXPY(daxmy, double, -=)
AXPY(daxty, double, *=)
AXPY(daxdy, double, /=)
AXPY(iaxpy, int, +=)
AXPY(iaxmy, int, -=)
AXPY(iaxty, int, *=)
AXPY(iaxxy, int, ^=)
int main(void) {
  float x[100], y[100];
  double u[100], v[100];
  int p[100], q[100];
  for (int i = 0; i < 100; i++) { x[i] = i * 0.5f + 1; y[i] = 100 - i; u[i] = i + 1; v[i] = 1.5 * i; p[i] = i; q[i] = 3 * i; }
  faxpy(y, x, 3.0f, 100);
  faxmy(y, x, 0.5f, 100);
  faxty(y, x, 0.01f, 100);
  faxdy(y, x, 7.0f, 100);
  daxpy(v, u, 3.0, 100);
  daxmy(v, u, 0.5, 100);
  daxty(v, u, 0.01, 100);
  daxdy(v, u, 7.0, 100);
  iaxpy(q, p, 3, 100);
  iaxmy(q, p, 2, 100);
  iaxty(q, p, 5, 100);
  iaxxy(q, p, 7, 100);
  double s = 0;
  for (int i = 0; i < 100; i++) s += y[i] + x[i] + u[i] + v[i] + q[i];
  printf("%.3f\\n", s);
  return 0;
}
"""


# 96 functions that return their number for their token and otherwise
# tail-call common(): LLVM 14's x86 machine outliner moves the compare and
# the conditional tail call of each group into a shared function that ends
# in the conditional jump, so that a call with another token runs off its
# end (into the next function), on x86-64 and x32 alike.  main counts the
# wrong answers.  Over 1024 bytes of .text at -Oz.
OUTLINER_MISCOMPILES = r"""
int printf(const char *, ...);   /* (no header: it compiles for -m32 and -mx32 too) */
__attribute__((noinline)) int common(int tok) { return -tok; }
#define F(n, t) __attribute__((noinline)) int f##n(int tok) { \
  if (tok == t) return n; return common(tok); }
#define F8(a, t) F(a##0, t) F(a##1, t) F(a##2, t) F(a##3, t) F(a##4, t) F(a##5, t) \
  F(a##6, t) F(a##7, t)
F8(1, 27) F8(2, 18) F8(3, 27) F8(4, 18) F8(5, 27) F8(6, 18) F8(7, 27) F8(8, 18)
F8(9, 27) F8(10, 18) F8(11, 27) F8(12, 18)
#define C(n, t) bad += f##n(t - 1 + argc) != n;
#define C8(a, t) C(a##0, t) C(a##1, t) C(a##2, t) C(a##3, t) C(a##4, t) C(a##5, t) \
  C(a##6, t) C(a##7, t)
int main(int argc, char **argv) {
  int bad = 0;
  C8(1, 27) C8(2, 18) C8(3, 27) C8(4, 18) C8(5, 27) C8(6, 18) C8(7, 27) C8(8, 18)
  C8(9, 27) C8(10, 18) C8(11, 27) C8(12, 18)
  printf("%d wrong\n", bad);
  return 0;
}
"""


def two_candidate_heads(tmp_path):
    """A code-size head of two candidates for clang 14 (at -Os, default<Oz>
    is the smallest of SOURCE's objects); its heads directory."""
    root = tmp_path / "heads"
    (root / "code-size").mkdir(parents=True, exist_ok=True)
    (root / "code-size" / "spec.yaml").write_text(
        'task: code-size\nlanguages: [c, c++]\npipelines:\n  14: ["default<Oz>", "default<O3>"]\n')
    return root
