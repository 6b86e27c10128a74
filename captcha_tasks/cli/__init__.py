"""The ``captcha-tasks`` command: :mod:`.main` holds the group, each subcommand its own module
(loaded only when it runs), :mod:`.errors` the one way a command reports a failure."""
