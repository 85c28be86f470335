"""A C program big enough for the code-size search (shared by its tests)."""

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
