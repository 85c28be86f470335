-- Integer and real arithmetic at the edges, type affinity, printf formats.

-- 64-bit integers: the largest and smallest, overflow turns into real
SELECT 9223372036854775807, -9223372036854775808, typeof(-9223372036854775808);
SELECT 9223372036854775807 + 1, typeof(9223372036854775807 + 1), 9223372036854775807 * 2;
SELECT -9223372036854775807 - 1, typeof(-9223372036854775807 - 1), (-9223372036854775807 - 1) - 1;
SELECT 9223372036854775808, typeof(9223372036854775808), CAST(9223372036854775808 AS INTEGER),
       CAST(-9.3e18 AS INTEGER), CAST(1e300 AS INTEGER);
SELECT 4611686018427387904 * 2, 3037000499 * 3037000499, 3037000500 * 3037000500;
SELECT 7 / 2, -7 / 2, 7 % 3, -7 % 3, 7 % -3, 7.0 / 2, 7 / 2.0, 1 / 0, 1 % 0, 1.0 / 0;
SELECT 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x10 + 0x0f, -0x1;
SELECT 1 << 62, 1 << 63, 1 << 64, -1 >> 1, 5 & 3, 5 | 3, ~5, -8 >> 70, 1 << -1;
SELECT abs(-5), abs(-5.5), abs(NULL), sign(-3), sign(0.0), sign(2.5);
SELECT total(v), sum(v), avg(v), typeof(sum(v)) FROM (SELECT 9223372036854775807 AS v UNION ALL SELECT 1.0);
SELECT sum(v), total(v) FROM (SELECT 4611686018427387904 AS v UNION ALL SELECT 4611686018427387903);

-- reals: rounding, precision, special values
SELECT 0.1 + 0.2, 0.1 + 0.2 = 0.3, 1e308 * 10, -1e308 * 10, 1e-320, 2.0 / 3;
SELECT round(2.5), round(-2.5), round(3.14159, 3), round(1234.5678, -2), round(0.5e-9, 10);
SELECT CAST(1e15 AS TEXT), CAST(1e16 AS TEXT), CAST(123456789012345678 AS REAL), 1e15 + 0.3;
SELECT 9007199254740993 = 9007199254740993.0, 9007199254740992 + 1.0, 1.0 * 9007199254740993;
SELECT ceil(-1.5), floor(-1.5), trunc(-1.5), ceiling(2.1), pow(2, 62), power(2, 0.5), sqrt(2), sqrt(-1);
SELECT exp(1), ln(10), log(100), log2(1024), log(2, 8), log10(0.001), pi();
SELECT round(sin(pi() / 6), 12), round(cos(pi() / 3), 12), round(atan2(1, 1) * 4, 12), degrees(pi()), radians(180);
SELECT mod(7.5, 2), mod(-7, 3), 5 BETWEEN 1 AND 10, 3 IN (1, 2, 3), NULL = NULL, NULL IS NULL;

-- affinity and comparisons across storage classes
CREATE TABLE t (i INTEGER, r REAL, n NUMERIC, x TEXT, b BLOB);
INSERT INTO t VALUES ('42', '42', '42.0', 42, '42'), ('4.2e1', 'abc', '0x10', 4.20, x'34'),
                     (1e20, 1, '1e3', -0.0, NULL), ('  7 ', ' 7 ', '007', '007', 7);
SELECT typeof(i), i, typeof(r), r, typeof(n), n, typeof(x), x, typeof(b), quote(b) FROM t;
SELECT count(*) FROM t WHERE i = 42 AND x = '42';
SELECT 10 < '9', 10 < CAST('9' AS INTEGER), x'00' > 'zzz', 1 < 'a', NULL < 1;
SELECT i FROM t ORDER BY i;

-- printf / format
SELECT printf('%d|%5d|%-5d|%05d|%+d|% d', 42, 42, 42, 42, 42, 42);
SELECT printf('%x|%X|%#x|%o|%#o|%08.3x', 255, 255, 255, 8, 8, 255);
SELECT printf('%f|%.2f|%10.3f|%-10.1f|%e|%.3E|%g|%G', 3.14159, 3.14159, -3.14159, 2.5, 12345.678, 0.000123, 1e-5, 1e20);
SELECT printf('%g|%g|%g|%.3g|%#g|%!.20g|%!g', 100000.0, 1000000.0, 0.0001, 123456.0, 1.0, 0.1, 1e100);
SELECT printf('%s|%10s|%-10s|%.3s|%c|%%|%5c', 'text', 'right', 'left', 'truncate', 'xyz', 'z');
SELECT printf('%q|%Q|%Q|%w', 'it''s', 'it''s', NULL, 'a"b');
SELECT printf('%,d|%,d|%,d', 1234567, -9876543210, 999);
SELECT printf('%d %d', 1), printf('%s'), printf('%5.2s|', 'abc'), printf('%.0f %.0f %.0f', 0.5, 1.5, 2.5);
SELECT printf('%lld|%lli|%llu', 9223372036854775807, -9223372036854775808, -1);
SELECT format('%.15g', 0.1), format('%.17g', 0.1), format('%.30f', 1.0 / 3), format('%.1e', 9.96);
SELECT printf('%.1000f', 1e-300) LIKE '0.000%', length(printf('%.1000f', 1e-300));
SELECT printf('%z|%.5z', 'zz', 'zzzzzzzz'), printf('%s', x'41424300'), printf('%d', '12abc'), printf('%f', 'x');

-- aggregate maths over many rows
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
SELECT count(*), sum(i), sum(i * i), total(1.0 / i), max(i % 997), avg(i % 13), sum(i & 0xff)
FROM n;
WITH RECURSIVE n(i, x) AS (SELECT 0, 1.0 UNION ALL SELECT i + 1, x * 1.0001 FROM n WHERE i < 50000)
SELECT printf('%.10f', max(x)), printf('%.6e', sum(x)) FROM n;
