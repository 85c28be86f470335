-- Tables, sorting, metatables and the garbage collector.
local function check(cond, what) if not cond then error("check failed: " .. what, 2) end end

math.randomseed(42)
local t = {}
for i = 1, 20000 do t[i] = math.random(1, 1000000) end
table.sort(t)
for i = 2, #t do check(t[i - 1] <= t[i], "sorted ascending") end
table.sort(t, function(x, y) return x > y end)
for i = 2, #t do check(t[i - 1] >= t[i], "sorted descending") end

local list = {}
for i = 1, 10 do table.insert(list, i) end
table.insert(list, 1, 0)
check(table.remove(list) == 10 and table.remove(list, 1) == 0 and #list == 9, "insert / remove")
check(table.concat(list, ",") == "1,2,3,4,5,6,7,8,9", "concat")
check(select("#", table.unpack(list)) == 9, "unpack")
local moved = table.move(list, 1, 3, 2, {})
check(moved[2] == 1 and moved[4] == 3 and moved[1] == nil, "move")
local p = table.pack(1, nil, 3)
check(p.n == 3 and p[3] == 3, "pack")

-- a big hash table
local big = {}
for i = 1, 100000 do big["k" .. i] = i end
local count, total = 0, 0
for k, v in pairs(big) do count = count + 1; total = total + v end
check(count == 100000 and total == 5000050000, "pairs over a big table")
for i = 1, 100000, 2 do big["k" .. i] = nil end
count = 0
for _ in pairs(big) do count = count + 1 end
check(count == 50000, "deleting half of the keys")

-- metatables
local Vec = {}
Vec.__index = Vec
function Vec.new(x, y) return setmetatable({x = x, y = y}, Vec) end
function Vec.__add(a, b) return Vec.new(a.x + b.x, a.y + b.y) end
function Vec.__eq(a, b) return a.x == b.x and a.y == b.y end
function Vec.__lt(a, b) return a:len2() < b:len2() end
function Vec.__le(a, b) return a:len2() <= b:len2() end
function Vec.__tostring(a) return "(" .. a.x .. "," .. a.y .. ")" end
function Vec.__len(a) return 2 end
function Vec.__call(a, k) return a[k] end
function Vec.__concat(a, b) return tostring(a) .. tostring(b) end
function Vec:len2() return self.x * self.x + self.y * self.y end
local v = Vec.new(1, 2) + Vec.new(3, 4)
check(v == Vec.new(4, 6) and tostring(v) == "(4,6)" and #v == 2 and v("y") == 6, "vector metamethods")
check(Vec.new(1, 1) < Vec.new(2, 2) and Vec.new(1, 1) <= Vec.new(1, 1), "__lt / __le")
check(Vec.new(0, 1) .. Vec.new(1, 0) == "(0,1)(1,0)", "__concat")

local log = {}
local proxy = setmetatable({}, {
  __index = function(_, k) return k .. "!" end,
  __newindex = function(tbl, k, val) log[#log + 1] = k; rawset(tbl, k, val) end,
})
check(proxy.foo == "foo!", "__index function")
proxy.bar = 1
check(proxy.bar == 1 and log[1] == "bar", "__newindex")

-- inheritance chain
local Base = {kind = "base"}
Base.__index = Base
function Base:describe() return self.kind .. ":" .. self.name end
local Derived = setmetatable({kind = "derived"}, {__index = Base})
Derived.__index = Derived
local obj = setmetatable({name = "o"}, Derived)
check(obj:describe() == "derived:o", "inheritance")

-- weak tables and collectgarbage
local weak = setmetatable({}, {__mode = "k"})
do
  for i = 1, 100 do weak[{}] = i end
end
collectgarbage(); collectgarbage()
local left = 0
for _ in pairs(weak) do left = left + 1 end
check(left == 0, "weak keys collected")
local finalized = 0
do
  for i = 1, 10 do setmetatable({}, {__gc = function() finalized = finalized + 1 end}) end
end
collectgarbage(); collectgarbage()
check(finalized == 10, "__gc finalizers ran")
check(collectgarbage("count") > 0, "collectgarbage count")

-- checksum over the sorted data
local sum = 0
for i = 1, #t, 97 do sum = (sum * 31 + t[i]) % 1000000007 end
print("sorted checksum " .. sum)
print("OK tables")
