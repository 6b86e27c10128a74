from captcha_tasks import solve_recaptcha_v2

result = solve_recaptcha_v2.delay(
    "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "https://example.com/login"
).get(timeout=120)
print(result["solution"][:24] + "...")
print(result["type"], result["protocol"], result["captcha_id"], result["solve_seconds"])
