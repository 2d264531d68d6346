-- web01's shop database (SQLite), created at image build time.
PRAGMA journal_mode = DELETE;
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
		    price REAL NOT NULL, stock INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, item INTEGER NOT NULL,
		     at REAL NOT NULL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO items SELECT i, 'item ' || i, (i % 97) + 0.99, 1000000 FROM n;
