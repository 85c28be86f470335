#include <stdlib.h>
struct S { int a; double b; };
static int tbl[16] = {1,2,3};
const char *msg = "hello";
int fib(int n) { return n < 2 ? n : fib(n-1) + fib(n-2); }
double sum(struct S *s, int n) { double t = 0; for (int i = 0; i < n; i++) for (int j = 0; j < i; j++) t += s[i].b * tbl[j & 15]; return t; }
int sw(int x) { switch (x) { case 0: return 4; case 1: case 2: return tbl[x]; case 7: x += 3; default: return x * 2; } }
int sel(int a, int b) { return (a && b) ? a : b; }
struct S mk(int a) { struct S s = {a, 1.5}; return s; }
int main(int argc, char **argv) { struct S *s = malloc(sizeof(struct S) * argc); s[0] = mk(argc); int r = (int)sum(s, argc) + fib(argc) + sw(argc) + sel(argc, 2); free(s); return r; }
