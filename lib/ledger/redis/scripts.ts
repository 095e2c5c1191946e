/**
 * Lua scripts of the Redis ledger. Each runs atomically on the server and takes its time from
 * the server (`TIME`), never from the client clock. Row scripts get the eight fixed keys of one
 * namespace (see keys.ts) as KEYS[1..8]; optional values travel in ARGV as '' (nil) or
 * '=' .. value. Needs Redis 5 or newer.
 */

const COMMON = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local function fmt(x) return string.format('%.0f', x) end
local now
do
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function opt(s)
	if s == nil or s == '' then return false end
	return string.sub(s, 2)
end
-- Byte order, independent of the server locale (Lua's < uses strcoll).
local function bytecmp(a, b)
	local n = math.min(#a, #b)
	for i = 1, n do
		local x, y = string.byte(a, i), string.byte(b, i)
		if x ~= y then
			if x < y then return -1 end
			return 1
		end
	end
	if #a == #b then return 0 end
	if #a < #b then return -1 end
	return 1
end
local function isnum(s)
	return string.match(s, '^%-?%d+$') ~= nil or string.match(s, '^%-?%d+%.%d+$') ~= nil
end
local function decparts(s)
	local neg = string.sub(s, 1, 1) == '-'
	if neg then s = string.sub(s, 2) end
	local i, f = string.match(s, '^(%d+)%.?(%d*)$')
	i = (string.gsub(i, '^0+', ''))
	f = (string.gsub(f, '0+$', ''))
	if i == '' and f == '' then neg = false end
	return neg, i, f
end
-- Exact decimal comparison (no float rounding), like PostgreSQL numeric.
local function deccmp(a, b)
	local an, ai, af = decparts(a)
	local bn, bi, bf = decparts(b)
	if an ~= bn then
		if an then return -1 end
		return 1
	end
	local c
	if #ai ~= #bi then
		if #ai < #bi then c = -1 else c = 1 end
	else
		c = bytecmp(ai, bi)
		if c == 0 then
			local n = math.max(#af, #bf)
			c = bytecmp(af .. string.rep('0', n - #af), bf .. string.rep('0', n - #bf))
		end
	end
	if an then return -c end
	return c
end
-- Is version a newer than b? Numeric when both are numbers, otherwise byte order.
local function isnewer(a, b)
	if not b then return a and true or false end
	if not a then return false end
	if isnum(a) and isnum(b) then return deccmp(a, b) > 0 end
	return bytecmp(a, b) > 0
end
`;

const ROWS = `
local IDX, META, LEASE, IPFS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local STATUSES = {'in_progress', 'completed', 'failed_retryable', 'needs_review'}
local ST = {in_progress = KEYS[5], completed = KEYS[6], failed_retryable = KEYS[7], needs_review = KEYS[8]}
-- A row is one JSON string (fields k, s, st, lh, le, fp, v, x, res, a, ps, fs, u, e, ph; times in
-- epoch ms) that expires natively. Returns the decoded row and its raw text, or nil.
local function readrow(key)
	local raw = redis.call('GET', key)
	if not raw then return nil end
	return cjson.decode(raw), raw
end
local function put(rk, row)
	local raw = cjson.encode(row)
	redis.call('SET', rk, raw, 'PX', fmt(math.max(1, row.e - now)))
	return raw
end
local function unindex(m)
	redis.call('ZREM', IDX, m)
	redis.call('ZREM', LEASE, m)
	redis.call('ZREM', IPFS, m)
	for _, s in ipairs(STATUSES) do redis.call('ZREM', ST[s], m) end
end
-- Writes a whole row and keeps every index in step with it. Returns the row's text.
local function store(rk, sk, m, row, old)
	if old then
		if old.st ~= row.st then redis.call('ZREM', ST[old.st], m) end
	elseif redis.call('ZSCORE', IDX, m) then
		-- Leftovers of an expired row (a member absent from IDX is in no index at all).
		unindex(m)
	end
	local raw = put(rk, row)
	redis.call('ZADD', IDX, fmt(row.u), m)
	redis.call('ZADD', ST[row.st], fmt(row.e), m)
	if row.st == 'in_progress' then
		redis.call('ZADD', LEASE, fmt(row.le), m)
		redis.call('ZADD', IPFS, fmt(row.fs), m)
	elseif old and old.st == 'in_progress' then
		redis.call('ZREM', LEASE, m)
		redis.call('ZREM', IPFS, m)
	end
	redis.call('SADD', sk, m)
	local ttl = redis.call('PTTL', sk)
	if ttl < 0 or now + ttl < row.e then redis.call('PEXPIREAT', sk, fmt(row.e)) end
	return raw
end
`;

/**
 * KEYS: 8 fixed, n row keys, n step-set keys.
 * ARGV: mode, holder, leaseMs, ttlMs, reclaimOwn ('1' or ''), n, then per request: member, key,
 * step, fingerprint?, version?
 * Returns, flat, per request: 1, row text, previous phase (claimed; the phase the replaced row had
 * reached) or 0, row text, nil (the live row that blocked it). A claim always clears the phase.
 */
const CLAIM = `
local mode, holder, leaseMs, ttlMs, reclaimOwn, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6])
local status = 'completed'
if mode == 'lease' then status = 'in_progress' end
local out, blocked = {}, 0
for i = 1, n do
	local rk, sk = KEYS[8 + i], KEYS[8 + n + i]
	local j = 6 + (i - 1) * 5
	local m, key, step, fp, ver = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], opt(ARGV[j + 4]), opt(ARGV[j + 5])
	local old, oldraw = readrow(rk)
	local take = old == nil
	if old then
		local leaselive = old.st == 'in_progress' and old.le ~= nil and old.le > now and not (reclaimOwn and old.lh == holder)
		local fpok = old.fp == nil or not fp or old.fp == fp
		take = (mode == 'newer' and isnewer(ver, old.v or false) and not leaselive)
			or (fpok and ((old.st == 'in_progress' and not leaselive) or old.st == 'failed_retryable'))
	end
	if take then
		local row = {k = key, s = step, st = status, fp = fp or nil, v = ver or nil, a = 1, fs = now, u = now, e = now + ttlMs}
		if mode == 'lease' then
			row.lh = holder
			row.le = now + leaseMs
		end
		if old then
			row.ps = old.st
			row.a = old.a + 1
			row.fs = old.fs
			row.x = old.x
			row.res = old.res
		end
		local j = #out
		out[j + 1] = 1
		out[j + 2] = store(rk, sk, m, row, old)
		out[j + 3] = (old and old.ph) or false
	else
		blocked = blocked + 1
		local j = #out
		out[j + 1] = 0
		out[j + 2] = oldraw
		out[j + 3] = false
	end
end
if blocked > 0 then redis.call('HINCRBY', META, 'blocked', blocked) end
return out
`;

/**
 * KEYS: 8 fixed, n row keys, n step-set keys.
 * ARGV: holder?, ttlMs, n, then per request: member, key, step, status, fingerprint?, externalId?, result?
 * Returns per request the written row's text, or nil when another holder's live lease refused it.
 */
const RECORD = `
local holder, ttlMs, n = opt(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for i = 1, n do
	local rk, sk = KEYS[8 + i], KEYS[8 + n + i]
	local j = 3 + (i - 1) * 7
	local m, key, step, status = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
	local fp, x, res = opt(ARGV[j + 5]), opt(ARGV[j + 6]), opt(ARGV[j + 7])
	local old = readrow(rk)
	local refused = holder and old and old.st == 'in_progress' and old.lh ~= holder
		and not (old.le ~= nil and old.le <= now)
	if refused then
		out[i] = false
	else
		local row = {k = key, s = step, st = status, fp = fp or nil, x = x or nil, res = res or nil, a = 1, fs = now, u = now, e = now + ttlMs}
		if old then
			row.fp = fp or old.fp
			row.a = old.a
			row.fs = old.fs
			row.v = old.v
			row.ps = old.ps
		end
		out[i] = store(rk, sk, m, row, old)
	end
end
return out
`;

/**
 * KEYS: 8 fixed, n row keys. ARGV: holder, phase, n, then the n row members.
 * Sets the phase of rows that are live, in_progress, leased by holder, lease not lapsed.
 * Returns per row 1 (marked) or 0.
 */
const MARK_PHASE = `
local holder, phase, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
for i = 1, n do
	local rk = KEYS[8 + i]
	local row = readrow(rk)
	if row and row.st == 'in_progress' and row.lh == holder and row.le and row.le > now then
		row.ph = phase
		row.u = now
		put(rk, row)
		redis.call('ZADD', IDX, fmt(now), ARGV[3 + i])
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`;

/** KEYS: 8 fixed, the step set of the key. ARGV: base. Returns the texts of the live rows. */
const GET = `
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[9])) do
	local raw = redis.call('GET', ARGV[1] .. 'r:' .. m)
	if raw then
		out[#out + 1] = raw
	else
		redis.call('SREM', KEYS[9], m)
		unindex(m)
	end
end
return out
`;

/**
 * KEYS: 8 fixed. ARGV: base, afterScore, afterMember ('' = from the start), updatedBefore ms (''),
 * status (''), stuckOnly ('1'), want, budget.
 * Walks the updated_at index from just after (afterScore, afterMember), examining at most about
 * `budget` entries so that one call never blocks the server for long.
 * Returns {done, lastScore, lastMember, row texts}.
 */
const LIST = `
local base, afterScore, afterMember = ARGV[1], ARGV[2], ARGV[3]
local before, status, stuck = tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1'
local want, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local lo = 0
if afterScore ~= '' then
	-- Ranks [lo, hi) share afterScore and are ordered by member: binary search past afterMember.
	lo = redis.call('ZCOUNT', IDX, '-inf', '(' .. afterScore)
	local hi = redis.call('ZCOUNT', IDX, '-inf', afterScore)
	while lo < hi do
		local mid = math.floor((lo + hi) / 2)
		if bytecmp(redis.call('ZRANGE', IDX, mid, mid)[1], afterMember) <= 0 then lo = mid + 1 else hi = mid end
	end
end
local rows, dead, examined, done = {}, {}, 0, false
local lastScore, lastMember = afterScore, afterMember
while not done and #rows < want and examined < budget do
	local batch = redis.call('ZRANGE', IDX, lo, lo + 99, 'WITHSCORES')
	if #batch == 0 then
		done = true
	else
		lo = lo + #batch / 2
		for j = 1, #batch, 2 do
			local m, score = batch[j], batch[j + 1]
			if before and tonumber(score) >= before then
				done = true
				break
			end
			examined = examined + 1
			lastScore, lastMember = score, m
			local row, raw = readrow(base .. 'r:' .. m)
			if not row then
				dead[#dead + 1] = m
			elseif (status == '' or row.st == status)
				and (not stuck or (row.st == 'in_progress' and row.le ~= nil and row.le <= now)) then
				rows[#rows + 1] = raw
				if #rows >= want then break end
			end
		end
	end
end
for _, m in ipairs(dead) do unindex(m) end
return {done and 1 or 0, lastScore, lastMember, rows}
`;

/**
 * KEYS: 8 fixed, the step set of the key, the audit stream. ARGV: base, member ('' = every step),
 * actor, audit max length. Deletes the rows, writes one audit entry per live row. Returns the count.
 */
const RELEASE = `
local members
if ARGV[2] ~= '' then members = {ARGV[2]} else members = redis.call('SMEMBERS', KEYS[9]) end
local n = 0
for _, m in ipairs(members) do
	local rk = ARGV[1] .. 'r:' .. m
	local row = readrow(rk)
	if row then
		redis.call('DEL', rk)
		n = n + 1
		redis.call('XADD', KEYS[10], 'MAXLEN', '~', ARGV[4], '*', 'action', 'release', 'key', row.k, 'step', row.s,
			'status', row.st, 'actor', ARGV[3], 'at', fmt(now))
	end
	redis.call('SREM', KEYS[9], m)
	unindex(m)
end
return n
`;

/**
 * KEYS: 8 fixed. ARGV: base, limit. Removes at most `limit` index entries of rows that Redis has
 * already expired. Returns {removed, rows left in the namespace index}.
 */
const PURGE = `
local base, limit = ARGV[1], tonumber(ARGV[2])
local n = 0
for _, s in ipairs(STATUSES) do
	if n >= limit then break end
	for _, m in ipairs(redis.call('ZRANGEBYSCORE', ST[s], '-inf', '(' .. fmt(now), 'LIMIT', 0, limit - n)) do
		if redis.call('EXISTS', base .. 'r:' .. m) == 0 then
			unindex(m)
			n = n + 1
		end
	end
end
return {n, redis.call('ZCARD', IDX)}
`;

/**
 * KEYS: 8 fixed. ARGV: base.
 * Returns {in_progress, completed, failed_retryable, needs_review, blocked, stuck, oldestFirstSeen}.
 */
const STATS = `
local base = ARGV[1]
local out = {}
for i, s in ipairs(STATUSES) do out[i] = redis.call('ZCOUNT', ST[s], fmt(now), '+inf') end
out[5] = redis.call('HGET', META, 'blocked') or '0'
local stuck = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', LEASE, '-inf', fmt(now))) do
	if redis.call('EXISTS', base .. 'r:' .. m) == 1 then stuck = stuck + 1 else unindex(m) end
end
out[6] = stuck
out[7] = false
for _ = 1, 1000 do
	local first = redis.call('ZRANGE', IPFS, 0, 0, 'WITHSCORES')
	if #first == 0 then break end
	if redis.call('EXISTS', base .. 'r:' .. first[1]) == 1 then
		out[7] = first[2]
		break
	end
	unindex(first[1])
end
return out
`;

/**
 * KEYS: the checkpoint hash. ARGV: value, force ('1'), updatedBy?.
 * Returns {1, updatedAt} or {0, current value} when it would move backwards.
 */
const SET_CHECKPOINT = `
local cur = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] ~= '1' and cur and isnewer(cur, ARGV[1]) then return {0, cur} end
local fields = {'v', ARGV[1], 'u', fmt(now)}
local by = opt(ARGV[3])
if by then
	fields[5] = 'by'
	fields[6] = by
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(fields))
return {1, fmt(now)}
`;

export const SCRIPTS = {
	idemLedgerClaim: COMMON + ROWS + CLAIM,
	idemLedgerRecord: COMMON + ROWS + RECORD,
	idemLedgerMarkPhase: COMMON + ROWS + MARK_PHASE,
	idemLedgerGet: COMMON + ROWS + GET,
	idemLedgerList: COMMON + ROWS + LIST,
	idemLedgerRelease: COMMON + ROWS + RELEASE,
	idemLedgerPurge: COMMON + ROWS + PURGE,
	idemLedgerStats: COMMON + ROWS + STATS,
	idemLedgerSetCheckpoint: COMMON + SET_CHECKPOINT,
};

export type ScriptName = keyof typeof SCRIPTS;

/** A row as the scripts store it (JSON): absent fields are null. Times are epoch milliseconds. */
export interface StoredRow {
	k: string;
	s: string;
	st: string;
	lh?: string;
	le?: number;
	fp?: string;
	v?: string;
	x?: string;
	/** The result, as JSON text. */
	res?: string;
	a: number;
	ps?: string;
	fs: number;
	u: number;
	e: number;
	ph?: string;
}
