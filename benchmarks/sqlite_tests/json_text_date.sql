-- JSON functions, string functions and date/time functions (fixed dates
-- only: nothing here depends on the clock or the time zone).
.headers on
.mode list

-- JSON: parse, build, extract, modify, table-valued functions
CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT);
INSERT INTO doc(body) VALUES
  ('{"name":"zlib","version":[1,2,13],"license":"Zlib","deps":[],"size":{"text":76543,"data":1234}}'),
  ('{"name":"lua","version":[5,4,4],"license":"MIT","deps":["libc","libm"],"size":{"text":212345}}'),
  ('{"name":"sqlite","version":[3,40,1],"license":null,"deps":["libc"],"tags":{"db":true,"sql":1.5e0}}'),
  ('  [1, 2.50, "three", {"four": [4, 4.0, "4"]}, true, false, null]  ');
SELECT id, json_valid(body), json_type(body), json_array_length(body, '$.deps') FROM doc;
SELECT json_extract(body, '$.name'), body -> '$.version', body ->> '$.version[1]',
       body ->> '$.size.text', json_extract(body, '$.license', '$.deps[0]')
FROM doc WHERE id < 4;
SELECT json(body) FROM doc WHERE id = 4;
SELECT json_set(body, '$.size.text', 1, '$.new', json('[1,{"a":2}]')) FROM doc WHERE id = 1;
SELECT json_insert(body, '$.deps[#]', 'libdl'), json_replace(body, '$.name', 'Lua') FROM doc WHERE id = 2;
SELECT json_remove(body, '$.tags.db', '$.version[0]'), json_patch(body, '{"tags":{"sql":null,"c":"yes"}}')
FROM doc WHERE id = 3;
SELECT json_object('a', 1, 'b', 2.5, 'c', 'x"y', 'd', NULL, 'e', json_array(1, '2', 3.0)),
       json_quote('tab	and "quote" and \ backslash'), json_array();
SELECT d.id, j.key, j.value, j.type, j.path FROM doc d, json_each(d.body, '$.version') j ORDER BY d.id, j.key;
SELECT fullkey, type, atom, parent IS NOT NULL FROM json_tree((SELECT body FROM doc WHERE id = 4));
SELECT json_group_array(body ->> '$.name') FROM doc WHERE id < 4;
SELECT json_group_object(body ->> '$.name', body -> '$.version') FROM doc WHERE id < 4;
SELECT sum(j.value) FROM doc, json_each(doc.body, '$.version') j;
SELECT json_valid('{"a":}'), json_valid('[1,2'), json_valid('"\u00e9"'), json('"\u00e9"');

-- strings
SELECT length('héllo'), length(CAST('héllo' AS BLOB)), upper('mixed Case ß'), lower('ÀBC abc');
SELECT substr('abcdefgh', 3), substr('abcdefgh', -3, 2), substr('abcdefgh', 2, -1), substring('xyz', 2);
SELECT instr('hello world', 'o w'), replace('a-b-c-d', '-', '+/'), trim('  pad  '), ltrim('xxabcxx', 'x'),
       rtrim('xxabcxx', 'x'), trim('--=val=--', '-=');
SELECT hex('AZ'), hex(123), hex(-1.5), hex(NULL);
SELECT quote('it''s'), quote(12), quote(1.5), quote(x'00ff'), quote(NULL);
SELECT char(72, 105, 0x263A), unicode('☺'), 'a' || 1 || 2.5 || x'41';
SELECT 'abc' LIKE 'A%', 'abc' GLOB 'A*', 'a_c' LIKE 'a\_c' ESCAPE '\', 'abc' GLOB '[a-c]?[!x]';
SELECT 'x' < 'y', 'B' < 'a', 'B' < 'a' COLLATE NOCASE, 'abc ' = 'abc' COLLATE RTRIM;
SELECT typeof('1' + 1), '12abc' + 0, CAST('0x10' AS INTEGER), CAST(' 42 ' AS INTEGER), CAST('3.9' AS INTEGER);
SELECT zeroblob(4), length(zeroblob(1000)), typeof(x'0102'), length(x'0102'), hex(substr(x'01020304', 2, 2));
SELECT group_concat(value, '') FROM (WITH RECURSIVE r(i, value) AS (SELECT 0, 'a' UNION ALL
  SELECT i + 1, char(97 + (i + 1) % 26) FROM r WHERE i < 51) SELECT value FROM r);
SELECT likely(1), unlikely(0), nullif(3, 3), nullif(3, 4), ifnull(NULL, 'dflt'), iif(2 > 1, 'yes', 'no');
SELECT min(3, 1, 2), max('b', 'a', 'c'), coalesce(NULL, NULL, 'third');

-- dates and times
SELECT date('2024-02-28', '+1 day'), date('2023-02-28', '+1 day'), date('2024-01-31', '+1 month');
SELECT datetime('2000-01-01 12:34:56', '-1 hour', '+30 minutes', '+15 seconds'),
       time('23:59:59', '+1 second'), datetime(0, 'unixepoch'), datetime(1700000000, 'unixepoch', 'localtime') IS NOT NULL,
       datetime(-1e10, 'unixepoch');
SELECT julianday('2000-01-01 12:00:00'), julianday('2024-03-01') - julianday('2024-02-01'),
       unixepoch('2038-01-19 03:14:08'), strftime('%s', '1970-01-02');
SELECT strftime('%Y|%m|%d|%H|%M|%S|%j|%w|%W|%f', '2021-12-31 23:59:58.123'),
       strftime('%J', '2000-01-01'), strftime('%%');
SELECT date('2024-05-15', 'start of month'), date('2024-05-15', 'start of year'),
       date('2024-05-15', 'weekday 0'), date('2024-05-15', 'start of month', '+1 month', '-1 day');
SELECT date('2024-05-15', '-400 years'), date('0001-01-01', '-1 day'), date('not a date'),
       datetime('2024-05-15T10:20:30Z'), datetime('2024-05-15 10:20:30+02:00');
WITH RECURSIVE d(x) AS (SELECT '2024-01-01' UNION ALL SELECT date(x, '+1 month') FROM d WHERE x < '2024-12-01')
SELECT group_concat(strftime('%m:%w', x), ' ') FROM d;
