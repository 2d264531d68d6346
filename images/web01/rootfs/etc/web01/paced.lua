-- wrk script for web01's load: a mix of item reads and orders, each
-- connection pausing a random think time between requests so the vCPUs go
-- idle part of the time (wrk alone sends back to back).  At the end of a
-- round it prints one machine-readable line (latencies in microseconds).
local think_ms = tonumber(os.getenv("WEB01_THINK_MS") or "100")
local order_pct = tonumber(os.getenv("WEB01_ORDER_PCT") or "15")

function init(args)
	math.randomseed(os.time())
end

function request()
	local id = math.random(1000)
	local op = "item"
	if math.random(100) <= order_pct then
		op = "order"
	end
	return wrk.format("GET", "/app.php?op=" .. op .. "&id=" .. id)
end

function delay()
	-- exponential think time, capped at 10 means
	local d = -math.log(1 - math.random()) * think_ms
	return math.floor(math.min(d, 10 * think_ms))
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format(
		"web01-round requests=%d duration_us=%d rps=%.1f mean_us=%.0f p50_us=%d p90_us=%d p99_us=%d max_us=%d errors=%d\n",
		summary.requests, summary.duration,
		summary.requests / (summary.duration / 1e6),
		latency.mean, latency:percentile(50), latency:percentile(90),
		latency:percentile(99), latency.max,
		e.connect + e.read + e.write + e.status + e.timeout))
end
