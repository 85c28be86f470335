#include <vector>
#include <string>
template <typename T> struct Stack {
  std::vector<T> items;
  void push(const T &x) { items.push_back(x); }
  T pop() { T x = items.back(); items.pop_back(); return x; }
  bool empty() const { return items.empty(); }
};
struct Shape { virtual ~Shape() {} virtual double area() const = 0; };
struct Sq : Shape { double s; explicit Sq(double s) : s(s) {} double area() const override { return s * s; } };
struct Big { long a[8]; };
Big makeBig(long v) { Big b{}; for (int i = 0; i < 8; i++) b.a[i] = v + i; return b; }
double total(const std::vector<Shape *> &v) { double t = 0; for (auto *s : v) t += s->area(); return t; }
int run(int n) {
  Stack<int> st;
  for (int i = 0; i < n; i++) st.push(i * i);
  int acc = 0;
  while (!st.empty()) acc += st.pop();
  Sq q(2.0);
  std::vector<Shape *> v{&q};
  std::string name = "x";
  return acc + (int)total(v) + (int)makeBig(n).a[3] + (int)name.size();
}
