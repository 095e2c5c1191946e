/**
 * The Redis ledger's Lua scripts as layout 1 wrote them (lib/ledger/redis/scripts.ts at 04afd9c,
 * before layout 2): kept verbatim so that a test can write rows exactly as a persistent Redis of an
 * earlier version holds them, and check that the current ledger reads and rewrites them.
 *
 * A copy on purpose (issue 52): the duplicates listing pairs it with lib/ledger/redis/scripts.ts,
 * and that is expected. Do not share code between the two: this file stands for what an older
 * release wrote, so it must not change when the current scripts do.
 */
import { COUNTS_KEPT_DAYS } from '../../lib/ledger/types';

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

/** Calendar days: `now` is the script's clock (COMMON); days count from 1970-01-01, UTC. */
const CALENDAR = `
-- Year, month, day of a day number (proleptic Gregorian; Howard Hinnant's civil_from_days).
local function civil(days)
	local z = days + 719468
	local era = math.floor(z / 146097)
	local doe = z - era * 146097
	local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
	local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
	local mp = math.floor((5 * doy + 2) / 153)
	local d = doy - math.floor((153 * mp + 2) / 5) + 1
	local mo = mp + 3
	if mp >= 10 then mo = mp - 9 end
	local y = yoe + era * 400
	if mo <= 2 then y = y + 1 end
	return y, mo, d
end
-- 'YYYY-MM-DD' of a day number.
local function dayname(days)
	return string.format('%04d-%02d-%02d', civil(days))
end
-- Today's day number, by this script's clock.
local today = math.floor(now / 86400000)
`;

const ROWS = `
local IDX, META, LEASE, IPFS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local BASE = string.sub(IDX, 1, -4)
local STATUSES = {'in_progress', 'completed', 'failed_retryable', 'needs_review'}
local ST = {in_progress = KEYS[5], completed = KEYS[6], failed_retryable = KEYS[7], needs_review = KEYS[8]}
-- Expiry of a row that may have been sent (or any marked phase): 9999-12-31T00:00:00Z, the same
-- instant as PostgreSQL's. Retention never throws that knowledge away.
local KEEP = 253402214400000
-- A row is one JSON string (fields k, s, st, lh, le, g, fp, v, x, res, a, ps, pp, fs, u, e, ph;
-- times in epoch ms) that expires natively. Returns the decoded row and its raw text, or nil when
-- it is absent or expired by this script's clock.
local function readrow(key)
	local raw = redis.call('GET', key)
	if not raw then return nil end
	local row = cjson.decode(raw)
	if row.e <= now then return nil end
	return row, raw
end
-- Milliseconds left on a row's lease by this script's clock: false (nil) without a lease.
local function remaining(row)
	if row.le == nil then return false end
	return math.max(0, row.le - now)
end
local function put(rk, row)
	local raw = cjson.encode(row)
	redis.call('SET', rk, raw, 'PX', fmt(math.max(1, row.e - now)))
	return raw
end
-- The step set of a member: the key part of a member never holds a raw ':' (see keys.ts).
local function stepset(m)
	return BASE .. 'k:' .. string.match(m, '^[^:]*')
end
-- Forgets a member everywhere: every index and its key's step set.
local function unindex(m)
	redis.call('ZREM', IDX, m)
	redis.call('ZREM', LEASE, m)
	redis.call('ZREM', IPFS, m)
	for _, s in ipairs(STATUSES) do redis.call('ZREM', ST[s], m) end
	redis.call('SREM', stepset(m), m)
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
-- Rank of the first member of sorted set z after (score, member), members of one score being in
-- byte order: a binary search within the ranks of that score.
local function rankafter(z, score, member)
	local lo = redis.call('ZCOUNT', z, '-inf', '(' .. score)
	local hi = redis.call('ZCOUNT', z, '-inf', score)
	while lo < hi do
		local mid = math.floor((lo + hi) / 2)
		if bytecmp(redis.call('ZRANGE', z, mid, mid)[1], member) <= 0 then lo = mid + 1 else hi = mid end
	end
	return lo
end
`;

/**
 * KEYS: 8 fixed, n row keys, n step-set keys.
 * ARGV: mode, holder, leaseMs, ttlMs (never shorter than the lease in mode lease), reclaimOwn
 * ('1' or ''), n, then per request: member, key, step, fingerprint?, version?
 * Every row this call claims gets one new fencing token (HINCRBY on the namespace's meta hash,
 * only when it claims something; the counter is never deleted, so tokens only grow).
 * Returns, flat, per request: 1, row text, previous phase (claimed; the phase the replaced row had
 * reached) or 0, row text, lease ms left by this script's clock (the live row that blocked it).
 * A claim always clears the phase.
 */
const CLAIM = `
local mode, holder, leaseMs, ttlMs, reclaimOwn, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6])
local status = 'completed'
if mode == 'lease' then status = 'in_progress' end
local out, blocked, fence = {}, 0, nil
for i = 1, n do
	local rk, sk = KEYS[8 + i], KEYS[8 + n + i]
	local j = 6 + (i - 1) * 5
	local m, key, step, fp, ver = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], opt(ARGV[j + 4]), opt(ARGV[j + 5])
	local old, oldraw = readrow(rk)
	local take = old == nil
	if old then
		local leased = old.st == 'in_progress' and old.le ~= nil and old.le > now
		local fpok = old.fp == nil or not fp or old.fp == fp
		take = (mode == 'newer' and isnewer(ver, old.v or false) and not leased)
			or (fpok and ((old.st == 'in_progress' and (not leased or (reclaimOwn and old.lh == holder)))
				or old.st == 'failed_retryable'))
	end
	if take then
		if not fence then fence = redis.call('HINCRBY', META, 'fence', 1) end
		local row = {k = key, s = step, st = status, g = fence, fp = fp or nil, v = ver or nil, a = 1, fs = now, u = now, e = now + ttlMs}
		if mode == 'lease' then
			row.lh = holder
			row.le = now + leaseMs
		end
		if old then
			row.ps = old.st
			row.pp = old.ph
			row.a = old.a + 1
			row.fs = old.fs
			row.x = old.x
			row.res = old.res
			-- Taking over a step that may have gone out keeps that knowledge on the row, so a
			-- second crash before this claim records anything cannot lose it.
			if old.ph == 'sending' then
				row.ph = 'sending'
				row.e = KEEP
			end
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
		out[j + 3] = remaining(old)
	end
end
if blocked > 0 then redis.call('HINCRBY', META, 'blocked', blocked) end
return out
`;

/**
 * KEYS: 8 fixed, n row keys, n step-set keys.
 * ARGV: holder?, ttlMs, n, onlyInProgress ('1' or '0'), then per request: member, key, step, status,
 * fingerprint?, externalId?, result?, fence?, claim member?, claim fence?, keepSending ('1' or '')
 * A fenced request writes only a live row that still carries its fence (never creates one), and
 * with onlyInProgress only one still in progress. An
 * unfenced one writes a row that is absent or expired, settled, or in progress under holder; any
 * row when no holder is given. A request that names the claim it is made for (the member of the
 * row that claim took, of the same key and so of this namespace's slot, and its fence) is written
 * only while that row is live and still carries the fence (a claim member without a fence: never).
 * A settled row has no lease holder; its fence stays. A needs_review
 * write (and a fenced failed_retryable write with keepSending) keeps the phase the claim reached
 * (its own, or the one it took over); a row left in
 * phase sending is kept until resolved, every other row lives ttlMs from now.
 * Returns per request the written row's text, 0 when it was refused because a row it needed is
 * gone (the fenced row, or the named claim's row, absent or expired: released, or lost by the
 * store), or nil (lost lease: the row is there but no longer this claim's).
 */
const RECORD = `
local holder, ttlMs, n, openOnly = opt(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local out = {}
for i = 1, n do
	local rk, sk = KEYS[8 + i], KEYS[8 + n + i]
	local j = 4 + (i - 1) * 11
	local m, key, step, status = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
	local fp, x, res, fence = opt(ARGV[j + 5]), opt(ARGV[j + 6]), opt(ARGV[j + 7]), opt(ARGV[j + 8])
	local claimed, claimFence = opt(ARGV[j + 9]), opt(ARGV[j + 10])
	local keepSending = ARGV[j + 11] == '1' and fence and status == 'failed_retryable'
	local old = readrow(rk)
	local ok, missing = false, false
	if fence then
		ok = old ~= nil and old.g ~= nil and old.g == tonumber(fence) and ((not openOnly) or old.st == 'in_progress')
		missing = old == nil
	else
		ok = (not holder) or old == nil or old.st ~= 'in_progress' or old.lh == holder
	end
	if ok and claimed then
		local c = readrow(BASE .. 'r:' .. claimed)
		ok = claimFence and c ~= nil and c.g ~= nil and c.g == tonumber(claimFence)
		missing = c == nil
	end
	if ok then
		local row = {k = key, s = step, st = status, fp = fp or nil, x = x or nil, res = res or nil, a = 1, fs = now, u = now}
		if old then
			row.fp = fp or old.fp
			row.g = old.g
			row.v = old.v
			row.a = old.a
			row.fs = old.fs
			row.ps = old.ps
			row.pp = old.pp
			if status == 'needs_review' or keepSending then
				row.ph = old.ph
				if row.ph == nil and old.st == 'in_progress' then row.ph = old.pp end
			end
		end
		if row.ph == 'sending' then row.e = KEEP else row.e = now + ttlMs end
		out[i] = store(rk, sk, m, row, old)
	elseif missing then
		out[i] = 0
	else
		out[i] = false
	end
end
return out
`;

/**
 * Shared by MARK_PHASE and RENEW_LEASES. KEYS: 8 fixed, n row keys, n step-set keys. ARGV: one
 * value, n, then per row: member, fence. Applies `update` to each row that is live, in_progress,
 * carries the fence and whose lease has not lapsed, and stores it. Returns per row 1 or 0.
 */
const OWNED = `
local function updateowned(update)
	local n = tonumber(ARGV[2])
	local out = {}
	for i = 1, n do
		local rk, sk = KEYS[8 + i], KEYS[8 + n + i]
		local m, fence = ARGV[2 + 2 * i - 1], tonumber(ARGV[2 + 2 * i])
		local row = readrow(rk)
		if row and row.st == 'in_progress' and row.g ~= nil and row.g == fence and row.le ~= nil and row.le > now then
			update(row)
			store(rk, sk, m, row, row)
			out[i] = 1
		else
			out[i] = 0
		end
	end
	return out
end
`;

/** ARGV[1]: the phase. A marked row no longer expires by retention. */
const MARK_PHASE = `
local phase = ARGV[1]
return updateowned(function(row)
	row.ph = phase
	row.u = now
	row.e = KEEP
end)
`;

/**
 * ARGV[1]: lease ms. The lease ends that long from now; the row's expiry moves to at least that.
 * updated_at stays (it says when the key was let through).
 */
const RENEW_LEASES = `
local leaseMs = tonumber(ARGV[1])
return updateowned(function(row)
	row.le = now + leaseMs
	if row.e < row.le then row.e = row.le end
end)
`;

/**
 * KEYS: 8 fixed, the step set of the key. Returns, flat, per live row: its text, lease ms left
 * (nil without a lease).
 */
const GET = `
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[9])) do
	local rk = BASE .. 'r:' .. m
	local row, raw = readrow(rk)
	if row then
		out[#out + 1] = raw
		out[#out + 1] = remaining(row)
	elseif redis.call('EXISTS', rk) == 0 then
		unindex(m)
	end
end
return out
`;

/**
 * KEYS: 8 fixed. ARGV: afterScore, afterMember ('' = from the start), notUpdatedForMs (''),
 * status (''), stuckOnly ('1'), sending ('' any, '1' phase sending, '0' no phase), want, budget.
 * Walks the updated_at index from just after (afterScore, afterMember), examining at most about
 * `budget` entries so that one call never blocks the server for long. Every verdict (live, stuck,
 * not updated for) is by this script's clock.
 * Returns {done, lastScore, lastMember, {row text, lease ms left or nil, ...}}.
 */
const LIST = `
local afterScore, afterMember = ARGV[1], ARGV[2]
local quiet, status, stuck, sending = tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1', ARGV[6]
local want, budget = tonumber(ARGV[7]), tonumber(ARGV[8])
local cutoff = quiet and (now - quiet)
local lo = 0
if afterScore ~= '' then lo = rankafter(IDX, afterScore, afterMember) end
local rows, found, dead, examined, done = {}, 0, {}, 0, false
local lastScore, lastMember = afterScore, afterMember
while not done and found < want and examined < budget do
	local batch = redis.call('ZRANGE', IDX, lo, lo + 99, 'WITHSCORES')
	if #batch == 0 then
		done = true
	else
		lo = lo + #batch / 2
		for j = 1, #batch, 2 do
			local m, score = batch[j], batch[j + 1]
			if cutoff and tonumber(score) > cutoff then
				done = true
				break
			end
			examined = examined + 1
			lastScore, lastMember = score, m
			local rk = BASE .. 'r:' .. m
			local row, raw = readrow(rk)
			if not row then
				if redis.call('EXISTS', rk) == 0 then dead[#dead + 1] = m end
			elseif (status == '' or row.st == status)
				and (not stuck or (row.st == 'in_progress' and row.le ~= nil and row.le <= now))
				and (sending == '' or (sending == '1' and row.ph == 'sending') or (sending == '0' and row.ph == nil)) then
				rows[#rows + 1] = raw
				rows[#rows + 1] = remaining(row)
				found = found + 1
				if found >= want then break end
			end
		end
	end
end
for _, m in ipairs(dead) do unindex(m) end
return {done and 1 or 0, lastScore, lastMember, rows}
`;

/**
 * KEYS: 8 fixed, the step set of the key, the audit stream. ARGV: member ('' = every step), actor,
 * audit max length, evenIfHeld ('1'), resolution ('', 'sent', 'not_sent'), ttlMs.
 * Decides each live step once: held by a live lease and not evenIfHeld: refused (lease_live);
 * resolution sent: recorded as completed by the operator (fence and holder cleared); phase
 * sending without a resolution: refused (may_have_sent); otherwise deleted. One audit entry per
 * step acted on keeps its status, phase, lease holder, fence and the resolution.
 * Returns, flat, per live step: step, status, phase or nil, action, reason or nil.
 */
const RELEASE = `
local actor, auditMax, evenIfHeld, resolution, ttlMs = ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5], tonumber(ARGV[6])
local members
if ARGV[1] ~= '' then members = {ARGV[1]} else members = redis.call('SMEMBERS', KEYS[9]) end
-- An ISO 8601 UTC text of epoch ms.
local function iso(ms)
	local secs = math.floor(ms / 1000)
	local days = math.floor(secs / 86400)
	local sod = secs - days * 86400
	local y, mo, d = civil(days)
	return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, mo, d, math.floor(sod / 3600),
		math.floor(sod / 60) % 60, sod % 60, ms - secs * 1000)
end
local out = {}
for _, m in ipairs(members) do
	local rk = BASE .. 'r:' .. m
	local row = readrow(rk)
	if not row then
		if redis.call('EXISTS', rk) == 0 then unindex(m) end
	else
		local held = row.st == 'in_progress' and row.le ~= nil and row.le > now
		local action, reason
		if held and not evenIfHeld then
			action, reason = 'refused', 'lease_live'
		elseif resolution == 'sent' then
			action = 'recorded_sent'
		elseif row.ph == 'sending' and resolution == '' then
			action, reason = 'refused', 'may_have_sent'
		else
			action = 'released'
		end
		if action == 'released' then
			redis.call('DEL', rk)
			unindex(m)
		elseif action == 'recorded_sent' then
			local new = {}
			for f, v in pairs(row) do new[f] = v end
			new.st = 'completed'
			new.le = nil
			new.ph = nil
			new.g = nil
			new.lh = nil
			new.u = now
			new.e = now + ttlMs
			new.res = '{"resolution":"sent","resolvedBy":' .. cjson.encode(actor) .. ',"resolvedAt":"' .. iso(now)
				.. '","before":' .. (row.res or 'null') .. '}'
			store(rk, KEYS[9], m, new, row)
		end
		if action ~= 'refused' then
			local fields = {'action', action == 'released' and 'release' or 'resolve_sent', 'key', row.k, 'step', row.s,
				'status', row.st}
			if row.ph then fields[#fields + 1] = 'phase'; fields[#fields + 1] = row.ph end
			if row.lh then fields[#fields + 1] = 'leaseHolder'; fields[#fields + 1] = row.lh end
			if row.g then fields[#fields + 1] = 'fence'; fields[#fields + 1] = fmt(row.g) end
			if resolution ~= '' then fields[#fields + 1] = 'resolution'; fields[#fields + 1] = resolution end
			fields[#fields + 1] = 'actor'
			fields[#fields + 1] = actor
			fields[#fields + 1] = 'at'
			fields[#fields + 1] = fmt(now)
			redis.call('XADD', KEYS[10], 'MAXLEN', '~', auditMax, '*', unpack(fields))
		end
		local j = #out
		out[j + 1] = row.s
		out[j + 2] = row.st
		out[j + 3] = row.ph or false
		out[j + 4] = action
		out[j + 5] = reason or false
	end
end
return out
`;

/**
 * KEYS: 8 fixed. ARGV: limit. Removes at most `limit` index entries of rows that Redis has
 * already expired. Returns {removed, rows left in the namespace index}.
 */
const PURGE = `
local limit = tonumber(ARGV[1])
local n = 0
for _, s in ipairs(STATUSES) do
	if n >= limit then break end
	for _, m in ipairs(redis.call('ZRANGEBYSCORE', ST[s], '-inf', '(' .. fmt(now), 'LIMIT', 0, limit - n)) do
		if redis.call('EXISTS', BASE .. 'r:' .. m) == 0 then
			unindex(m)
			n = n + 1
		end
	end
end
return {n, redis.call('ZCARD', IDX)}
`;

/**
 * KEYS: 8 fixed. ARGV: cutoff ('' on the first call: this script's clock), oldest done ('1'),
 * stuck cursor score, stuck cursor member ('' = from the start), stuck so far, budget.
 * Stats in bounded slices: each call checks at most `budget` index entries, and the client calls
 * again with the returned state until both scans are done. Every call judges "lapsed" by the
 * first call's server time (the cutoff), so the slices add up to one exact answer.
 * Returns {in_progress, completed, failed_retryable, needs_review, blocked, stuck, oldestFirstSeen,
 * oldest done, stuck done, cursor score, cursor member, cutoff}.
 */
const STATS = `
local cutoff = tonumber(ARGV[1]) or now
local oldestDone, cs, cm, stuck, budget = ARGV[2] == '1', ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {}
for i, s in ipairs(STATUSES) do out[i] = redis.call('ZCOUNT', ST[s], '(' .. fmt(now), '+inf') end
out[5] = redis.call('HGET', META, 'blocked') or '0'
local work = 0
out[7] = false
-- The oldest in-progress row: the head of the first-seen index, dropping entries of expired rows.
while not oldestDone and work < budget do
	local first = redis.call('ZRANGE', IPFS, 0, 0, 'WITHSCORES')
	if #first == 0 then
		oldestDone = true
	else
		work = work + 1
		if redis.call('EXISTS', BASE .. 'r:' .. first[1]) == 1 then
			out[7] = first[2]
			oldestDone = true
		else
			unindex(first[1])
		end
	end
end
-- Lapsed leases: the lease index up to the cutoff, from just after the cursor.
local stuckDone = false
local lo = 0
if cs ~= '' then lo = rankafter(LEASE, cs, cm) end
while not stuckDone and work < budget do
	local batch = redis.call('ZRANGE', LEASE, lo, lo + math.min(99, budget - work - 1), 'WITHSCORES')
	if #batch == 0 then stuckDone = true end
	for j = 1, #batch, 2 do
		local m, score = batch[j], batch[j + 1]
		if tonumber(score) > cutoff then
			stuckDone = true
			break
		end
		work = work + 1
		if redis.call('EXISTS', BASE .. 'r:' .. m) == 1 then
			stuck = stuck + 1
			lo = lo + 1
			cs, cm = score, m
		else
			-- Later ranks move down by one: lo stays.
			unindex(m)
		end
	end
end
out[6] = stuck
out[8] = oldestDone and 1 or 0
out[9] = stuckDone and 1 or 0
out[10] = cs
out[11] = cm
out[12] = fmt(cutoff)
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

/**
 * KEYS: per namespace, the start of its day keys (`{p:ns}:d:`, see keys.ts). The script appends
 * today's date, which only it knows (the UTC day by its clock); the hash tag keeps the key in the
 * slot of the key passed. ARGV: per namespace, in KEYS order, the number of pairs n, then n times
 * counter, amount. Adds each amount with HINCRBYFLOAT to today's hash and sets it to expire at the
 * start of the day COUNTS_KEPT_DAYS + 1 days on (the same instant whichever add sets it), so a
 * day is readable for COUNTS_KEPT_DAYS days after it. Returns today's date.
 */
const ADD_COUNTS = `
local name = dayname(today)
local expireAt = fmt((today + ${COUNTS_KEPT_DAYS} + 1) * 86400)
local j = 1
for i = 1, #KEYS do
	local key = KEYS[i] .. name
	local n = tonumber(ARGV[j])
	for p = 1, n do
		redis.call('HINCRBYFLOAT', key, ARGV[j + 2 * p - 1], ARGV[j + 2 * p])
	end
	redis.call('EXPIREAT', key, expireAt)
	j = j + 1 + 2 * n
end
return name
`;

/**
 * KEYS: the start of one namespace's day keys. ARGV: days. Returns, flat, oldest day first, for each
 * of the last `days` days up to today (by this script's clock) that has counters: its date, then
 * {counter, value, ...}.
 */
const READ_COUNTS = `
local out = {}
for d = today - tonumber(ARGV[1]) + 1, today do
	local name = dayname(d)
	local fields = redis.call('HGETALL', KEYS[1] .. name)
	if #fields > 0 then
		out[#out + 1] = name
		out[#out + 1] = fields
	end
end
return out
`;

export const SCRIPTS = {
	idemLedgerClaim: COMMON + ROWS + CLAIM,
	idemLedgerRecord: COMMON + ROWS + RECORD,
	idemLedgerMarkPhase: COMMON + ROWS + OWNED + MARK_PHASE,
	idemLedgerRenewLeases: COMMON + ROWS + OWNED + RENEW_LEASES,
	idemLedgerGet: COMMON + ROWS + GET,
	idemLedgerList: COMMON + ROWS + LIST,
	idemLedgerRelease: COMMON + CALENDAR + ROWS + RELEASE,
	idemLedgerPurge: COMMON + ROWS + PURGE,
	idemLedgerStats: COMMON + ROWS + STATS,
	idemLedgerSetCheckpoint: COMMON + SET_CHECKPOINT,
	idemLedgerAddCounts: COMMON + CALENDAR + ADD_COUNTS,
	idemLedgerReadCounts: COMMON + CALENDAR + READ_COUNTS,
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
	/** Fencing token of the claim that holds (or last held) the row. */
	g?: number;
	/** Phase the row had reached when the current claim took it over. */
	pp?: string;
}
