/**
 * Lua scripts of the Redis ledger. Each runs atomically on the server and takes its time from
 * the server (`TIME`), never from the client clock. Row scripts get the eight fixed keys of one
 * namespace (see keys.ts) as KEYS[1..8]; keys a script builds itself from them (the members
 * index, rows named by member) carry the same hash tag, so stay on the same cluster slot. Optional
 * values travel in ARGV as '' (nil) or '=' .. value. Needs Redis 5 or newer.
 */
import { TRANSFER_RANK_LUA } from '../transfer';
import { COUNTS_KEPT_DAYS } from '../types';

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
-- The layout 1 step set of a member (a set per key, written by versions before layout 2; read
-- until it expires). The key part of a member never holds a raw ':' (see keys.ts).
local function stepset(m)
	return BASE .. 'k:' .. string.match(m, '^[^:]*')
end
-- Layout 2: one sorted set of the namespace's row members, all scored 0, so in byte order: the
-- steps of a key are the members from '<key>:' to '<key>;' (';' follows ':'). A member of the
-- empty step ('<key>:', the usual one) is not in it: its row key is known from the key alone.
local MEMBERS = BASE .. 'members'
local function inmembers(m)
	return string.byte(m, -1) ~= 58
end
-- The members of one (escaped) key: its empty step's when that row exists, layout 2's range,
-- then any left in a layout 1 step set.
local function keymembers(ekey)
	local out, seen = {}, {}
	local plain = ekey .. ':'
	if redis.call('EXISTS', BASE .. 'r:' .. plain) == 1 then
		seen[plain] = true
		out[1] = plain
	end
	for _, m in ipairs(redis.call('ZRANGEBYLEX', MEMBERS, '(' .. plain, '(' .. ekey .. ';')) do
		seen[m] = true
		out[#out + 1] = m
	end
	for _, m in ipairs(redis.call('SMEMBERS', BASE .. 'k:' .. ekey)) do
		if not seen[m] then out[#out + 1] = m end
	end
	return out
end
-- Forgets a member everywhere: every index, and a layout 1 step set. LEASE and IPFS are written
-- by layout 1 only (see keys.ts): a member is removed from them here, with its other entries.
local function unindex(m)
	redis.call('ZREM', IDX, m)
	redis.call('ZREM', LEASE, m)
	redis.call('ZREM', IPFS, m)
	for _, s in ipairs(STATUSES) do redis.call('ZREM', ST[s], m) end
	redis.call('ZREM', MEMBERS, m)
	redis.call('SREM', stepset(m), m)
end
-- Writes a whole row and keeps every index in step with it. Returns the row's text.
local function store(rk, m, row, old)
	if old then
		if old.st ~= row.st then redis.call('ZREM', ST[old.st], m) end
	elseif redis.call('ZSCORE', IDX, m) then
		-- Leftovers of an expired row (a member absent from IDX is in no index at all).
		unindex(m)
	end
	if old and old.st == 'in_progress' and row.st ~= 'in_progress' then
		-- A row layout 1 claimed may have entries there.
		redis.call('ZREM', LEASE, m)
		redis.call('ZREM', IPFS, m)
	end
	local raw = put(rk, row)
	redis.call('ZADD', IDX, fmt(row.u), m)
	redis.call('ZADD', ST[row.st], fmt(row.e), m)
	if inmembers(m) then redis.call('ZADD', MEMBERS, 0, m) end
	return raw
end
-- The same writes as store, for many rows of one script call: each row is SET at once, its index
-- entries are gathered and written per index at the end (flush), a few commands per call instead
-- of several per row. Only for calls whose rows are distinct and that read no index meanwhile.
local staged = {adds = {}, rems = {}}
local function stagedfor(kind, z)
	local t = staged[kind][z]
	if not t then
		t = {}
		staged[kind][z] = t
	end
	return t
end
local function stageadd(z, score, m)
	local t = stagedfor('adds', z)
	t[#t + 1] = score
	t[#t + 1] = m
end
local function stagerem(z, m)
	local t = stagedfor('rems', z)
	t[#t + 1] = m
end
-- Stages the removal of what an expired row of member m may have left in the indexes that an
-- entry in status st does not overwrite (ZREM of an absent member does nothing), layout 1's included.
local function stageleftovers(m, st)
	for _, s in ipairs(STATUSES) do
		if s ~= st then stagerem(ST[s], m) end
	end
	stagerem(LEASE, m)
	stagerem(IPFS, m)
end
local function stage(rk, m, row, old)
	local raw = put(rk, row)
	if old then
		if old.st ~= row.st then stagerem(ST[old.st], m) end
		if old.st == 'in_progress' and row.st ~= 'in_progress' then
			-- A row layout 1 claimed may have entries there.
			stagerem(LEASE, m)
			stagerem(IPFS, m)
		end
	else
		-- No live row: an expired one may have left entries.
		stageleftovers(m, row.st)
	end
	stageadd(IDX, fmt(row.u), m)
	stageadd(ST[row.st], fmt(row.e), m)
	if inmembers(m) then stageadd(MEMBERS, 0, m) end
	return raw
end
-- Sends a long argument list in slices (Lua's unpack has a stack limit).
local function inslices(cmd, z, list, width)
	for i = 1, #list, width do
		redis.call(cmd, z, unpack(list, i, math.min(#list, i + width - 1)))
	end
end
local function flush()
	for z, list in pairs(staged.rems) do inslices('ZREM', z, list, 1000) end
	for z, list in pairs(staged.adds) do inslices('ZADD', z, list, 1000) end
	staged = {adds = {}, rems = {}}
end
-- Layout 3: the claim calls whose new rows have no index entries yet, one JSON entry each (see CLAIM).
local UNINDEXED = BASE .. 'unindexed'
-- Writes the index entries of the rows that claim calls left unindexed, oldest call first, whole
-- calls until at least \`limit\` rows were looked at. A row gets the entries its claim would have
-- written while its text still ends with that claim's tail (status, fence, times, lease): a row
-- written since indexed itself then. A row gone after the claim's expiry gets them too, so that
-- purge finds, removes and counts it as it does any expired row; one gone before (released) needs
-- none. As the claim did before layout 3, IDX first: when ZADD adds every member, no expired row
-- left entries in other indexes. Returns the number of calls still unindexed.
local function indexpending(limit)
	local looked = 0
	while looked < limit do
		local text = redis.call('LPOP', UNINDEXED)
		if not text then break end
		local call = cjson.decode(text)
		local t, kept, n = call.t, {}, 0
		local expired = now >= tonumber(call.e)
		for _, m in ipairs(call.m) do
			local raw = redis.call('GET', BASE .. 'r:' .. m)
			if (raw and #raw > #t and string.sub(raw, -#t) == t) or (not raw and expired) then
				n = n + 1
				kept[n] = m
			end
		end
		looked = looked + #call.m
		for i = 1, n, 1000 do
			local args, a = {}, 0
			for j = i, math.min(n, i + 999) do
				args[a + 1] = call.u
				args[a + 2] = kept[j]
				a = a + 2
			end
			if redis.call('ZADD', IDX, unpack(args)) < a / 2 then
				for j = i, math.min(n, i + 999) do stageleftovers(kept[j], call.st) end
			end
			for j = 1, a, 2 do args[j] = call.e end
			redis.call('ZADD', ST[call.st], unpack(args))
		end
		flush()
	end
	return redis.call('LLEN', UNINDEXED)
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
 * KEYS: 8 fixed, then n row keys (the member of a row is its key after BASE .. 'r:').
 * ARGV: mode, holder, leaseMs, ttlMs (never shorter than the lease in mode lease), reclaimOwn
 * ('1' or ''), n, then per request its head: the start of the row's JSON text as the client wrote
 * it, '{"k":<key>,"s":<step>' then ',"fp":<fingerprint>' and ',"v":<version>' when given (JSON
 * strings). The fingerprint and version are read back from the head only when a live row needs
 * comparing with them.
 * Every row this call claims gets one new fencing token (HINCRBY on the namespace's meta hash,
 * only when it claims something; the counter is never deleted, so tokens only grow).
 * Rows are read with MGET; a row claimed where no live row was is written as its head plus a tail
 * that is the same for every such row of the call (status, token, times, lease), with no Lua table
 * and no JSON encoding per row; its index entries are not written now, but noted once for the
 * whole call in the namespace's unindexed list (layout 3, see indexpending).
 * Returns: this script's clock (now), the fencing token (or nil), a string of one character per
 * request, one JSON array text (or nil when no request is '0' or '1') with, in request order, per
 * request whose character is '0' or '1': '1' claimed over a row: the row, then the phase the
 * replaced row had reached (or null); '0' blocked: the live row (its lease ms left is le - now, by
 * this script's clock). '2' claimed a key that had no live row: the row is exactly what its head,
 * the clock, the token and the options make, so it is not sent back. '3' blocked by a live row
 * whose text is the request's head then a tail that other blocked rows of this call share (rows
 * claimed together share all but their head): then one JSON array text of those tails, each as
 * an object, and the tail's number (1-based) for each '3', comma-separated, or nil when there is
 * one tail. A row's verdict follows from its tail alone when its text starts with the request's
 * head (its fingerprint and version are the request's, or in the tail), so each tail is decoded
 * and judged once: 10,000 duplicates of one earlier claim are one decode and one short reply, not
 * 10,000 rows. A claim always clears the phase.
 */
const CLAIM = `
local mode, holder, leaseMs, ttlMs, reclaimOwn, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1', tonumber(ARGV[6])
local status = 'completed'
if mode == 'lease' then status = 'in_progress' end
local codes, rest, blocked, fence = {}, {}, 0, nil
-- Tails of the rows blocked as '3' (see above): their numbers by text, the texts, and each '3' row's number.
local tailno, tails, tailof, ntailof = {}, {}, {}, 0
local raws = {}
for i = 1, n, 1000 do
	local got = redis.call('MGET', unpack(KEYS, 8 + i, 8 + math.min(n, i + 999)))
	for j = 1, #got do raws[i + j - 1] = got[j] end
end
local cut = #BASE + 3
-- What every row claimed fresh by this call shares: its text's tail, its expiry, its index scores.
local NOW, E, LE, PX = fmt(now), fmt(now + ttlMs), fmt(now + leaseMs), fmt(math.max(1, ttlMs))
local tail
-- Counters beside the tables: # on a Lua table is a search, not a field.
local fresh, nfresh = {}, 0
for i = 1, n do
	local rk = KEYS[8 + i]
	local head = ARGV[6 + i]
	local oldraw = raws[i]
	local old, given, after = nil, nil, nil
	if oldraw and string.byte(oldraw, #head + 1) == 44 and string.sub(oldraw, 1, #head) == head then
		after = string.sub(oldraw, #head + 1)
	end
	local known = after and tailno[after]
	if known then
		blocked = blocked + 1
		codes[i] = '3'
		ntailof = ntailof + 1
		tailof[ntailof] = known
	elseif oldraw then
		old = cjson.decode(oldraw)
		if old.e <= now then old = nil end
	end
	local take = not known and old == nil
	if old then
		-- The fingerprint and version of the request, from its head, when they matter.
		if old.fp ~= nil or mode == 'newer' then given = cjson.decode(head .. '}') end
		local fp, ver = given and given.fp or false, given and given.v or false
		local leased = old.st == 'in_progress' and old.le ~= nil and old.le > now
		local fpok = old.fp == nil or not fp or old.fp == fp
		take = (mode == 'newer' and isnewer(ver, old.v or false) and not leased)
			or (fpok and ((old.st == 'in_progress' and (not leased or (reclaimOwn and old.lh == holder)))
				or old.st == 'failed_retryable'))
	end
	if take then
		if not fence then fence = redis.call('HINCRBY', META, 'fence', 1) end
		if old then
			given = given or cjson.decode(head .. '}')
			local row = {k = given.k, s = given.s, st = status, g = fence, fp = given.fp, v = given.v, a = old.a + 1, fs = old.fs, u = now, e = now + ttlMs}
			if mode == 'lease' then
				row.lh = holder
				row.le = now + leaseMs
			end
			row.ps = old.st
			row.pp = old.ph
			row.x = old.x
			row.res = old.res
			-- Taking over a step that may have gone out keeps that knowledge on the row, so a
			-- second crash before this claim records anything cannot lose it.
			if old.ph == 'sending' then
				row.ph = 'sending'
				row.e = KEEP
			end
			codes[i] = '1'
			rest[#rest + 1] = stage(rk, string.sub(rk, cut), row, old)
			rest[#rest + 1] = old.ph and cjson.encode(old.ph) or 'null'
		else
			if not tail then
				tail = ',"st":"' .. status .. '","g":' .. fmt(fence) .. ',"a":1,"fs":' .. NOW .. ',"u":' .. NOW .. ',"e":' .. E
				if mode == 'lease' then tail = tail .. ',"lh":' .. cjson.encode(holder) .. ',"le":' .. LE end
				tail = tail .. '}'
			end
			redis.call('SET', rk, head .. tail, 'PX', PX)
			nfresh = nfresh + 1
			fresh[nfresh] = string.sub(rk, cut)
			codes[i] = '2'
		end
	elseif not known then
		blocked = blocked + 1
		if after then
			tails[#tails + 1] = after
			tailno[after] = #tails
			ntailof = ntailof + 1
			tailof[ntailof] = #tails
			codes[i] = '3'
		else
			codes[i] = '0'
			rest[#rest + 1] = oldraw
		end
	end
end
-- The index entries of the fresh rows are not written here (layout 3): the call is noted once, and
-- indexpending writes them before anything reads the indexes. Times as text: a number in cjson
-- keeps 14 digits.
if nfresh > 0 then
	redis.call('RPUSH', UNINDEXED, cjson.encode({t = tail, st = status, u = NOW, e = E, m = fresh}))
	for f = 1, nfresh do
		local m = fresh[f]
		if inmembers(m) then stageadd(MEMBERS, 0, m) end
	end
end
flush()
if blocked > 0 then redis.call('HINCRBY', META, 'blocked', blocked) end
local tailtexts = false
if #tails > 0 then
	for t = 1, #tails do tails[t] = '{' .. string.sub(tails[t], 2) end
	tailtexts = '[' .. table.concat(tails, ',') .. ']'
end
return {now, fence or false, table.concat(codes), #rest > 0 and '[' .. table.concat(rest, ',') .. ']' or false,
	tailtexts, #tails > 1 and table.concat(tailof, ',') or false}
`;

/**
 * KEYS: 8 fixed, n row keys.
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
	local rk = KEYS[8 + i]
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
		out[i] = stage(rk, m, row, old)
	elseif missing then
		out[i] = 0
	else
		out[i] = false
	end
end
flush()
return out
`;

/**
 * Shared by MARK_PHASE and RENEW_LEASES. KEYS: 8 fixed, n row keys. ARGV: one
 * value, n, then per row: member, fence. Applies `update` to each row that is live, in_progress,
 * carries the fence and whose lease has not lapsed, and stores it. Returns per row 1 or 0.
 */
const OWNED = `
local function updateowned(update)
	local n = tonumber(ARGV[2])
	local out = {}
	for i = 1, n do
		local rk = KEYS[8 + i]
		local m, fence = ARGV[2 + 2 * i - 1], tonumber(ARGV[2 + 2 * i])
		local row = readrow(rk)
		if row and row.st == 'in_progress' and row.g ~= nil and row.g == fence and row.le ~= nil and row.le > now then
			update(row)
			stage(rk, m, row, row)
			out[i] = 1
		else
			out[i] = 0
		end
	end
	flush()
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
 * KEYS: 8 fixed, the layout 1 step set of the key (its name ends with the escaped key). Returns,
 * flat, per live row: its text, lease ms left (nil without a lease).
 */
const GET = `
local out = {}
for _, m in ipairs(keymembers(string.sub(KEYS[9], #BASE + 3))) do
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
 * KEYS: 8 fixed, the layout 1 step set of the key, the audit stream. ARGV: member ('' = every step), actor,
 * audit max length, evenIfHeld ('1'), resolution ('', 'sent', 'not_sent', 'dropped'), ttlMs, onlyIf status
 * ('': any), onlyIf fence ('': none).
 * Decides each live step once: not in the onlyIf status and fence: refused (changed); held by a
 * live lease and not evenIfHeld: refused (lease_live); resolution sent or dropped: recorded as
 * completed by the operator (fence and holder cleared); phase
 * sending without a resolution: refused (may_have_sent); otherwise deleted. One audit entry per
 * step acted on keeps its status, phase, lease holder, fence and the resolution.
 * Returns, flat, per live step: step, status, phase or nil, action, reason or nil.
 */
const RELEASE = `
local actor, auditMax, evenIfHeld, resolution, ttlMs = ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5], tonumber(ARGV[6])
local onlyStatus, onlyFence = ARGV[7], ARGV[8]
local audited = {released = 'release', recorded_sent = 'resolve_sent', recorded_dropped = 'resolve_dropped'}
local members
if ARGV[1] ~= '' then members = {ARGV[1]} else members = keymembers(string.sub(KEYS[9], #BASE + 3)) end
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
		if onlyStatus ~= '' and (row.st ~= onlyStatus or (row.g and fmt(row.g) or '') ~= onlyFence) then
			action, reason = 'refused', 'changed'
		elseif held and not evenIfHeld then
			action, reason = 'refused', 'lease_live'
		elseif resolution == 'sent' or resolution == 'dropped' then
			action = 'recorded_' .. resolution
		elseif row.ph == 'sending' and resolution == '' then
			action, reason = 'refused', 'may_have_sent'
		else
			action = 'released'
		end
		if action == 'released' then
			redis.call('DEL', rk)
			unindex(m)
		elseif action ~= 'refused' then
			local new = {}
			for f, v in pairs(row) do new[f] = v end
			new.st = 'completed'
			new.le = nil
			new.ph = nil
			new.g = nil
			new.lh = nil
			new.u = now
			new.e = now + ttlMs
			new.res = '{"resolution":' .. cjson.encode(resolution) .. ',"resolvedBy":' .. cjson.encode(actor) .. ',"resolvedAt":"' .. iso(now)
				.. '","before":' .. (row.res or 'null') .. '}'
			store(rk, m, new, row)
		end
		if action ~= 'refused' then
			local fields = {'action', audited[action], 'key', row.k, 'step', row.s,
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
 * already expired. A status entry whose expiry has passed while its row lives is stale (the row
 * was written again, in another status or with a later expiry, before its claim's entries were
 * indexed) and is removed alone. Returns {removed, rows left in the namespace: indexed, and
 * claim calls not yet indexed}.
 */
const PURGE = `
local limit = tonumber(ARGV[1])
local n = 0
for _, s in ipairs(STATUSES) do
	if n >= limit then break end
	for _, m in ipairs(redis.call('ZRANGEBYSCORE', ST[s], '-inf', '(' .. fmt(now), 'LIMIT', 0, limit - n)) do
		if redis.call('EXISTS', BASE .. 'r:' .. m) == 0 then unindex(m) else redis.call('ZREM', ST[s], m) end
		n = n + 1
	end
end
return {n, redis.call('ZCARD', IDX) + redis.call('LLEN', UNINDEXED)}
`;

/** KEYS: 8 fixed. ARGV: limit (rows). Indexes what claims left unindexed (indexpending); returns the calls left. */
const INDEX_PENDING = `
return indexpending(tonumber(ARGV[1]))
`;

/**
 * KEYS: 8 fixed. ARGV: cutoff ('' on the first call: this script's clock), cursor score, cursor
 * member ('' = from the start), stuck so far, oldest first seen so far (''), budget.
 * Stats in bounded slices: each call checks at most `budget` in-progress rows, and the client calls
 * again with the returned state until the scan is done. Every call judges by the first call's
 * server time (the cutoff), so the slices add up to one answer as of that instant. Stuck leases and
 * the oldest in-progress row are found by reading the in-progress rows themselves (the status
 * index from the cutoff on, so only rows still live then): the claim writes no index for them.
 * Returns {in_progress, completed, failed_retryable, needs_review, blocked, stuck, oldestFirstSeen,
 * done, cursor score, cursor member, cutoff}.
 */
const STATS = `
local cutoff = tonumber(ARGV[1]) or now
local cs, cm, stuck, oldest, budget = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {}
for i, s in ipairs(STATUSES) do out[i] = redis.call('ZCOUNT', ST[s], '(' .. fmt(cutoff), '+inf') end
out[5] = redis.call('HGET', META, 'blocked') or '0'
local Z = ST.in_progress
local lo
if cs == '' then lo = redis.call('ZCOUNT', Z, '-inf', fmt(cutoff)) else lo = rankafter(Z, cs, cm) end
local work, done = 0, false
while not done and work < budget do
	local batch = redis.call('ZRANGE', Z, lo, lo + math.min(99, budget - work - 1), 'WITHSCORES')
	if #batch == 0 then done = true end
	for j = 1, #batch, 2 do
		local m, score = batch[j], batch[j + 1]
		work = work + 1
		local rk = BASE .. 'r:' .. m
		local row = readrow(rk)
		if not row and redis.call('EXISTS', rk) == 0 then
			-- Later ranks move down by one: lo stays.
			unindex(m)
		else
			if row and row.st == 'in_progress' then
				if row.le ~= nil and row.le <= cutoff then stuck = stuck + 1 end
				if row.fs <= cutoff and (not oldest or row.fs < oldest) then oldest = row.fs end
			end
			lo = lo + 1
			cs, cm = score, m
		end
	end
end
out[6] = stuck
out[7] = oldest and fmt(oldest) or false
out[8] = done and 1 or 0
out[9] = cs
out[10] = cm
out[11] = fmt(cutoff)
return out
`;

/** Writes a checkpoint hash whole: its value, when it was set (epoch ms as text), and by whom if known. */
const CHECKPOINT = `
local function putcheckpoint(key, value, at, by)
	local fields = {'v', value, 'u', at}
	if by then
		fields[5] = 'by'
		fields[6] = by
	end
	redis.call('DEL', key)
	redis.call('HSET', key, unpack(fields))
end
`;

/**
 * KEYS: the checkpoint hash. ARGV: value, force ('1'), updatedBy?.
 * Returns {1, updatedAt} or {0, current value} when it would move backwards.
 */
const SET_CHECKPOINT = `
local cur = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] ~= '1' and cur and isnewer(cur, ARGV[1]) then return {0, cur} end
putcheckpoint(KEYS[1], ARGV[1], fmt(now), opt(ARGV[3]))
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

/**
 * Export of a ledger copy (see ../transfer.ts). KEYS: 8 fixed. ARGV: afterScore, afterMember ('' =
 * from the start), want, budget. Walks the updated_at index from just after (afterScore,
 * afterMember) like LIST, reading at most about `budget` entries; changes nothing. Every row of
 * both key layouts is in that index (layout 1 writers indexed there too), so a prefix upgraded
 * from layout 1 exports the rows a layout 1 writer left beside its layout 2 ones.
 * Returns {done, lastScore, lastMember, now, {row text, ...}} (live rows only; `now` is this
 * script's clock, to turn the rows' absolute times into durations).
 */
const EXPORT = `
local afterScore, afterMember, want, budget = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lo = 0
if afterScore ~= '' then lo = rankafter(IDX, afterScore, afterMember) end
local rows, examined, done = {}, 0, false
local lastScore, lastMember = afterScore, afterMember
while not done and #rows < want and examined < budget do
	local batch = redis.call('ZRANGE', IDX, lo, lo + 199, 'WITHSCORES')
	if #batch == 0 then
		done = true
	else
		lo = lo + #batch / 2
		for j = 1, #batch, 2 do
			examined = examined + 1
			lastScore, lastMember = batch[j + 1], batch[j]
			local row, raw = readrow(BASE .. 'r:' .. batch[j])
			if row then
				rows[#rows + 1] = raw
				if #rows >= want then break end
			end
		end
	end
end
return {done and 1 or 0, lastScore, lastMember, fmt(now), rows}
`;

/**
 * Import of a ledger copy (see ../transfer.ts for the rule). KEYS: 8 fixed, n row keys. ARGV: n,
 * then per row: member, the row as JSON in the stored field names, with
 * `lm` (lease ms left) and `em` (ms until it expires; absent: kept until resolved) instead of `le`
 * and `e`, and `g` present (any number) when the source row had a fencing token.
 * A row is written when the target has none live, or when its rank is higher than the target's.
 * Times become this script's now + the durations. A written row that had a token gets one new
 * token of this namespace (one per call). Returns per row 1 copied, 2 replaced, 3 present, 4 older.
 */
const IMPORT_ROWS = `
local n = tonumber(ARGV[1])
local out, fence = {}, nil
for i = 1, n do
	local rk = KEYS[8 + i]
	local m, src = ARGV[2 * i], cjson.decode(ARGV[2 * i + 1])
	local old = readrow(rk)
	local verdict = 1
	if old then
		local a, b = xrank(src.st, src.ph), xrank(old.st, old.ph)
		if a > b then verdict = 2 elseif a == b then verdict = 3 else verdict = 4 end
	end
	if verdict <= 2 then
		local row = {k = src.k, s = src.s, st = src.st, lh = src.lh, fp = src.fp, v = src.v, x = src.x, res = src.res, a = src.a,
			ps = src.ps, pp = src.pp, fs = src.fs, u = src.u, ph = src.ph}
		if src.lm then row.le = now + src.lm elseif src.st == 'in_progress' then row.le = now end
		if src.em then row.e = now + src.em else row.e = KEEP end
		if row.le and row.e < row.le then row.e = row.le end
		if src.g then
			if not fence then fence = redis.call('HINCRBY', META, 'fence', 1) end
			row.g = fence
		end
		store(rk, m, row, old)
	end
	out[i] = verdict
end
return out
`;

/** KEYS: the checkpoint hash. ARGV: value, updatedAt (epoch ms), updatedBy?. Written when absent or the value is newer; returns 1 written, 0 kept. */
const IMPORT_CHECKPOINT = `
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and not isnewer(ARGV[1], cur) then return 0 end
putcheckpoint(KEYS[1], ARGV[1], ARGV[2], opt(ARGV[3]))
return 1
`;

/**
 * KEYS: one day's counter hash. ARGV: when it expires (epoch seconds, from the day), then counter,
 * amount, ... Each counter becomes the larger of the two values. Returns 1 when something
 * changed, 0 when the hash had every counter as high or the day is older than the ledger keeps.
 */
const IMPORT_DAY = `
local expireAt = tonumber(ARGV[1])
if expireAt * 1000 <= now then return 0 end
local changed = 0
for p = 2, #ARGV, 2 do
	local cur = redis.call('HGET', KEYS[1], ARGV[p])
	if not cur or tonumber(ARGV[p + 1]) > tonumber(cur) then
		redis.call('HSET', KEYS[1], ARGV[p], ARGV[p + 1])
		changed = 1
	end
end
if changed == 1 then redis.call('EXPIREAT', KEYS[1], fmt(expireAt)) end
return changed
`;

/**
 * KEYS: a namespace's audit stream. ARGV: audit max length, then per entry its fields as a JSON
 * array [field, value, ...] with at least key, step, action, actor and at. An entry is appended
 * unless the stream has one with the same at, key, step, action and actor. Returns how many were.
 */
const IMPORT_AUDIT = `
local function sig(h) return (h.at or '') .. '|' .. (h.key or '') .. '|' .. (h.step or '') .. '|' .. (h.action or '') .. '|' .. (h.actor or '') end
local function fieldsof(flat)
	local h = {}
	for j = 1, #flat, 2 do h[flat[j]] = flat[j + 1] end
	return h
end
local seen = {}
for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do seen[sig(fieldsof(e[2]))] = true end
local n = 0
for i = 2, #ARGV do
	local flat = cjson.decode(ARGV[i])
	local s = sig(fieldsof(flat))
	if not seen[s] then
		redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(flat))
		seen[s] = true
		n = n + 1
	end
end
return n
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
	idemLedgerIndexPending: COMMON + ROWS + INDEX_PENDING,
	idemLedgerStats: COMMON + ROWS + STATS,
	idemLedgerSetCheckpoint: COMMON + CHECKPOINT + SET_CHECKPOINT,
	idemLedgerAddCounts: COMMON + CALENDAR + ADD_COUNTS,
	idemLedgerReadCounts: COMMON + CALENDAR + READ_COUNTS,
	idemLedgerExport: COMMON + ROWS + EXPORT,
	idemLedgerImportRows: COMMON + ROWS + TRANSFER_RANK_LUA + IMPORT_ROWS,
	idemLedgerImportCheckpoint: COMMON + CHECKPOINT + IMPORT_CHECKPOINT,
	idemLedgerImportDay: COMMON + IMPORT_DAY,
	idemLedgerImportAudit: COMMON + IMPORT_AUDIT,
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
