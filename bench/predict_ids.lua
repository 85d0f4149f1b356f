-- wrk script: every request posts a one-score predict with a fresh id, so each is logged
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  counter = 0
end

function request()
  counter = counter + 1
  local body = '{"scores": [0.3], "ids": ["' .. tid .. "-" .. counter .. '"]}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
