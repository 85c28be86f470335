-- io and os functions that give deterministic results.
local function check(cond, what) if not cond then error("check failed: " .. what, 2) end end

local f = assert(io.tmpfile())
for i = 1, 1000 do f:write(i, "\t", i * i, "\n") end
f:seek("set", 0)
local lines, sum = 0, 0
for a, b in f:lines("n", "n") do lines = lines + 1; sum = sum + b - a end
check(lines == 1000 and sum == 333333000, "tmpfile write, seek and read numbers")
check(f:seek("end") > 0, "seek end")
f:close()
check(io.type(f) == "closed file", "io.type")

local name = os.tmpname()
local out = assert(io.open(name, "w"))
out:write("alpha\nbeta\n\ngamma")
out:close()
local got = {}
for line in io.lines(name) do got[#got + 1] = line end
check(#got == 4 and got[4] == "gamma" and got[3] == "", "io.lines")
local all = assert(io.open(name, "rb")):read("a")
check(#all == 17, "read all")
check(os.remove(name), "os.remove")
check(io.open(name) == nil, "removed file cannot be opened")

check(os.time({year = 2000, month = 1, day = 1, hour = 12}) > 0, "os.time with a table")
check(os.date("!%Y-%m-%d %H:%M:%S", 86400 * 365) == "1971-01-01 00:00:00", "os.date in UTC")
local d = os.date("!*t", 951782400)  -- 2000-02-29
check(d.year == 2000 and d.month == 2 and d.day == 29, "os.date *t")
check(type(os.clock()) == "number", "os.clock")
check(os.getenv("MIRECC_SURELY_UNSET_VARIABLE") == nil, "os.getenv")
check(os.execute() == true, "os.execute has a shell")
local p = io.popen("echo popen-works")
check(p:read("l") == "popen-works", "io.popen")
p:close()
print("OK io_os")
