-- Small numeric kernels (float-heavy code paths of the VM).
local function check(cond, what) if not cond then error("check failed: " .. what, 2) end end

-- spectral norm
local function A(i, j)
  local ij = i + j - 1
  return 1.0 / (ij * (ij - 1) * 0.5 + i)
end
local function Av(x, y, N)
  for i = 1, N do
    local a = 0
    for j = 1, N do a = a + x[j] * A(i, j) end
    y[i] = a
  end
end
local function Atv(x, y, N)
  for i = 1, N do
    local a = 0
    for j = 1, N do a = a + x[j] * A(j, i) end
    y[i] = a
  end
end
local function AtAv(x, y, t, N) Av(x, t, N); Atv(t, y, N) end
local N = 100
local u, v, t = {}, {}, {}
for i = 1, N do u[i] = 1 end
for _ = 1, 10 do AtAv(u, v, t, N); AtAv(v, u, t, N) end
local vBv, vv = 0, 0
for i = 1, N do
  local ui, vi = u[i], v[i]
  vBv = vBv + ui * vi; vv = vv + vi * vi
end
local norm = math.sqrt(vBv / vv)
print(string.format("spectral norm %0.9f", norm))
check(math.abs(norm - 1.274219991) < 1e-8, "spectral norm value")

-- mandelbrot count
local inside = 0
for py = 0, 59 do
  for px = 0, 79 do
    local cr, ci = px / 40 - 1.5, py / 30 - 1.0
    local zr, zi, k = 0.0, 0.0, 0
    while k < 100 and zr * zr + zi * zi < 4 do
      zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
      k = k + 1
    end
    if k == 100 then inside = inside + 1 end
  end
end
print("mandelbrot inside " .. inside)
check(inside > 0, "mandelbrot")

-- sieve
local limit = 200000
local composite = {}
local primes = 0
for i = 2, limit do
  if not composite[i] then
    primes = primes + 1
    for j = i * i, limit, i do composite[j] = true end
  end
end
check(primes == 17984, "prime count below 200000")
print("primes " .. primes)
print("OK numeric")
