import asyncio

from captcha_tasks import aio, get_balance

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


async def main() -> None:
    one = await aio.solve_recaptcha_v2(SITEKEY, "https://example.com/login")
    print(one["solution"][:16], one["captcha_id"])
    # Many at once: one loop, one Redis pub/sub connection for all of them.
    many = await asyncio.gather(
        *(aio.solve_recaptcha_v2(SITEKEY, f"https://example.com/{i}") for i in range(50))
    )
    print(len(many), "tokens")
    # Anything sent already, by .delay() or aio.send(): await its result.
    print(await aio.result(get_balance.delay(), timeout=30))
    try:
        await aio.solve_recaptcha_v2(SITEKEY, "https://example.com/slow", timeout=0.01)
    except asyncio.TimeoutError:
        print("gave up waiting; the solve itself goes on")


asyncio.run(main())
