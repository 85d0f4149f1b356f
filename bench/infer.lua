-- wrk script: every request posts a one-score infer (Open Inference Protocol, JSON tensors)
-- as tritonclient sends it, built per request as predict.lua builds its own
function request()
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"},
    '{"inputs": [{"name": "scores", "shape": [1], "datatype": "FP64", "data": [0.3]}]}')
end
