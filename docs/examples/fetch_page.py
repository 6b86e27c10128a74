import os

from captcha_tasks import fetch_page

# `make run`'s protected demo site: `source .run/env` allows its host and port.
demo = "http://" + os.environ["CAPTCHA_TASKS_ALLOWED_DOMAINS"].split(",")[0]
page = fetch_page.delay(f"{demo}/page/1").get(timeout=120)
print(page["status"], page["solved"], page["source"])
