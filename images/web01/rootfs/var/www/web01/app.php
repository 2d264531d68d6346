<?php
/*
 * web01's application: a small shop behind nginx, run by php-fpm's
 * pre-forked workers.  Two kinds of request, so the workers wait on
 * different things:
 *   op=item&id=N   cache-aside read: Redis first, SQLite on a miss (items
 *                  expire after a few seconds, so misses keep coming);
 *   op=order&id=N  a write transaction in SQLite (journal and fsync: the
 *                  worker waits for the disk) that invalidates the cache.
 * The work in between (rendering the page) is CPU.
 */
declare(strict_types=1);

const DB = 'sqlite:/var/lib/web01/shop.db';
const TTL_S = 3;

function redis(): Redis
{
	static $r = null;
	if ($r === null) {
		$r = new Redis();
		$r->pconnect('127.0.0.1', 6379, 1.0);
	}
	return $r;
}

function db(): PDO
{
	static $db = null;
	if ($db === null) {
		$db = new PDO(DB, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
		$db->exec('PRAGMA busy_timeout = 5000');
	}
	return $db;
}

function item(int $id): array
{
	$key = "item:$id";
	$cached = redis()->get($key);
	if ($cached !== false)
		return json_decode($cached, true);
	$st = db()->prepare('SELECT id, name, price, stock FROM items WHERE id = ?');
	$st->execute([$id]);
	$row = $st->fetch(PDO::FETCH_ASSOC) ?: ['id' => $id, 'name' => 'none', 'price' => 0, 'stock' => 0];
	redis()->setex($key, TTL_S, json_encode($row));
	return $row;
}

function order(int $id): array
{
	$db = db();
	$db->beginTransaction();
	$db->prepare('UPDATE items SET stock = stock - 1 WHERE id = ? AND stock > 0')->execute([$id]);
	$db->prepare('INSERT INTO orders (item, at) VALUES (?, ?)')->execute([$id, microtime(true)]);
	$db->commit();
	redis()->del("item:$id");
	return item($id);
}

function render(array $row): string
{
	/* A page's worth of templating: CPU between the waits. */
	$html = "<html><body><h1>" . htmlspecialchars((string)$row['name']) . "</h1><ul>";
	for ($i = 0; $i < 40; $i++)
		$html .= sprintf("<li>%d: %.2f (%d in stock) %s</li>", $i, $row['price'] * (1 + $i / 100),
				 $row['stock'], md5($row['name'] . $i));
	return $html . "</ul></body></html>\n";
}

$id = max(1, min(1000, (int)($_GET['id'] ?? 1)));
$row = ($_GET['op'] ?? 'item') === 'order' ? order($id) : item($id);
header('Content-Type: text/html');
echo render($row);
