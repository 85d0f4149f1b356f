-- wrk script: every request posts a one-score predict
wrk.method = "POST"
wrk.body = '{"scores": [0.3]}'
wrk.headers["Content-Type"] = "application/json"
