"""``captcha-tasks purge``: end every solve waiting for a provider's thread."""

from __future__ import annotations

import click

__all__ = ["purge_command"]


@click.command("purge")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
def purge_command(force: bool) -> None:
    """End every solve waiting for a thread as revoked, sending none of them.

    Each caller's get() raises TaskRevokedError. Solves at a provider already run on
    (revoke them by id). celery -A captcha_tasks purge does the same for the queues
    solves are sent to, besides emptying the broker's queues.
    """
    from ..worker.app import app
    from ..worker.purge import purge_waiting_solves

    if not force:
        click.confirm("End every solve waiting for a thread (none is sent)?", abort=True)
    purged = purge_waiting_solves(app)
    click.echo(f"{purged} waiting solve{'' if purged == 1 else 's'} revoked")
