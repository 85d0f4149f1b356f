-- wrk script: every request posts a one-score predict (built per request, as predict_ids.lua
-- builds its own, so that both cost the load generator alike)
function request()
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, '{"scores": [0.3]}')
end
