-- requires: ENABLE_FTS4 ENABLE_FTS5
-- Full-text search (FTS4 and FTS5): run only when the library was built
-- with both (the runner reads this file's "requires" line and checks
-- PRAGMA compile_options).
CREATE VIRTUAL TABLE doc5 USING fts5(title, body, tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE doc4 USING fts4(title, body);
CREATE TABLE src (title TEXT, body TEXT);
INSERT INTO src VALUES
  ('zlib', 'A massively spiffy yet delicately unobtrusive compression library.'),
  ('bzip2', 'A freely available, patent free, high-quality data compressor.'),
  ('lua', 'A powerful, efficient, lightweight, embeddable scripting language.'),
  ('sqlite', 'A small, fast, self-contained, high-reliability, full-featured SQL database engine.'),
  ('clang', 'A C language family frontend for LLVM: compiling C, C++ and Objective-C.'),
  ('llvm', 'A collection of modular and reusable compiler and toolchain technologies.');
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO src SELECT 'filler' || i, 'lorem ipsum dolor ' || (i % 17) || ' sit amet compressing ' || (i % 5) FROM n;
INSERT INTO doc5 SELECT title, body FROM src;
INSERT INTO doc4 SELECT title, body FROM src;

SELECT title FROM doc5 WHERE doc5 MATCH 'compression' ORDER BY rank, title LIMIT 5;
SELECT count(*) FROM doc5 WHERE doc5 MATCH 'compress*';
SELECT title, highlight(doc5, 1, '[', ']') FROM doc5 WHERE doc5 MATCH 'language NOT scripting';
SELECT title, snippet(doc5, 1, '<', '>', '...', 4) FROM doc5 WHERE doc5 MATCH 'title:sqlite OR "high quality"' ORDER BY title;
SELECT title, round(bm25(doc5), 4) FROM doc5 WHERE doc5 MATCH 'NEAR(compiler toolchain, 3) OR llvm' ORDER BY title;
SELECT count(*) FROM doc5 WHERE doc5 MATCH 'lorem AND "sit amet" AND 3';
INSERT INTO doc5(doc5) VALUES ('optimize');
INSERT INTO doc5(doc5) VALUES ('integrity-check');

SELECT title FROM doc4 WHERE doc4 MATCH 'compress*' AND title NOT LIKE 'filler%' ORDER BY title;
SELECT title, offsets(doc4) FROM doc4 WHERE body MATCH 'language' ORDER BY title;
SELECT count(*) FROM doc4 WHERE doc4 MATCH 'lorem ipsum -dolor';
SELECT title, snippet(doc4) FROM doc4 WHERE doc4 MATCH 'efficient OR reliability' ORDER BY title;
SELECT count(*) FROM doc4 WHERE doc4 MATCH '"sit amet" 11';
