/* mirecc/launch.h: mark a CUDA launch's block shape as tunable by mirecc.
 *
 *     #include <mirecc/launch.h>
 *     dim3 block(MIRECC_BLOCK_X(saxpy, 128), MIRECC_BLOCK_Y(saxpy, 1));
 *     dim3 grid((n + block.x - 1) / block.x);   // the grid must follow the block
 *     saxpy<<<grid, block>>>(n, a, x, y);
 *
 * MIRECC_BLOCK_X(kernel, default) is the value of the macro
 * MIRECC_BLOCK_<kernel>_X when it is defined (mirecc-nvcc defines it from a
 * decisions profile: -DMIRECC_BLOCK_saxpy_X=256), else `default`; the same
 * for _Y.  Nothing needs defining: with plain nvcc and this header on the
 * include path, every launch keeps its default.  The result is a constant
 * expression; a defined value that is not a positive integer is a compile
 * error.  `kernel` is the kernel's name (the name a profile entry gives).
 *
 * The preprocessor cannot test from inside a macro whether a macro is
 * defined, so the expansion is turned into a string: an undefined macro
 * stringizes to its own name, a defined one to its value, and constexpr
 * functions tell the two apart (C++11 and later).
 */
#ifndef MIRECC_LAUNCH_H
#define MIRECC_LAUNCH_H

#define MIRECC_BLOCK_X(kernel, fallback) MIRECC_LAUNCH_PICK_(kernel, X, fallback)
#define MIRECC_BLOCK_Y(kernel, fallback) MIRECC_LAUNCH_PICK_(kernel, Y, fallback)

#define MIRECC_LAUNCH_STR_(...) #__VA_ARGS__
#define MIRECC_LAUNCH_VALUE_(macro) MIRECC_LAUNCH_STR_(macro)
/* `macro` arrives expanded (its value) when defined, as its own name when not */
#define MIRECC_LAUNCH_PICK_(kernel, axis, fallback) \
  MIRECC_LAUNCH_CHOOSE_(MIRECC_BLOCK_##kernel##_##axis, "MIRECC_BLOCK_" #kernel "_" #axis, fallback)
#define MIRECC_LAUNCH_CHOOSE_(macro, name, fallback)                         \
  (MIRECC_LAUNCH_CHOSEN_(macro, name)::set ? (unsigned)MIRECC_LAUNCH_CHOSEN_(macro, name)::value \
                                           : (unsigned)(fallback))
#define MIRECC_LAUNCH_CHOSEN_(macro, name)                                            \
  ::mirecc_launch::chosen<::mirecc_launch::is_set(MIRECC_LAUNCH_VALUE_(macro), name), \
                          ::mirecc_launch::number(MIRECC_LAUNCH_VALUE_(macro))>

namespace mirecc_launch {
/* recursive, not loops: constexpr functions of C++11 */
constexpr bool same(const char *a, const char *b) {
  return *a == *b && (*a == '\0' || same(a + 1, b + 1));
}
constexpr bool is_set(const char *value, const char *name) { return !same(value, name); }
constexpr bool digits(const char *s) {
  return *s >= '0' && *s <= '9' && (s[1] == '\0' || digits(s + 1));
}
constexpr unsigned long long parse(const char *s, unsigned long long n) {
  return *s == '\0' || n > 0xffffffffULL ? n : parse(s + 1, n * 10 + (unsigned)(*s - '0'));
}
/* 0 for anything but a positive decimal integer that fits an unsigned */
constexpr unsigned number(const char *s) {
  return digits(s) && parse(s, 0) <= 0xffffffffULL ? (unsigned)parse(s, 0) : 0u;
}
template <bool Set, unsigned Value>
struct chosen {
  static_assert(!Set || Value > 0,
                "mirecc/launch.h: MIRECC_BLOCK_<kernel>_X/Y must be a positive integer");
  enum : unsigned { value = Value };
  static constexpr bool set = Set;
};
}  // namespace mirecc_launch

#endif
