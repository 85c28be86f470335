-- Triggers, transactions with rollback, savepoints, conflict resolution,
-- generated columns and an on-disk-style database (temp file in memory).
PRAGMA foreign_keys = ON;
PRAGMA recursive_triggers = ON;

CREATE TABLE account (
  id      INTEGER PRIMARY KEY,
  owner   TEXT NOT NULL UNIQUE,
  balance INTEGER NOT NULL DEFAULT 0 CHECK (balance >= 0),
  cents   INTEGER GENERATED ALWAYS AS (balance * 100) STORED,
  label   TEXT GENERATED ALWAYS AS (upper(owner) || ':' || balance) VIRTUAL
);
CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT, account INTEGER,
                    old INTEGER, new INTEGER);
CREATE TABLE transfer (id INTEGER PRIMARY KEY, src INTEGER REFERENCES account(id),
                       dst INTEGER REFERENCES account(id), amount INTEGER);

CREATE TRIGGER account_insert AFTER INSERT ON account BEGIN
  INSERT INTO audit(what, account, new) VALUES ('open', new.id, new.balance);
END;
CREATE TRIGGER account_update AFTER UPDATE OF balance ON account
WHEN old.balance <> new.balance BEGIN
  INSERT INTO audit(what, account, old, new) VALUES ('balance', new.id, old.balance, new.balance);
END;
CREATE TRIGGER account_delete BEFORE DELETE ON account BEGIN
  SELECT RAISE(ABORT, 'account not empty') WHERE old.balance > 0;
  INSERT INTO audit(what, account, old) VALUES ('close', old.id, old.balance);
END;
-- a transfer moves money; an impossible one is silently dropped
CREATE TRIGGER transfer_check BEFORE INSERT ON transfer
WHEN (SELECT balance FROM account WHERE id = new.src) < new.amount BEGIN
  SELECT RAISE(IGNORE);
END;
CREATE TRIGGER transfer_apply AFTER INSERT ON transfer BEGIN
  UPDATE account SET balance = balance - new.amount WHERE id = new.src;
  UPDATE account SET balance = balance + new.amount WHERE id = new.dst;
END;
-- an INSTEAD OF trigger makes a view writable
CREATE VIEW rich AS SELECT id, owner, balance FROM account WHERE balance >= 100;
CREATE TRIGGER rich_insert INSTEAD OF INSERT ON rich BEGIN
  INSERT INTO account(owner, balance) VALUES (new.owner, max(new.balance, 100));
END;

INSERT INTO account(owner, balance) VALUES ('alice', 100), ('bob', 50), ('carol', 0);
INSERT INTO rich(owner, balance) VALUES ('dave', 7);
INSERT INTO transfer(src, dst, amount) VALUES (1, 2, 30), (2, 3, 500), (2, 3, 80), (4, 1, 1);
SELECT id, owner, balance, cents, label FROM account ORDER BY id;
SELECT count(*) FROM transfer;

-- a transaction that is rolled back leaves no trace, triggers included
BEGIN;
INSERT INTO transfer(src, dst, amount) VALUES (1, 3, 71);
UPDATE account SET owner = owner || '!' WHERE id = 2;
SELECT owner, balance FROM account ORDER BY id;
ROLLBACK;
SELECT owner, balance FROM account ORDER BY id;

-- savepoints: roll back the inner part only
BEGIN;
INSERT INTO transfer(src, dst, amount) VALUES (4, 3, 50);
SAVEPOINT inner1;
INSERT INTO transfer(src, dst, amount) VALUES (3, 2, 130);
UPDATE account SET owner = owner || '?' WHERE balance = 0;
SELECT 'inside', group_concat(balance, ',') FROM account;
ROLLBACK TO inner1;
RELEASE inner1;
COMMIT;
SELECT 'after', group_concat(balance, ',') FROM account;

-- conflict resolution without errors
INSERT OR IGNORE INTO account(owner, balance) VALUES ('alice', 999);
INSERT OR REPLACE INTO account(id, owner, balance) VALUES (5, 'erin', 0);
INSERT INTO account(owner, balance) VALUES ('bob', 1) ON CONFLICT(owner) DO UPDATE SET balance = balance + 1;
UPDATE OR IGNORE account SET balance = -5 WHERE owner = 'erin';
DELETE FROM account WHERE owner = 'erin';
SELECT id, owner, balance FROM account ORDER BY id;
SELECT seq, what, account, quote(old), quote(new) FROM audit ORDER BY seq;
SELECT name, seq FROM sqlite_sequence;

-- RETURNING, UPDATE FROM, a large transaction and VACUUM INTO memory
UPDATE account SET balance = balance * 2 WHERE balance > 0 RETURNING owner, balance;
CREATE TABLE bonus (owner TEXT, extra INTEGER);
INSERT INTO bonus VALUES ('alice', 5), ('bob', 6), ('nobody', 7);
UPDATE account SET balance = balance + bonus.extra FROM bonus WHERE bonus.owner = account.owner;
SELECT owner, balance FROM account ORDER BY id;
BEGIN;
CREATE TABLE big (k INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO big SELECT i, printf('%08X', i * 2654435761 % 4294967296) FROM n;
DELETE FROM big WHERE k % 3 = 0;
COMMIT;
BEGIN;
DELETE FROM big;
SELECT count(*) FROM big;
ROLLBACK;
SELECT count(*), sum(length(v)), min(v), max(v) FROM big;
CREATE INDEX big_v ON big(v);
SELECT k FROM big WHERE v BETWEEN 'A0' AND 'A1' ORDER BY v LIMIT 5;
PRAGMA integrity_check;
