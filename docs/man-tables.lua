-- Tables in the manual pages: column widths that fit an 80-column terminal (man indents
-- the text by 7 and tbl puts 3 between columns), wrapping long cells.
function Table(t)
  local k = #t.colspecs
  local share = (64 - 3 * (k - 1)) / 70
  for i, c in ipairs(t.colspecs) do
    local w = c[2]
    if type(w) ~= 'number' then w = 1 / k end
    t.colspecs[i] = { c[1], w * share }
  end
  return t
end
