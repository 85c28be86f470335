-- Functions, closures, coroutines, errors, load and string.dump.
local function check(cond, what) if not cond then error("check failed: " .. what, 2) end end

local function counter()
  local n = 0
  return function() n = n + 1; return n end
end
local c1, c2 = counter(), counter()
c1(); c1()
check(c1() == 3 and c2() == 1, "closures keep separate upvalues")

local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
check(fib(25) == 75025, "recursion")
local function loop(n, acc) if n == 0 then return acc end return loop(n - 1, acc + 1) end
check(loop(1000000, 0) == 1000000, "proper tail calls")
local function va(...) return select("#", ...), ... end
local n, first = va(nil, 2, nil)
check(n == 3 and first == nil, "varargs")
local function ack(m, k)
  if m == 0 then return k + 1 elseif k == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, k - 1))
end
check(ack(2, 3) == 9, "ackermann")

-- goto
local out = {}
for i = 1, 5 do
  if i % 2 == 0 then goto continue end
  out[#out + 1] = i
  ::continue::
end
check(table.concat(out) == "135", "goto continue")

-- integer loops near the limits
local iters = 0
for i = math.maxinteger - 2, math.maxinteger do iters = iters + 1 end
check(iters == 3, "for loop up to maxinteger")
iters = 0
for i = 1, 0 do iters = iters + 1 end
check(iters == 0, "empty for loop")
iters = 0
for x = 1.0, 2.0, 0.25 do iters = iters + 1 end
check(iters == 5, "float for loop")

-- coroutines
local gen = coroutine.wrap(function()
  for i = 1, 3 do coroutine.yield(i * 10) end
  return "done"
end)
check(gen() == 10 and gen() == 20 and gen() == 30 and gen() == "done", "coroutine.wrap")
local co = coroutine.create(function(a, b)
  local c = coroutine.yield(a + b)
  local ok, err = pcall(function() coroutine.yield("inside pcall") error("boom") end)
  return c, ok, err
end)
local _, r1 = coroutine.resume(co, 1, 2)
check(r1 == 3, "resume passes values")
local _, r2 = coroutine.resume(co, "c")
check(r2 == "inside pcall", "yield across pcall")
local ok3, c, okp, err = coroutine.resume(co)
check(ok3 and c == "c" and okp == false and err:find("boom"), "error inside pcall inside coroutine")
check(coroutine.status(co) == "dead", "coroutine status")
-- a producer/consumer pipeline
local function producer() return coroutine.wrap(function() for i = 1, 1000 do coroutine.yield(i) end end) end
local function filter(src) return coroutine.wrap(function()
  for v in src do if v % 3 == 0 then coroutine.yield(v) end end end) end
local total = 0
for v in filter(producer()) do total = total + v end
check(total == 166833, "coroutine pipeline")

-- errors
local ok, e = pcall(error, {code = 42})
check(not ok and e.code == 42, "error with a table")
ok, e = pcall(function() local x = nil; return x.field end)
check(not ok and e:find("attempt to index"), "runtime error message")
local tb
xpcall(function() error("deep") end, function(m) tb = debug.traceback(m) end)
check(tb:find("deep") and tb:find("stack traceback"), "xpcall with traceback")
ok, e = pcall(function() error("lvl", 2) end)
check(not ok and e:find("lvl"), "error level")
check(select(2, pcall(string.rep)):find("bad argument"), "argument check")

-- to-be-closed variables
local closed = {}
do
  local a <close> = setmetatable({}, {__close = function() closed[#closed + 1] = "a" end})
  local b <close> = setmetatable({}, {__close = function() closed[#closed + 1] = "b" end})
end
check(table.concat(closed) == "ba", "<close> order")
local k <const> = 5
check(k == 5, "<const>")

-- load, environments and string.dump
local chunk = load("return x * 2", "chunk", "t", {x = 21})
check(chunk() == 42, "load with an environment")
local f = load("local a, b = ... return a .. b")
local dumped = string.dump(f)
local g = load(dumped, "dumped", "b")
check(g("x", "y") == "xy", "string.dump round trip")
check(load("syntax error here") == nil, "load reports syntax errors")
local parts = {"return ", "1 ", "+ ", "2"}
local i = 0
check(load(function() i = i + 1; return parts[i] end)() == 3, "load from a reader function")

print("fib(25) = " .. fib(25))
print("OK control")
