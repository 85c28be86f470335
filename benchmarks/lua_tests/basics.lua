-- Numbers, strings and the standard library's pure functions.
-- Prints deterministic results; any failed check raises an error (exit 1).
local function check(cond, what) if not cond then error("check failed: " .. what, 2) end end

-- integers and floats
check(math.type(1) == "integer" and math.type(1.0) == "float", "math.type")
check(7 // 2 == 3 and -7 // 2 == -4 and 7 % -3 == -2, "floor division / modulo")
check(math.maxinteger + 1 == math.mininteger, "integer wrap-around")
check(3 / 2 == 1.5 and 2^10 == 1024.0, "float division / power")
check((0xF0 | 0x0F) == 0xFF and (0xFF & 0x3C) == 0x3C and (1 << 62) >> 61 == 2 and ~0 == -1, "bitwise")
check(("10" + 5) == 15 and ("0x10" + 0) == 16 and tonumber("  12  ") == 12, "coercion")
check(tonumber("z", 36) == 35 and tonumber("777", 8) == 511, "tonumber base")
check(math.tointeger(3.0) == 3 and math.tointeger(3.5) == nil, "tointeger")
check(math.ult(1, -1) and math.abs(math.mininteger) == math.mininteger, "ult / abs")
check(string.format("%.3f", math.pi) == "3.142" and math.floor(-3.5) == -4 and math.ceil(-3.5) == -3, "floor / ceil")
local s = 0
for i = 1, 1000 do s = s + i * i end
check(s == 333833500, "sum of squares")
local f = 0.0
for i = 1, 100000 do f = f + 1.0 / (i * i) end
print(string.format("basel %.12f", f))

-- strings
check(("hello"):upper() == "HELLO" and ("abc"):rep(3, "-") == "abc-abc-abc", "upper / rep")
check(("hello world"):sub(-5) == "world" and ("hello"):byte(1) == 104 and string.char(72, 105) == "Hi", "sub / byte / char")
check(select(2, ("a,b,,c"):gsub(",", ";")) == 3, "gsub count")
check(("key = value"):match("^(%w+)%s*=%s*(%w+)$") == "key", "match captures")
local words = {}
for w in ("the quick brown fox"):gmatch("%a+") do words[#words + 1] = w end
check(#words == 4 and words[3] == "brown", "gmatch")
check(("%d items"):format(3) == "3 items" and ("x"):rep(0) == "", "format / empty rep")
check(("THE (quick) fox"):find("(", 1, true) == 5, "plain find")
check(("abc"):reverse() == "cba" and ("  trim  "):match("^%s*(.-)%s*$") == "trim", "reverse / trim")
check(string.format("%q", "a\nb\0c\"") == '"a\\\nb\\0c\\""', "%q")
check(string.format("%5.1f|%-5d|%x|%g", 3.14159, 42, 255, 1e20) == "  3.1|42   |ff|1e+20", "format mix")
local packed = string.pack("<i4 d z", -2, 0.5, "zs")
local a, b, c = string.unpack("<i4 d z", packed)
check(a == -2 and b == 0.5 and c == "zs" and #packed == 4 + 8 + 3, "pack / unpack")
local gs = ("hello world from lua"):gsub("(%w+)", function(w) return w:sub(1, 1):upper() .. w:sub(2) end)
check(gs == "Hello World From Lua", "gsub with function")
check(("$name is $age"):gsub("%$(%w+)", {name = "Ann", age = 7}) == "Ann is 7", "gsub with table")

-- utf8
local u = "h\u{E9}llo \u{4E16}\u{754C}"
check(utf8.len(u) == 8 and utf8.char(0x4E16) == "\u{4E16}", "utf8.len / char")
local cps = {}
for _, cp in utf8.codes(u) do cps[#cps + 1] = cp end
check(cps[2] == 0xE9 and cps[8] == 0x754C, "utf8.codes")
check(utf8.offset(u, 3) == 4, "utf8.offset")

-- a string hash, to print something that depends on many operations
local h = 5381
for i = 1, 20000 do
  local piece = tostring(i * 7919 % 10007)
  for j = 1, #piece do h = (h * 33 + piece:byte(j)) & 0xFFFFFFFF end
end
print(string.format("djb2 %08x", h))
print("OK basics")
