"""``captcha-tasks mcp``: a Model Context Protocol server whose tools are thin clients of
the cluster (docs/guides/mcp.md).

Every tool call is an ordinary task sent as ``captcha_tasks.aio`` sends it; what this
package adds is the tools' schemas (:mod:`.tools`), the captchas found in a page's HTML
(:mod:`.find`), the agents and their budgets in Redis (:mod:`.agents`), the door every
HTTP request passes (:mod:`.gate`: tokens, bounded bodies, sessions bound to their agent)
and the server on the ``mcp`` SDK (:mod:`.server`, imported by :mod:`.cli` only when the
command runs).
"""
