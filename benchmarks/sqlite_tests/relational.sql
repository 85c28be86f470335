-- Tables, constraints, indexes, joins, aggregates, views, upserts and the
-- query planner on a few thousand generated rows.
PRAGMA foreign_keys = ON;

CREATE TABLE dept (
  id    INTEGER PRIMARY KEY,
  name  TEXT NOT NULL UNIQUE,
  floor INTEGER CHECK (floor BETWEEN 0 AND 20)
);
CREATE TABLE emp (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL,
  dept_id INTEGER REFERENCES dept(id) ON DELETE CASCADE,
  salary  INTEGER NOT NULL,
  hired   TEXT,
  boss_id INTEGER REFERENCES emp(id) ON DELETE SET NULL
);
CREATE TABLE project (code TEXT PRIMARY KEY, budget REAL) WITHOUT ROWID;
CREATE TABLE assignment (
  emp_id INTEGER REFERENCES emp(id) ON DELETE CASCADE,
  code   TEXT REFERENCES project(code),
  hours  INTEGER DEFAULT 0,
  PRIMARY KEY (emp_id, code)
);

INSERT INTO dept(id, name, floor) VALUES
  (1, 'engineering', 3), (2, 'sales', 1), (3, 'support', 1), (4, 'research', 7), (5, 'empty', 0);

-- 3000 employees from a recursive CTE: deterministic pseudo-random salaries
WITH RECURSIVE n(i, r) AS (
  SELECT 1, 12345
  UNION ALL
  SELECT i + 1, (r * 1103515245 + 12345) % 2147483648 FROM n WHERE i < 3000
)
INSERT INTO emp(id, name, dept_id, salary, hired, boss_id)
SELECT i, 'emp' || printf('%04d', i), 1 + (r >> 16) % 4, 30000 + (r >> 8) % 90000,
       date('2000-01-01', '+' || ((r >> 12) % 8000) || ' days'),
       CASE WHEN i > 10 THEN 1 + (r >> 20) % 10 END
FROM n;

INSERT INTO project VALUES ('apollo', 1.5e6), ('gemini', 250000.0), ('mercury', 99999.99),
                           ('orphan', 0.0);
INSERT INTO assignment(emp_id, code, hours)
SELECT id, CASE id % 3 WHEN 0 THEN 'apollo' WHEN 1 THEN 'gemini' ELSE 'mercury' END, id % 40
FROM emp WHERE id % 7 <> 0;
INSERT INTO assignment(emp_id, code, hours) SELECT id, 'apollo', 5 FROM emp WHERE id % 11 = 0
  ON CONFLICT(emp_id, code) DO UPDATE SET hours = hours + excluded.hours;

CREATE INDEX emp_dept_salary ON emp(dept_id, salary DESC);
CREATE INDEX emp_hired ON emp(hired) WHERE hired >= '2010-01-01';
CREATE INDEX emp_lower_name ON emp(lower(name));
ANALYZE;

SELECT 'counts', (SELECT count(*) FROM emp), (SELECT count(*) FROM assignment),
       (SELECT count(*) FROM emp WHERE hired >= '2010-01-01');

-- inner join + group by + having + order by
SELECT d.name, count(*), min(e.salary), max(e.salary), round(avg(e.salary), 2), sum(e.salary)
FROM emp e JOIN dept d ON d.id = e.dept_id
GROUP BY d.name HAVING count(*) > 10 ORDER BY d.name;

-- left join keeps the department without employees
SELECT d.name, count(e.id) FROM dept d LEFT JOIN emp e ON e.dept_id = d.id
GROUP BY d.id ORDER BY d.id;

-- three-way join and a correlated subquery
SELECT p.code, count(*), sum(a.hours),
       (SELECT count(DISTINCT e.dept_id) FROM emp e JOIN assignment a2 ON a2.emp_id = e.id
        WHERE a2.code = p.code)
FROM project p LEFT JOIN assignment a ON a.code = p.code
GROUP BY p.code ORDER BY p.code;

-- self join: bosses with the largest teams
SELECT b.name, count(*) AS team, max(e.salary) - min(e.salary)
FROM emp e JOIN emp b ON e.boss_id = b.id
GROUP BY b.id ORDER BY team DESC, b.id LIMIT 5;

-- IN, EXISTS, NOT EXISTS, scalar subqueries, compound selects
SELECT count(*) FROM emp WHERE dept_id IN (SELECT id FROM dept WHERE floor = 1);
SELECT count(*) FROM emp e WHERE NOT EXISTS (SELECT 1 FROM assignment a WHERE a.emp_id = e.id);
SELECT name FROM emp WHERE salary = (SELECT max(salary) FROM emp) ORDER BY id;
SELECT dept_id FROM emp WHERE salary > 115000 UNION SELECT id FROM dept WHERE floor > 5
EXCEPT SELECT 2 ORDER BY 1;
SELECT count(*) FROM (SELECT id FROM emp WHERE id % 2 = 0 INTERSECT SELECT id FROM emp WHERE id % 3 = 0);

-- the indexes are used (the plan is deterministic for a given build)
EXPLAIN QUERY PLAN SELECT * FROM emp WHERE dept_id = 2 AND salary > 100000;
EXPLAIN QUERY PLAN SELECT count(*) FROM emp WHERE lower(name) = 'emp0042';
SELECT id, name, salary FROM emp WHERE dept_id = 2 AND salary > 119000 ORDER BY salary DESC, id;
SELECT id FROM emp WHERE lower(name) = 'emp0042';

-- a view, then updates and deletes through the foreign keys
CREATE VIEW payroll AS
  SELECT d.name AS dept, e.name AS emp, e.salary * 12 AS yearly FROM emp e JOIN dept d ON d.id = e.dept_id;
SELECT dept, count(*), sum(yearly) FROM payroll GROUP BY dept ORDER BY 3 DESC;
UPDATE emp SET salary = salary + 1000 WHERE dept_id = 3 AND salary < 40000;
SELECT changes(), total_changes() > 0;
DELETE FROM dept WHERE id = 4;
SELECT changes(), (SELECT count(*) FROM emp), (SELECT count(*) FROM assignment);
SELECT quote(dept_id), count(*) FROM emp GROUP BY dept_id ORDER BY dept_id;

-- NULL handling, DISTINCT, COALESCE, CASE, LIMIT/OFFSET, ORDER BY NULLS
SELECT count(*), count(boss_id), count(DISTINCT boss_id), sum(boss_id IS NULL) FROM emp;
SELECT coalesce(boss_id, -1), count(*) FROM emp GROUP BY 1 ORDER BY 1 NULLS FIRST LIMIT 4 OFFSET 1;
SELECT CASE WHEN salary < 50000 THEN 'low' WHEN salary < 90000 THEN 'mid' ELSE 'high' END AS band,
       count(*) FROM emp GROUP BY band ORDER BY band;
SELECT group_concat(name, ',') FROM (SELECT name FROM emp WHERE id <= 12 ORDER BY id DESC);

-- integrity of what was built
PRAGMA integrity_check;
PRAGMA foreign_key_check;
SELECT name, type FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name;
