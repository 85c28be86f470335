-- Window functions and common table expressions, recursive ones included.
CREATE TABLE sale (id INTEGER PRIMARY KEY, region TEXT, month INTEGER, amount INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 240)
INSERT INTO sale(region, month, amount)
SELECT CASE i % 4 WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east' ELSE 'west' END,
       1 + (i / 4) % 12, (i * 7919) % 1000 + 100
FROM n;

-- ranking functions
SELECT region, month, amount,
       row_number() OVER w, rank() OVER w, dense_rank() OVER w,
       round(percent_rank() OVER w, 4), round(cume_dist() OVER w, 4), ntile(3) OVER w
FROM sale WHERE month <= 2
WINDOW w AS (PARTITION BY region ORDER BY amount DESC)
ORDER BY region, amount DESC, id;

-- value functions and frames
SELECT id, amount,
       lag(amount) OVER o, lead(amount, 2, -1) OVER o,
       first_value(amount) OVER o, last_value(amount) OVER o, nth_value(amount, 3) OVER o,
       sum(amount) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING),
       avg(amount) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING),
       count(*) OVER (ORDER BY amount RANGE BETWEEN 50 PRECEDING AND 50 FOLLOWING),
       max(amount) OVER (ORDER BY id GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW)
FROM sale WHERE region = 'north'
WINDOW o AS (ORDER BY id)
ORDER BY id LIMIT 20;

-- running totals per partition, filtered aggregate windows
SELECT region, month, sum(amount) AS total,
       sum(sum(amount)) OVER (PARTITION BY region ORDER BY month) AS running,
       sum(sum(amount)) FILTER (WHERE month % 2 = 0) OVER (PARTITION BY region) AS even_months,
       group_concat(month, '-') OVER (PARTITION BY region ORDER BY month
                                      ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)
FROM sale GROUP BY region, month ORDER BY region, month;

-- plain CTEs, used twice and materialized
WITH totals AS MATERIALIZED (SELECT region, sum(amount) AS s FROM sale GROUP BY region),
     best AS (SELECT max(s) AS m FROM totals)
SELECT region, s, s * 100 / (SELECT sum(s) FROM totals) FROM totals, best
WHERE s >= m - 3000 ORDER BY s DESC;

-- recursive: Fibonacci numbers up to the largest 64-bit one
WITH RECURSIVE fib(n, a, b) AS (
  SELECT 1, 0, 1
  UNION ALL
  SELECT n + 1, b, a + b FROM fib WHERE b < 9223372036854775807 - a
)
SELECT count(*), max(b), sum(n) FROM fib;

-- recursive: walk a tree depth first with a path
CREATE TABLE node (id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);
INSERT INTO node VALUES (1, NULL, 'root'), (2, 1, 'usr'), (3, 1, 'etc'), (4, 2, 'bin'),
  (5, 2, 'lib'), (6, 4, 'sqlite3'), (7, 3, 'hosts'), (8, 5, 'libz.so'), (9, 5, 'liblua.so');
WITH RECURSIVE walk(id, depth, path) AS (
  SELECT id, 0, name FROM node WHERE parent IS NULL
  UNION ALL
  SELECT node.id, walk.depth + 1, walk.path || '/' || node.name
  FROM node JOIN walk ON node.parent = walk.id
  ORDER BY 2 DESC
)
SELECT depth, path FROM walk;

-- recursive: the Collatz sequence lengths for 1..300, and the longest
WITH RECURSIVE c(start, x, steps) AS (
  SELECT value, value, 0 FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value FROM s)
  UNION ALL
  SELECT start, CASE WHEN x % 2 THEN 3 * x + 1 ELSE x / 2 END, steps + 1 FROM c WHERE x > 1
)
SELECT start, max(steps) FROM c GROUP BY start ORDER BY 2 DESC, 1 LIMIT 5;

-- recursive: a small Mandelbrot set in ASCII (real arithmetic in a loop)
WITH RECURSIVE
  xaxis(x) AS (VALUES(-2.0) UNION ALL SELECT x + 0.1 FROM xaxis WHERE x < 1.2),
  yaxis(y) AS (VALUES(-1.0) UNION ALL SELECT y + 0.2 FROM yaxis WHERE y < 1.0),
  m(iter, cx, cy, x, y) AS (
    SELECT 0, x, y, 0.0, 0.0 FROM xaxis, yaxis
    UNION ALL
    SELECT iter + 1, cx, cy, x * x - y * y + cx, 2.0 * x * y + cy FROM m
    WHERE (x * x + y * y) < 4.0 AND iter < 28
  ),
  m2(iter, cx, cy) AS (SELECT max(iter), cx, cy FROM m GROUP BY cx, cy),
  a(t) AS (SELECT group_concat(substr(' .+*#', 1 + min(iter / 7, 4), 1), '')
           FROM m2 GROUP BY cy)
SELECT group_concat(rtrim(t), x'0a') FROM a;
